// Multi-worker training over MPI on one machine (loopback): equivalence with one process
// holding all the replicas, a killed rank ending the job with a clear error, the all-reduce
// overlapped with the backward pass, and MultiWorker BackupAndRestore after a kill -9.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "../e2e/cli_support.h"
#include "strata/record/record_reader.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

std::string Env() {
  std::string cache = ::testing::TempDir() + "/strata-train-cache";
  fs::create_directories(cache);
  return "STRATA_CACHE_DIR=" + cache + " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
}
// Loopback only; MPMD tests append their own "-np 1 A : -np 1 B".
const std::string kMpirunFlags = "mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp --mca btl_tcp_if_include lo ";
const std::string kMpirun = kMpirunFlags + "-np 2 ";

std::vector<float> Params(const std::string& path) {
  auto r = record::RecordReader::Open(path);
  EXPECT_TRUE(r.ok()) << path;
  std::string header, params;
  if (!r.ok()) return {};
  EXPECT_TRUE((*r)->ReadRecord(&header).ok());
  EXPECT_TRUE((*r)->ReadRecord(&params).ok());
  std::vector<float> v(params.size() / 4);
  std::memcpy(v.data(), params.data(), v.size() * 4);
  return v;
}

// The largest absolute difference between two checkpoints' parameters (same model);
// infinity when either cannot be read or they differ in size (the caller's bound fails).
double MaxWeightDifference(const std::string& path_a, const std::string& path_b) {
  auto a = Params(path_a), b = Params(path_b);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_FALSE(a.empty());
  if (a.empty() || a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
  return max_diff;
}

TEST(MpiTrain, TwoWorkersOfTwoReplicasMatchFourReplicasInOneProcess) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = ::testing::TempDir() + "/strata-mpi";
  fs::create_directories(dir);
  // A small learning rate: at a large one the first steps are chaotic and amplify the
  // different summation order far beyond rounding (seen: 0.09 after 12 steps at lr 0.05).
  const std::string common = " train --epochs 1 --steps-per-epoch 6 --deterministic --seed 3 --batch-per-replica 32 --lr 0.001 ";
  const std::string flags = common + "--replicas 2 ";
  // Direct convolutions: each step re-rounds the two runs' tiny difference at the kernels'
  // own error, and Winograd's is ~6x direct's (seen: 1.7e-4 after 6 steps against 5.8e-6,
  // both after 1.2e-7 at steps 1 and 2). The sums under test are the same either way.
  const std::string env = Env() + "STRATA_CONV_ALGORITHM=direct ";
  auto one = RunCommand(env + Strata() + common + "--replicas 4 --out " + dir + "/single.ckpt", true);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = RunCommand(env + kMpirun + Strata() + flags + "--out " + dir + "/mpi.ckpt", true);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("MultiWorkerMirroredStrategy replicas: 4"), std::string::npos) << two.output;
  const double max_diff = MaxWeightDifference(dir + "/single.ckpt", dir + "/mpi.ckpt");
  // Only the order of the gradient sums differs (host means, then the mean of hosts).
  EXPECT_LT(max_diff, 1e-5) << "largest weight difference " << max_diff;
}

TEST(MpiTrain, SynchronizedBatchNormTwoWorkersOfTwoReplicasMatchFourReplicasInOneProcess) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  // The batch statistics go through the workers' MPI all-reduce (replica 0 of each worker)
  // as well as the in-process barrier: the same global-batch statistics as four replicas in one.
  const std::string dir = ::testing::TempDir() + "/strata-mpi-syncbn";
  fs::create_directories(dir);
  const std::string spec = dir + "/sync_bn.json";
  {
    std::FILE* f = std::fopen(spec.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"class_name": "Sequential", "config": {"name": "sync_bn_cnn", "layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1]}},
      {"class_name": "Conv2D", "config": {"filters": 8, "kernel_size": 3, "strides": 2, "padding": "same", "use_bias": false}},
      {"class_name": "BatchNormalization", "config": {"synchronized": true}},
      {"class_name": "ReLU", "config": {}},
      {"class_name": "GlobalAveragePooling2D", "config": {}},
      {"class_name": "Dense", "config": {"units": 10}}]}})",
               f);
    std::fclose(f);
  }
  // lr 0.05: large enough that statistics of the worker's 64 rows instead of the global 128
  // show (seen: 3e-4 when the all-reduce is skipped; 1.5e-8 with it).
  const std::string common = " train --model " + spec +
                             " --epochs 1 --steps-per-epoch 6 --deterministic --seed 3 --batch-per-replica 32 --lr 0.05 ";
  auto one = RunCommand(Env() + Strata() + common + "--replicas 4 --out " + dir + "/single.ckpt", true);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = RunCommand(Env() + kMpirun + Strata() + common + "--replicas 2 --out " + dir + "/mpi.ckpt", true);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const double max_diff = MaxWeightDifference(dir + "/single.ckpt", dir + "/mpi.ckpt");
  EXPECT_LT(max_diff, 1e-5) << "largest weight difference " << max_diff;
}

