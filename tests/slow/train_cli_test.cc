// strata train as a user runs it: the default job (shortened), and kill -9 + --resume at a
// random step and inside a backup write (fault points: keras/fault_point.h).
// Labelled "slow": each test trains for tens of seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <tuple>

#include "../e2e/cli_support.h"
#include "common/record_ends.h"
#include "fault_support.h"
#include "strata/core/file.h"
#include "strata/record/record_reader.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// One cache for the whole binary: the Fashion-MNIST TFRecords are made once.
std::string Env() {
  static const std::string cache = [] {
    std::string c = ::testing::TempDir() + "/strata-train-cache";
    fs::create_directories(c);
    return c;
  }();
  return "STRATA_CACHE_DIR=" + cache + " ";
}

TEST(TrainCli, DefaultJobPrintsTestAccuracyAndSavesTheModel) {
  const std::string dir = ::testing::TempDir() + "/strata-train-default";
  fs::create_directories(dir);
  auto r = RunCommand(Env() + Strata() + " train --epochs 1 --steps-per-epoch 40 --out " + dir +
                          "/model.ckpt --summary-json " + dir + "/summary.json",
                      /*merge_stderr=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Total params: 468,394"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch 1/1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model saved to " + dir + "/model.ckpt"), std::string::npos) << r.output;
  auto pos = r.output.find("test accuracy: 0.");
  ASSERT_NE(pos, std::string::npos) << r.output;
  auto summary = nlohmann::json::parse(*ReadFileToString(dir + "/summary.json"));
  // 40 steps of 128 x replicas images (warm-up then cosine decay) learn: 0.56 here, against
  // 0.63 for PyTorch's same recipe (bench/torch_fashion_recipe.py --epochs 1 --steps-per-epoch 40).
  // The moving batch-norm statistics still hold most of their initial values after 40 steps
  // (momentum 0.99), so test accuracy lags training; four times chance is the bar.
  EXPECT_GT(summary["test_accuracy"].get<double>(), 0.4) << summary.dump();
  EXPECT_EQ(summary["seconds_at_epoch_end"].size(), 1u) << summary.dump();
  EXPECT_GT(summary["images_per_second"].get<double>(), 0);
  EXPECT_TRUE(fs::exists(dir + "/model.ckpt"));
}

// kill -9 and --resume: 2 epochs of 30 steps, backups at global steps 20, 30 (epoch end) and 40
// (and 60, deleted when the run ends). The run that is never interrupted is made once.
// Validation on 2 batches of the test set (--validation-steps): what the tests compare is the weights.
const std::string kResumeArgs = " train --epochs 2 --steps-per-epoch 30 --deterministic --seed 7 --validation-steps 2";

std::string ResumeDir() { return ::testing::TempDir() + "/strata-train-resume"; }

// The uninterrupted run's final checkpoint (made once per build of strata, shared by the tests).
const CheckpointRead& Uninterrupted() {
  static const CheckpointRead straight = ReferenceRun(ResumeDir(), [](const std::string& backup_dir, const std::string& out) {
    return Env() + Strata() + kResumeArgs + " --checkpoint-dir " + backup_dir + " --out " + out;
  });
  return straight;
}

// The resumed run ends with the uninterrupted run's weights and optimizer slots, bit for bit.
void ExpectSameBitsAsUninterrupted(const std::string& path) {
  const CheckpointRead& a = Uninterrupted();
  ASSERT_TRUE(a.ok) << a.error;
  const CheckpointRead b = ReadWholeCheckpoint(path);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_GT(a.params.size(), 0u);
  EXPECT_TRUE(a.params == b.params) << "resumed weights differ from the uninterrupted run";
  EXPECT_TRUE(a.slots == b.slots) << "resumed optimizer slots differ from the uninterrupted run";
}

// Stops the run at global step `kill_step` (a fault point: it prints its pid and waits), kill -9s
// it there and returns the output; the backup directory is `dir`/`run`.
std::string RunAndKillAt(const std::string& fault, const std::string& dir, const std::string& run) {
  BackgroundJob job = BackgroundJob::Start("export " + Env() + "STRATA_FAULT_PAUSE=" + fault + " && exec " + Strata() + kResumeArgs +
                                               " --checkpoint-dir " + dir + "/" + run + " --out " + dir + "/" + run + ".ckpt",
                                           dir + "/" + run + ".log");
  const std::string paused = "strata: fault point " + fault + " reached";
  const bool reached = job.WaitForText(paused, 600);
  std::string out = job.output();
  const long pid = NumberAfter(out, ", pid ");
  EXPECT_TRUE(reached) << out;
  EXPECT_EQ(pid, job.pid) << out;  // `exec`: the shell became strata
  if (reached && pid == job.pid) ::kill(static_cast<pid_t>(pid), SIGKILL);
  job.Wait(60);
  out = job.output();
  EXPECT_TRUE(job.ended && WIFSIGNALED(job.status) && WTERMSIG(job.status) == SIGKILL) << "not ended by kill -9:\n" << out;
  job.KillAll();
  EXPECT_FALSE(fs::exists(dir + "/" + run + ".ckpt")) << "the killed run finished:\n" << out;
  return out;
}

// kill -9 after a random global step K (seeded; the seed is printed): the backup on disk is the
// last one written before K, the resumed run says it resumed from exactly there (not from 0)
// and ends with the uninterrupted run's weights, bit for bit.
TEST(TrainCli, KillNineAtARandomStepThenResumeFromTheLastBackup) {
  const std::string dir = FreshDir(ResumeDir(), "random-step");
  std::mt19937_64 rng(TestSeed("TrainCli.KillNineAtARandomStepThenResumeFromTheLastBackup"));
  const int kill_step = std::uniform_int_distribution<int>(21, 59)(rng);
  // The backups before the kill: step 20, the epoch end (30) once step 31 ran, step 40.
  const int backup_step = kill_step >= 40 ? 40 : kill_step >= 31 ? 30 : 20;
  const int epoch = backup_step / 30 + 1, step_in_epoch = backup_step % 30;
  std::printf("[ fault    ] kill -9 after global step %d; expect the resume from global step %d (epoch %d, step %d)\n",
              kill_step, backup_step, epoch, step_in_epoch);
  ASSERT_TRUE(Uninterrupted().ok);

  const std::string killed = RunAndKillAt("after-step:" + std::to_string(kill_step), dir, "b");
  const CheckpointRead backup = ReadWholeCheckpoint(dir + "/b/backup.ckpt");
  ASSERT_TRUE(backup.ok) << backup.error << "\n" << killed;
  EXPECT_EQ(backup.global_step, backup_step) << killed;

  auto resumed = RunCommand(Env() + Strata() + kResumeArgs + " --checkpoint-dir " + dir + "/b --resume --out " + dir + "/b.ckpt", true);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string said = "BackupAndRestore: resuming from " + dir + "/b/backup.ckpt: resumed from epoch " + std::to_string(epoch) +
                           ", step " + std::to_string(step_in_epoch) + " (global step " + std::to_string(backup_step) + ")";
  EXPECT_NE(resumed.output.find(said), std::string::npos) << "expected: " << said << "\n" << resumed.output;
  // It trained the rest, not the whole run: epoch 1's progress line only when it resumed inside it.
  EXPECT_EQ(resumed.output.find("Epoch 1/2") != std::string::npos, epoch == 1) << resumed.output;
  ExpectSameBitsAsUninterrupted(dir + "/b.ckpt");
}

// --resume when backup.ckpt itself is damaged (a byte flipped inside the parameters; the file
// cut at a record boundary, where every record left is whole): the run stops before training
// with a line naming the file and the damage, never starting again from step 0, and leaves the
// damaged backup as it was (the user's to inspect) and no model. Run on copies of `run`'s
// backup directory in `dir`.
void ExpectADamagedBackupStopsTheResume(const std::string& dir, const std::string& run) {
  const std::string whole = *ReadFileToString(dir + "/" + run + "/backup.ckpt");
  // The second record holds the parameters: its data lies between its 12-byte header and its
  // 4-byte data CRC.
  const std::vector<size_t> ends = RecordEnds(whole);
  ASSERT_EQ(ends.size(), 4u) << "a checkpoint is 4 records";
  const size_t params_data = ends[0] + record::kHeaderSize, params_end = ends[1] - record::kFooterSize;
  std::string flipped = whole;
  flipped[(params_data + params_end) / 2] ^= 0x10;
  const std::string cut = whole.substr(0, ends[1]);  // header and parameters only
  for (const auto& [name, bytes, damage] :
       {std::tuple<std::string, std::string, std::string>{"flipped", flipped, "bad data CRC in " + dir + "/" + run + "-flipped/backup.ckpt"},
        {"cut", cut, "cut short, it ends after 2 of its 4 records, before the optimizer slots"}}) {
    const std::string backups = dir + "/" + run + "-" + name;
    fs::create_directories(backups);
    const std::string path = backups + "/backup.ckpt";
    ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    auto r = RunCommand(Env() + Strata() + kResumeArgs + " --checkpoint-dir " + backups + " --resume --out " + backups + ".ckpt", true);
    EXPECT_NE(r.exit_code, 0) << name << ": a damaged backup was resumed from\n" << r.output;
    EXPECT_NE(r.output.find("checkpoint " + path), std::string::npos) << name << ": the file is not named\n" << r.output;
    EXPECT_NE(r.output.find(damage), std::string::npos) << name << ": the damage is not named\n" << r.output;
    EXPECT_EQ(r.output.find("Epoch 1/2"), std::string::npos) << name << ": it trained\n" << r.output;
    EXPECT_FALSE(fs::exists(backups + ".ckpt")) << name << ": a model was saved";
    EXPECT_EQ(*ReadFileToString(path), bytes) << name << ": the damaged backup was replaced or removed";
  }
}

// kill -9 inside a backup write (fault point: every byte in the temporary, before the fsync and
// rename): the previous backup (step 20) is untouched and whole, and the run resumes from it.
TEST(TrainCli, KillNineInsideABackupWriteLeavesThePreviousBackupToResumeFrom) {
  const std::string dir = FreshDir(ResumeDir(), "backup-write");
  ASSERT_TRUE(Uninterrupted().ok);
  // The second backup write is the epoch end's, global step 30; the first was step 20's.
  const std::string killed = RunAndKillAt("backup-write:2", dir, "c");
  EXPECT_NE(killed.find("backup of global step 30 in its temporary"), std::string::npos) << killed;
  const std::vector<std::string> temps = FilesStartingWith(dir + "/c", "backup.ckpt.tmp-");
  ASSERT_EQ(temps.size(), 1u) << "the killed write's temporary\n" << killed;
  EXPECT_GT(fs::file_size(temps[0]), 0u);
  const CheckpointRead temp = ReadWholeCheckpoint(temps[0]);
  EXPECT_EQ(temp.global_step, 30) << temp.error;  // the write had got that far: it was really in progress
  const CheckpointRead backup = ReadWholeCheckpoint(dir + "/c/backup.ckpt");
  ASSERT_TRUE(backup.ok) << backup.error;
  EXPECT_EQ(backup.global_step, 20);

  ExpectADamagedBackupStopsTheResume(dir, "c");

  auto resumed = RunCommand(Env() + Strata() + kResumeArgs + " --checkpoint-dir " + dir + "/c --resume --out " + dir + "/c.ckpt", true);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from epoch 1, step 20 (global step 20)"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("BackupAndRestore: removed " + temps[0] + ", a backup write that never finished"), std::string::npos)
      << resumed.output;
  EXPECT_TRUE(FilesStartingWith(dir + "/c", "backup.ckpt.tmp-").empty());
  ExpectSameBitsAsUninterrupted(dir + "/c.ckpt");
}

}  // namespace
}  // namespace strata::testing
