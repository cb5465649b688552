// strata train as a user runs it: the default job (shortened), and kill -9 + --resume.
// Labelled "slow": each test trains for tens of seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "../e2e/cli_support.h"
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

// The parameter record of a checkpoint (record 1; see docs/formats/checkpoint.md).
std::string Params(const std::string& path) {
  auto r = record::RecordReader::Open(path);
  EXPECT_TRUE(r.ok()) << path;
  if (!r.ok()) return "";
  std::string header, params;
  EXPECT_TRUE((*r)->ReadRecord(&header).ok());
  EXPECT_TRUE((*r)->ReadRecord(&params).ok());
  return params;
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

TEST(TrainCli, KillNineThenResumeEndsWithTheSameWeights) {
  const std::string dir = ::testing::TempDir() + "/strata-train-resume";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string args = " train --epochs 2 --steps-per-epoch 30 --deterministic --seed 7";
  const std::string common = Env() + Strata() + args;
  auto straight = RunCommand(common + " --checkpoint-dir " + dir + "/a --out " + dir + "/a.ckpt", true);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  // Start the same run, kill -9 it once its first backup exists, then resume.
  const std::string backup = dir + "/b/backup.ckpt";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // `exec VAR=value cmd` would exec a program named "VAR=value": export first.
    std::string cmd = "export " + Env() + "&& exec " + Strata() + args + " --checkpoint-dir " + dir + "/b --out " + dir + "/b.ckpt >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool killed = false;
  for (int i = 0; i < 6000 && !killed; ++i) {
    if (fs::exists(backup)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the steps after it
      ::kill(pid, SIGKILL);
      killed = true;
    } else {
      int status;
      if (::waitpid(pid, &status, WNOHANG) == pid) break;  // finished before a backup: fails below
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(killed) << "the run ended before writing a backup";
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_FALSE(fs::exists(dir + "/b.ckpt"));  // it never finished

  auto resumed = RunCommand(common + " --checkpoint-dir " + dir + "/b --resume --out " + dir + "/b.ckpt", true);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  std::string a = Params(dir + "/a.ckpt"), b = Params(dir + "/b.ckpt");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "resumed weights differ from the uninterrupted run";
}

}  // namespace
}  // namespace strata::testing