TEST(MpiTrain, AKilledRankEndsTheJobWithAClearError) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  // Start a long job, kill -9 one of its two worker processes once both train, and expect
  // the job to end (not hang) with an error naming what died.
  const std::string dir = ::testing::TempDir() + "/strata-mpi-kill";
  fs::create_directories(dir);
  const std::string script = dir + "/kill.sh";
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f,
                 "%s STRATA_COLLECTIVE_TIMEOUT=20 %s %s train --epochs 1 --steps-per-epoch 400 --replicas 1 "
                 "--batch-per-replica 32 --seed 97531 &\n"
                 "job=$!\n"
                 "for i in $(seq 1 900); do\n"
                 "  [ \"$(pgrep -f 'strata train.*seed 97531' | wc -l)\" -ge 2 ] && break; sleep 0.1\n"
                 "done\n"
                 "sleep 8\n"
                 "kill -9 $(pgrep -f 'strata train.*seed 97531' | tail -1)\n"
                 "start=$(date +%%s)\n"
                 "wait $job; rc=$?\n"
                 "echo \"job ended rc=$rc $(( $(date +%%s) - start )) s after the kill\"\n"
                 "exit $rc\n",
                 ("env " + Env()).c_str(), kMpirun.c_str(), Strata().c_str());
    std::fclose(f);
  }
  auto r = RunCommand("timeout 240 bash " + script, true);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it:\n" << r.output;
  EXPECT_NE(r.output.find("job ended"), std::string::npos) << r.output;
  // mpirun names the process that died; a surviving worker's watchdog names the collective.
  EXPECT_TRUE(r.output.find("signal 9") != std::string::npos || r.output.find("did not complete") != std::string::npos ||
              r.output.find("exited on signal") != std::string::npos)
      << r.output;
}

TEST(MpiTrain, DevicesUnderMpirunListsEveryWorker) {
  auto r = RunCommand(Env() + kMpirun + Strata() + " devices", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cluster   2 workers (OpenMPI)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worker 0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worker 1\n"), std::string::npos) << r.output;
  auto j = RunCommand(Env() + kMpirun + Strata() + " devices --json", false);
  ASSERT_EQ(j.exit_code, 0) << j.output;
  auto json = nlohmann::json::parse(j.output);
  EXPECT_EQ(json["hosts"], 2);
  EXPECT_EQ(json["host_list"].size(), 2u);
}

TEST(MpiTrain, MismatchedWorkersAreReportedAtStart) {
  // mpirun's MPMD form starts two different command lines as one job.
  const std::string base = " train --epochs 1 --steps-per-epoch 3 --no-monitor ";
  auto replicas = RunCommand("timeout 120 env " + Env() + kMpirunFlags + "-np 1 " + Strata() + base + "--replicas 1 : -np 1 " +
                                 Strata() + base + "--replicas 2",
                             true);
  EXPECT_NE(replicas.exit_code, 0) << replicas.output;
  EXPECT_NE(replicas.output.find("workers disagree on replicas per worker: worker 0 (") , std::string::npos) << replicas.output;
  auto batch = RunCommand("timeout 120 env " + Env() + kMpirunFlags + "-np 1 " + Strata() + base +
                              "--replicas 1 --batch-per-replica 32 : -np 1 " + Strata() + base +
                              "--replicas 1 --batch-per-replica 16",
                          true);
  EXPECT_NE(batch.exit_code, 0) << batch.output;
  EXPECT_NE(batch.exit_code, 124) << "hung: " << batch.output;
  EXPECT_NE(batch.output.find("workers disagree on"), std::string::npos) << batch.output;
  EXPECT_NE(batch.output.find("worker 1 has"), std::string::npos) << batch.output;
}

// The cross-host all-reduce overlapped with the backward pass (buckets started from the
// program's kernel hook as the backward pass finishes them) gives the same bits as the
// all-reduce after the whole backward pass: the in-host sums are the reduce-scatter's, and
// two workers' float sum does not depend on how the block is cut into buckets. Small buckets
// (16 KiB) and two replicas per worker, so many buckets start from both replicas' hooks.
TEST(MpiTrain, AllReduceOverlapOnAndOffGiveTheSameBits) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = ::testing::TempDir() + "/strata-mpi-overlap";
  fs::create_directories(dir);
  const std::string common = " train --epochs 1 --steps-per-epoch 6 --deterministic --seed 5 --batch-per-replica 16 "
                             "--replicas 2 --lr 0.05 --no-monitor ";
  auto on = RunCommand(Env() + "STRATA_ALLREDUCE_BUCKET_BYTES=16384 " + kMpirun + Strata() + common + "--out " + dir + "/on.ckpt", true);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  auto off = RunCommand(Env() + "STRATA_ALLREDUCE_BUCKET_BYTES=16384 STRATA_ALLREDUCE_OVERLAP=0 " + kMpirun + Strata() + common +
                            "--out " + dir + "/off.ckpt",
                        true);
  ASSERT_EQ(off.exit_code, 0) << off.output;
  const std::vector<float> a = Params(dir + "/on.ckpt"), b = Params(dir + "/off.ckpt");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
      << "largest weight difference " << MaxWeightDifference(dir + "/on.ckpt", dir + "/off.ckpt");
  EXPECT_NE(on.output.find("cross-host all-reduce:"), std::string::npos) << on.output;
}

// MultiWorker BackupAndRestore: kill -9 one rank after the chief wrote a backup, the job ends
// with mpirun naming the dead process; the same command again resumes from the backup (every
// worker restores the chief's file and its own input position) and ends with the weights of
// a run that was never interrupted.
TEST(MpiTrain, KillOneRankThenTheSameCommandResumesFromTheBackup) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = ::testing::TempDir() + "/strata-mpi-backup";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Backups every 20 steps and at the epoch end: the first at step 20 of 40, mid-epoch (one
  // epoch: the chief validates once per run).
  auto command = [&](const std::string& run) {
    return Env() + "STRATA_COLLECTIVE_TIMEOUT=20 " + kMpirun + Strata() +
           " train --epochs 1 --steps-per-epoch 40 --deterministic --seed 4242 --replicas 1 --batch-per-replica 16 "
           "--lr 0.01 --no-monitor --resume --checkpoint-dir " +
           dir + "/" + run + " --out " + dir + "/" + run + ".ckpt";
  };
  auto straight = RunCommand(command("a"), true);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const std::string script = dir + "/kill.sh";
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f,
                 "%s &\n"
                 "job=$!\n"
                 "for i in $(seq 1 1800); do [ -e %s/b/backup.ckpt ] && break; sleep 0.05; done\n"
                 "[ -e %s/b/backup.ckpt ] || { echo 'no backup was written'; wait $job; exit 99; }\n"
                 "sleep 0.3\n"
                 "kill -9 $(pgrep -f 'strata train.*seed 4242' | tail -1)\n"
                 "wait $job; rc=$?\n"
                 "echo \"job ended rc=$rc\"\n"
                 "exit $rc\n",
                 command("b").c_str(), dir.c_str(), dir.c_str());
    std::fclose(f);
  }
  auto killed = RunCommand("timeout 240 bash " + script, true);
  ASSERT_NE(killed.exit_code, 99) << killed.output;
  EXPECT_NE(killed.exit_code, 0) << "the job finished before the kill:\n" << killed.output;
  EXPECT_NE(killed.exit_code, 124) << "the job hung until timeout killed it:\n" << killed.output;
  EXPECT_TRUE(killed.output.find("signal 9") != std::string::npos || killed.output.find("did not complete") != std::string::npos ||
              killed.output.find("exited on signal") != std::string::npos)
      << killed.output;
  ASSERT_FALSE(fs::exists(dir + "/b.ckpt")) << "it never finished";
  ASSERT_TRUE(fs::exists(dir + "/b/backup.ckpt"));

  auto resumed = RunCommand(command("b"), true);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("BackupAndRestore: resuming from " + dir + "/b/backup.ckpt"), std::string::npos)
      << resumed.output;
  // The same steps on the same examples from the same state: the same bits.
  const double max_diff = MaxWeightDifference(dir + "/a.ckpt", dir + "/b.ckpt");
  EXPECT_EQ(max_diff, 0.0) << "resumed weights differ from the uninterrupted run by up to " << max_diff;
}

}  // namespace
}  // namespace strata::testing
