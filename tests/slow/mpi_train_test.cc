// Multi-worker training over MPI on one machine (loopback): equivalence with one process
// holding all the replicas, the all-reduce overlapped with the backward pass, and faults:
// MultiWorker BackupAndRestore after a kill -9 at a random step or inside a backup write, a
// stopped or killed rank named by Strata's watchdog, slow workers that are not taken for dead.
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "../e2e/cli_support.h"
#include "fault_support.h"
#include "strata/core/file.h"
#include "strata/record/record_reader.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// Loopback only; MPMD tests append their own "-np 1 A : -np 1 B".
const std::string kMpirunFlags = "mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp --mca btl_tcp_if_include lo ";
const std::string kMpirun = kMpirunFlags + "-np 2 ";

TEST(MpiTrain, TwoWorkersOfTwoReplicasMatchFourReplicasInOneProcess) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = ::testing::TempDir() + "/strata-mpi";
  fs::create_directories(dir);
  // A small learning rate: at a large one the first steps are chaotic and amplify the
  // different summation order far beyond rounding (seen: 0.09 after 12 steps at lr 0.05).
  const std::string common = " train --epochs 1 --steps-per-epoch 6 --deterministic --seed 3 --batch-per-replica 32 --lr 0.001 --validation-steps 2 ";
  const std::string flags = common + "--replicas 2 ";
  // Direct convolutions: each step re-rounds the two runs' tiny difference at the kernels'
  // own error, and Winograd's is ~6x direct's (seen: 1.7e-4 after 6 steps against 5.8e-6,
  // both after 1.2e-7 at steps 1 and 2). The sums under test are the same either way.
  const std::string env = MpiEnv() + "STRATA_CONV_ALGORITHM=direct ";
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
                             " --epochs 1 --steps-per-epoch 6 --deterministic --seed 3 --batch-per-replica 32 --lr 0.05 --validation-steps 2 ";
  auto one = RunCommand(MpiEnv() + Strata() + common + "--replicas 4 --out " + dir + "/single.ckpt", true);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = RunCommand(MpiEnv() + kMpirun + Strata() + common + "--replicas 2 --out " + dir + "/mpi.ckpt", true);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const double max_diff = MaxWeightDifference(dir + "/single.ckpt", dir + "/mpi.ckpt");
  EXPECT_LT(max_diff, 1e-5) << "largest weight difference " << max_diff;
}

TEST(MpiTrain, DevicesUnderMpirunListsEveryWorker) {
  auto r = RunCommand(MpiEnv() + kMpirun + Strata() + " devices", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cluster   2 workers (OpenMPI)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worker 0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worker 1\n"), std::string::npos) << r.output;
  auto j = RunCommand(MpiEnv() + kMpirun + Strata() + " devices --json", false);
  ASSERT_EQ(j.exit_code, 0) << j.output;
  auto json = nlohmann::json::parse(j.output);
  EXPECT_EQ(json["hosts"], 2);
  EXPECT_EQ(json["host_list"].size(), 2u);
}

TEST(MpiTrain, MismatchedWorkersAreReportedAtStart) {
  // mpirun's MPMD form starts two different command lines as one job.
  const std::string base = " train --epochs 1 --steps-per-epoch 3 --no-monitor ";
  auto replicas = RunCommand("timeout 120 env " + MpiEnv() + kMpirunFlags + "-np 1 " + Strata() + base + "--replicas 1 : -np 1 " +
                                 Strata() + base + "--replicas 2",
                             true);
  EXPECT_NE(replicas.exit_code, 0) << replicas.output;
  EXPECT_NE(replicas.output.find("workers disagree on replicas per worker: worker 0 (") , std::string::npos) << replicas.output;
  auto batch = RunCommand("timeout 120 env " + MpiEnv() + kMpirunFlags + "-np 1 " + Strata() + base +
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
  const std::string common = " train --epochs 1 --steps-per-epoch 6 --deterministic --seed 5 --batch-per-replica 16 --validation-steps 2 "
                             "--replicas 2 --lr 0.05 --no-monitor ";
  auto on = RunCommand(MpiEnv() + "STRATA_ALLREDUCE_BUCKET_BYTES=16384 " + kMpirun + Strata() + common + "--summary-json " + dir +
                           "/on.json --out " + dir + "/on.ckpt",
                       true);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  auto off = RunCommand(MpiEnv() + "STRATA_ALLREDUCE_BUCKET_BYTES=16384 STRATA_ALLREDUCE_OVERLAP=0 " + kMpirun + Strata() + common +
                            "--summary-json " + dir + "/off.json --out " + dir + "/off.ckpt",
                        true);
  ASSERT_EQ(off.exit_code, 0) << off.output;
  // Overlap did happen with it on: buckets' all-reduces started while the backward pass ran
  // (about 115 buckets a step, over 6 steps); with it off, none was started before its end.
  const nlohmann::json x_on = nlohmann::json::parse(Slurp(dir + "/on.json"))["cross_host"];
  const nlohmann::json x_off = nlohmann::json::parse(Slurp(dir + "/off.json"))["cross_host"];
  std::printf("[ overlap  ] on: %lld buckets started during the backward pass, %lld after; off: %s\n",
              x_on.value("buckets_started_during_backward", -1LL), x_on.value("buckets_started_after_backward", -1LL),
              x_off.contains("buckets") ? "buckets reported" : "one all-reduce after the pass");
  EXPECT_GT(x_on.value("buckets_started_during_backward", 0LL), 0) << on.output;
  EXPECT_EQ(x_off.value("buckets_started_during_backward", 0LL), 0) << off.output;
  EXPECT_FALSE(x_off.contains("buckets")) << off.output;
  const std::vector<float> a = Params(dir + "/on.ckpt"), b = Params(dir + "/off.ckpt");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(SameBits(dir + "/on.ckpt", dir + "/off.ckpt"))
      << "largest weight difference " << MaxWeightDifference(dir + "/on.ckpt", dir + "/off.ckpt");
  EXPECT_NE(on.output.find("cross-host all-reduce:"), std::string::npos) << on.output;
  // A waiting rank that yields its core (STRATA_ALLREDUCE_WAIT=yield) waits for the same sums;
  // a mode it does not know is refused by name.
  auto yield = RunCommand(MpiEnv() + "STRATA_ALLREDUCE_BUCKET_BYTES=16384 STRATA_ALLREDUCE_WAIT=yield " + kMpirun + Strata() +
                              common + "--out " + dir + "/yield.ckpt",
                          true);
  ASSERT_EQ(yield.exit_code, 0) << yield.output;
  EXPECT_TRUE(SameBits(dir + "/on.ckpt", dir + "/yield.ckpt"))
      << "largest weight difference " << MaxWeightDifference(dir + "/on.ckpt", dir + "/yield.ckpt");
  auto bad = RunCommand("timeout 120 env " + MpiEnv() + "STRATA_ALLREDUCE_WAIT=sleep " + kMpirun + Strata() + common + "--out " +
                            dir + "/bad.ckpt",
                        true);
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("STRATA_ALLREDUCE_WAIT=sleep: expected spin (the default) or yield"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir + "/bad.ckpt"));
}

// The communication timeline: with --trace every worker writes its own trace (the chief t.json,
// worker 1 t.worker1.json) holding its gradient buckets (started, finished, bytes, ready) on
// the all-reduce track, and bench/merge_traces.py puts both on one time line by the clock
// readings each took at a barrier's exit. Worker 1's clock is shifted by 1,000 s
// (STRATA_TRACE_CLOCK_OFFSET_NS, as another host's clock would differ) and its trace made to
// begin 2 s late: after the merge each bucket's all-reduce, which ends on both workers at nearly
// the same instant (the last message), still ends at nearly the same ts in both workers' tracks.
TEST(MpiTrain, EachWorkerTracesItsBucketsAndTheMergeAlignsTheWorkers) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = ::testing::TempDir() + "/strata-mpi-timeline";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cmd = Strata() + " train --epochs 1 --steps-per-epoch 4 --deterministic --batch-per-replica 16 "
                                     "--validation-steps 1 --replicas 1 --trace " + dir + "/t.json --out " + dir + "/m.ckpt" +
                          " --summary-json " + dir + "/s.json";
  auto run = RunCommand(MpiEnv() + "STRATA_ALLREDUCE_BUCKET_BYTES=65536 " + kMpirunFlags + "-np 1 " + cmd +
                            " : -np 1 env STRATA_TRACE_CLOCK_OFFSET_NS=1000000000000 " + cmd,
                        true);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(fs::exists(dir + "/t.json")) << run.output;
  ASSERT_TRUE(fs::exists(dir + "/t.worker1.json")) << run.output;
  // One machine's workers start their traces within milliseconds of each other, so their ts
  // would nearly line up even unmerged. Worker 1's trace is made as if it had begun 2 s later
  // (every ts 2 s less, its start reading 2 s more): only a merge that reads the anchors puts it
  // back.
  {
    nlohmann::json late = nlohmann::json::parse(Slurp(dir + "/t.worker1.json"));
    for (auto& e : late["traceEvents"]) {
      if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - 2e6;
      if (e["ph"] == "M" && e["name"] == "strata_clock")
        e["args"]["trace_start_ns"] = e["args"]["trace_start_ns"].get<int64_t>() + 2'000'000'000LL;
    }
    ASSERT_TRUE(WriteFileAtomic(dir + "/late.json", late.dump()).ok());
  }
  auto merged = RunCommand(std::string(STRATA_SOURCE_DIR) + "/bench/merge_traces.py " + dir + "/t.json " + dir +
                               "/late.json -o " + dir + "/merged.json",
                           true);
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  // Per worker: the anchors, and each bucket's finishing ts in order of appearance.
  std::map<int, std::vector<double>> finishes;  // by worker, in the merged time line
  std::map<int, std::vector<int64_t>> bytes;
  const nlohmann::json m = nlohmann::json::parse(Slurp(dir + "/merged.json"));
  for (const auto& e : m["traceEvents"]) {
    const int worker = e.value("pid", 0) / 10;
    if (e["ph"] == "e" && e.value("cat", "") == "allreduce") finishes[worker].push_back(e["ts"].get<double>());
    if (e["ph"] == "b" && e.value("cat", "") == "allreduce") bytes[worker].push_back(e["args"]["bytes"].get<int64_t>());
  }
  ASSERT_EQ(finishes.size(), 2u) << merged.output;
  ASSERT_FALSE(finishes[0].empty());
  ASSERT_EQ(finishes[0].size(), finishes[1].size()) << "the same buckets, step by step";
  EXPECT_EQ(bytes[0], bytes[1]);
  int64_t step_bytes = 0;
  for (int64_t b : bytes[0]) step_bytes += b;
  EXPECT_EQ(step_bytes % 4, 0);
  const auto anchors = [&](const std::string& path) {
    const nlohmann::json trace = nlohmann::json::parse(Slurp(path));
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "M" && e["name"] == "strata_clock") return nlohmann::json(e["args"]);
    return nlohmann::json();
  };
  const nlohmann::json a0 = anchors(dir + "/t.json"), a1 = anchors(dir + "/t.worker1.json");
  ASSERT_FALSE(a0.is_null());
  ASSERT_FALSE(a1.is_null());
  EXPECT_EQ(a1["worker"], 1);
  // The two clocks' sync readings differ by the offset (the same machine's clock otherwise).
  EXPECT_GT(a1["clock_sync_ns"].get<int64_t>() - a0["clock_sync_ns"].get<int64_t>(), 999'000'000'000LL);
  // Aligned: the finish ts of each bucket on both workers within 0.5 s (the injected offset is
  // 2,000 times that; a finish is stamped at the first test after it, both workers testing
  // every kernel), and the median within 50 ms.
  std::vector<double> gaps;
  for (size_t i = 0; i < finishes[0].size(); ++i) gaps.push_back(std::abs(finishes[0][i] - finishes[1][i]));
  std::sort(gaps.begin(), gaps.end());
  std::printf("[ timeline ] %zu bucket finishes per worker; after the merge they differ by %.0f us (median), %.0f us (max)\n",
              gaps.size(), gaps[gaps.size() / 2], gaps.back());
  EXPECT_LT(gaps.back(), 0.5e6);
  EXPECT_LT(gaps[gaps.size() / 2], 5e4);
  // The summary gathers every worker's own schedule: its buckets' mean ready <= start <= finish,
  // the same bytes on both, inside its step's reduction.
  const nlohmann::json per_worker = nlohmann::json::parse(Slurp(dir + "/s.json"))["cross_host"]["per_worker"];
  ASSERT_EQ(per_worker.size(), 2u);
  for (const auto& w : per_worker) {
    ASSERT_TRUE(w.contains("buckets") && !w["buckets"].empty()) << w.dump();
    EXPECT_EQ(w["buckets"].size(), per_worker[0]["buckets"].size());
    for (const auto& b : w["buckets"]) {
      EXPECT_LE(b["ready_ms"].get<double>(), b["start_ms"].get<double>() + 1e-6) << b.dump();
      EXPECT_LE(b["start_ms"].get<double>(), b["finish_ms"].get<double>() + 1e-6) << b.dump();
      EXPECT_LE(b["finish_ms"].get<double>(), w["reduction_end_ms"].get<double>() + 1e-6) << b.dump();
    }
  }
  fs::remove_all(dir);
}

// Gradients as bf16 on the wire (STRATA_ALLREDUCE_WIRE=bf16): half the bytes cross, the
// weights stay near the f32 run's (each gradient rounded to 8 significant bits) but are not the
// same (so the bf16 path ran); and workers that disagree on the wire are stopped at the start
// with both named, before any bucket is exchanged (mismatched messages would be garbage).
TEST(MpiTrain, Bf16OnTheWireHalvesTheBytesAndStaysNearF32) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = ::testing::TempDir() + "/strata-mpi-bf16-wire";
  fs::create_directories(dir);
  const std::string common = " train --epochs 1 --steps-per-epoch 6 --deterministic --seed 5 --batch-per-replica 32 --validation-steps 2 "
                             "--replicas 1 --lr 0.01 --no-monitor ";
  auto f32 = RunCommand(MpiEnv() + kMpirun + Strata() + common + "--summary-json " + dir + "/f32.json --out " + dir + "/f32.ckpt", true);
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  auto bf16 = RunCommand(MpiEnv() + "STRATA_ALLREDUCE_WIRE=bf16 " + kMpirun + Strata() + common + "--summary-json " + dir +
                             "/bf16.json --out " + dir + "/bf16.ckpt",
                         true);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("gradients as bf16 on the wire"), std::string::npos) << bf16.output;
  const nlohmann::json a = nlohmann::json::parse(Slurp(dir + "/f32.json"))["cross_host"];
  const nlohmann::json b = nlohmann::json::parse(Slurp(dir + "/bf16.json"))["cross_host"];
  EXPECT_EQ(a["wire"], "f32");
  EXPECT_EQ(b["wire"], "bf16");
  // The gradient buckets at half; the blocking all-reduces (moving statistics) stay f32.
  const double grad_bytes = a["wire_bytes_per_step"].get<double>();
  EXPECT_LT(b["wire_bytes_per_step"].get<double>(), 0.55 * grad_bytes);
  EXPECT_GT(b["wire_bytes_per_step"].get<double>(), 0.45 * grad_bytes);
  const double diff = MaxWeightDifference(dir + "/f32.ckpt", dir + "/bf16.ckpt");
  std::printf("[ bf16     ] %.2f MB a step on the wire instead of %.2f; largest weight difference from f32 %.3g\n",
              b["wire_bytes_per_step"].get<double>() / 1e6, grad_bytes / 1e6, diff);
  EXPECT_GT(diff, 0) << "the bf16 wire changed nothing: were the buckets sent as f32?";
  EXPECT_LT(diff, 1e-2);  // seen: 1.2e-3 (lr 0.01, 6 steps); garbage or a lost bucket is far larger

  auto mixed = RunCommand("timeout 120 env " + MpiEnv() + kMpirunFlags + "-np 1 env STRATA_ALLREDUCE_WIRE=bf16 " + Strata() + common +
                              ": -np 1 " + Strata() + common,
                          true);
  EXPECT_NE(mixed.exit_code, 0) << mixed.output;
  EXPECT_NE(mixed.exit_code, 124) << "hung: " << mixed.output;
  EXPECT_NE(mixed.output.find("bf16 on the wire"), std::string::npos) << mixed.output;
  EXPECT_NE(mixed.output.find("workers disagree on"), std::string::npos) << mixed.output;
}

// ---- Faults: kill -9 and --resume, a stopped or dead worker, slow workers -------------------

// MultiWorker BackupAndRestore: 2 epochs of 25 steps, backups at global steps 20, 25 (epoch
// end), 40 (and 50, deleted at the end). Every run is the same command (with --resume).
const std::string kBackupArgs =
    " train --epochs 2 --steps-per-epoch 25 --deterministic --seed 4242 --replicas 1 --batch-per-replica 16 --validation-steps 2 "
    "--lr 0.01 --no-monitor --resume --checkpoint-dir ";
std::string BackupCommand(const std::string& dir, const std::string& run) {
  return kMpirun + Strata() + kBackupArgs + dir + "/" + run + " --out " + dir + "/" + run + ".ckpt";
}

std::string BackupDir() { return ::testing::TempDir() + "/strata-mpi-backup"; }

// The uninterrupted run's final checkpoint (made once per build of strata, shared by the tests).
const CheckpointRead& UninterruptedMpiRun() {
  static const CheckpointRead straight = ReferenceRun(BackupDir(), [](const std::string& backup_dir, const std::string& out) {
    return MpiEnv() + kMpirun + Strata() + kBackupArgs + backup_dir + " --out " + out;
  });
  return straight;
}

// Starts the job with STRATA_FAULT_PAUSE=`fault`, kill -9s the worker that pauses there (its pid
// from the fault point's line) and waits for mpirun to end the job. Returns the job's output.
std::string RunMpiAndKillAt(const std::string& fault, const std::string& dir, const std::string& run) {
  BackgroundJob job = BackgroundJob::Start("export " + MpiEnv() + "STRATA_FAULT_PAUSE=" + fault + " && exec " + BackupCommand(dir, run),
                                           dir + "/" + run + ".log");
  const bool reached = job.WaitForText("strata: fault point " + fault + " reached", 600);
  std::string out = job.output();
  const long pid = NumberAfter(out, ", pid ");
  EXPECT_TRUE(reached && pid > 0) << out;
  if (reached && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
  const bool ended = job.Wait(120);
  out = job.output();
  EXPECT_TRUE(ended) << "the job did not end within 120 s of the kill:\n" << out;
  EXPECT_NE(job.exit_code(), 0) << out;
  job.KillAll();
  EXPECT_FALSE(fs::exists(dir + "/" + run + ".ckpt")) << "the killed job finished:\n" << out;
  return out;
}

void ExpectSameBitsAsUninterruptedMpiRun(const std::string& path) {
  const CheckpointRead& a = UninterruptedMpiRun();
  ASSERT_TRUE(a.ok) << a.error;
  const CheckpointRead b = ReadWholeCheckpoint(path);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_GT(a.params.size(), 0u);
  // The same steps on the same examples from the same state: the same bits.
  EXPECT_TRUE(a.params == b.params) << "resumed weights differ from the uninterrupted run";
  EXPECT_TRUE(a.slots == b.slots) << "resumed optimizer slots differ from the uninterrupted run";
}

// kill -9 one rank (chosen at random, as the step: the seed is printed) after a random global
// step; the same command again resumes from the last backup before the kill (every worker
// restores the chief's file and its own input position) and ends with the weights of the run
// that was never interrupted.
TEST(MpiTrain, KillOneRankAtARandomStepThenTheSameCommandResumesFromTheBackup) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = FreshDir(BackupDir(), "random-step");
  std::mt19937_64 rng(TestSeed("MpiTrain.KillOneRankAtARandomStepThenTheSameCommandResumesFromTheBackup"));
  const int kill_step = std::uniform_int_distribution<int>(21, 49)(rng);
  const int rank = std::uniform_int_distribution<int>(0, 1)(rng);
  const int backup_step = kill_step >= 40 ? 40 : kill_step >= 26 ? 25 : 20;
  const int epoch = backup_step / 25 + 1, step_in_epoch = backup_step % 25;
  std::printf("[ fault    ] kill -9 worker %d after global step %d; expect the resume from global step %d (epoch %d, step %d)\n",
              rank, kill_step, backup_step, epoch, step_in_epoch);
  ASSERT_TRUE(UninterruptedMpiRun().ok);

  const std::string killed =
      RunMpiAndKillAt("after-step:" + std::to_string(kill_step) + "@" + std::to_string(rank), dir, "b");
  const CheckpointRead backup = ReadWholeCheckpoint(dir + "/b/backup.ckpt");
  ASSERT_TRUE(backup.ok) << backup.error << "\n" << killed;
  EXPECT_EQ(backup.global_step, backup_step) << killed;

  auto resumed = RunCommand(MpiEnv() + BackupCommand(dir, "b"), true);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string said = "BackupAndRestore: resuming from " + dir + "/b/backup.ckpt: resumed from epoch " + std::to_string(epoch) +
                           ", step " + std::to_string(step_in_epoch) + " (global step " + std::to_string(backup_step) + ")";
  EXPECT_NE(resumed.output.find(said), std::string::npos) << "expected: " << said << "\n" << resumed.output;
  ExpectSameBitsAsUninterruptedMpiRun(dir + "/b.ckpt");
}

// kill -9 the chief inside its second backup write (the epoch end, global step 25: every byte
// in the temporary, not yet renamed): the backup of step 20 stays whole and the job resumes
// from it.
TEST(MpiTrain, KillTheChiefInsideABackupWriteThenResumeFromThePreviousBackup) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const std::string dir = FreshDir(BackupDir(), "backup-write");
  ASSERT_TRUE(UninterruptedMpiRun().ok);
  const std::string killed = RunMpiAndKillAt("backup-write:2@0", dir, "c");
  EXPECT_NE(killed.find("backup of global step 25 in its temporary"), std::string::npos) << killed;
  EXPECT_EQ(FilesStartingWith(dir + "/c", "backup.ckpt.tmp-").size(), 1u) << killed;
  const CheckpointRead backup = ReadWholeCheckpoint(dir + "/c/backup.ckpt");
  ASSERT_TRUE(backup.ok) << backup.error;
  EXPECT_EQ(backup.global_step, 20);

  auto resumed = RunCommand(MpiEnv() + BackupCommand(dir, "c"), true);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from epoch 1, step 20 (global step 20)"), std::string::npos) << resumed.output;
  EXPECT_TRUE(FilesStartingWith(dir + "/c", "backup.ckpt.tmp-").empty()) << resumed.output;
  ExpectSameBitsAsUninterruptedMpiRun(dir + "/c.ckpt");
}

// One rank of a training job (chosen at random; the seed is printed) is stopped (SIGSTOP: alive
// to the OS, answering nothing, as a hung host or a partition) or killed while its peer trains.
// The survivor's watchdog must name the silent worker (rank, host, pid) and the collective it
// waited in and end the job with MPI_Abort(3) within the documented bound
// (STRATA_HEARTBEAT_TIMEOUT, 10 s, plus a second's heartbeat period, plus 4 s for MPI_Abort and
// mpirun to tear the job down: 15 s, asserted, the measured time printed), and
// the backup on disk must be whole. mpirun does not notice a stopped process, so after SIGSTOP
// only Strata can end the job: mpirun's exit status is the watchdog's error code, 3. A killed
// process mpirun would report itself, so SIGKILL runs under `mpirun --enable-recovery` (which
// leaves a death to the application, and always exits 0): each rank runs in a shell that prints
// its exit status, and the survivor's must be 3.
void StopOrKillOneRank(int signal, const char* test) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  const bool stop = signal == SIGSTOP;
  const std::string dir = ::testing::TempDir() + "/strata-mpi-" + (stop ? "stop" : "kill");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937_64 rng(TestSeed(test));
  const int victim = std::uniform_int_distribution<int>(0, 1)(rng), survivor = 1 - victim;
  const std::string marker = "--seed 97531";
  const std::string train = Strata() + " train --epochs 1 --steps-per-epoch 2000 --replicas 1 --batch-per-replica 32 --no-monitor " +
                            marker + " --checkpoint-dir " + dir + "/backup --out " + dir + "/model.ckpt";
  BackgroundJob job = BackgroundJob::Start(
      "export " + MpiEnv() + " && exec " + kMpirunFlags +
          (stop ? "-np 2 " + train
                : "--enable-recovery -np 2 sh -c '" + train + "; echo \"strata worker $OMPI_COMM_WORLD_RANK exit status $?\"'"),
      dir + "/job.log");
  // Training, in its steady state: the first backup (step 20) is written.
  bool training = false;
  for (int i = 0; i < 6000 && !training && !job.Poll(); ++i) {
    training = fs::exists(dir + "/backup/backup.ckpt");
    if (!training) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(training) << "no backup was written\n" << job.output();
  const std::vector<pid_t> pids = WorkersByRank(marker, 2);
  ASSERT_GT(pids[0], 0) << job.output();
  ASSERT_GT(pids[1], 0) << job.output();
  std::printf("[ fault    ] %s worker %d (pid %d); worker %d (pid %d) trains on\n", stop ? "SIGSTOP" : "SIGKILL", victim,
              static_cast<int>(pids[victim]), survivor, static_cast<int>(pids[survivor]));
  constexpr double kHeartbeatTimeout = 10, kHeartbeatPeriod = 1, kTeardown = 4;
  const double bound = kHeartbeatTimeout + kHeartbeatPeriod + kTeardown;
  const auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pids[victim], signal), 0);
  const bool ended = job.Wait(60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  const std::string out = job.output();
  job.KillAll();
  if (stop) ::kill(pids[victim], SIGKILL);  // mpirun kills it too; never leave it stopped
  ASSERT_TRUE(ended) << "the job still ran 60 s after the " << (stop ? "SIGSTOP" : "SIGKILL") << ":\n" << out;
  std::printf("[ fault    ] the job ended %.1f s after the signal (bound %.0f s), mpirun's exit status %d\n", seconds, bound,
              job.exit_code());
  EXPECT_LE(seconds, bound) << out;

  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  auto name = [&](int w) {
    return "worker " + std::to_string(w) + " (" + host + ", pid " + std::to_string(pids[static_cast<size_t>(w)]) + ")";
  };
  const std::string said = "strata: " + name(victim) + " stopped answering: no heartbeat for ";
  const size_t at = out.find(said);
  ASSERT_NE(at, std::string::npos) << "expected: " << said << "\n" << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_NE(line.find(" while " + name(survivor) + " waited "), std::string::npos) << line;
  const bool names_collective = line.find(" s in the gradient all-reduce (collective call ") != std::string::npos ||
                                line.find(" s in all-reduce (collective call ") != std::string::npos ||
                                line.find(" s in all-gather (collective call ") != std::string::npos ||
                                line.find(" s in barrier (collective call ") != std::string::npos;
  EXPECT_TRUE(names_collective) << line;
  // Strata's watchdog ended it: its MPI_Abort error code is the exit status.
  if (stop) {
    EXPECT_EQ(job.exit_code(), 3) << out;
  } else {
    EXPECT_NE(out.find("strata worker " + std::to_string(survivor) + " exit status 3\n"), std::string::npos) << out;
    EXPECT_NE(out.find("strata worker " + std::to_string(victim) + " exit status 137\n"), std::string::npos) << out;
  }
  ExpectStrataSpokeFirst(out, at, {"exited on signal", "signal 9", "noticed that process rank"},
                         "mpirun reported a dead process");
  // No checkpoint half-written: the backup is whole, no temporary is left, the model was never saved.
  const CheckpointRead backup = ExpectNothingHalfWritten(dir);
  EXPECT_TRUE(backup.ok) << backup.error;
  EXPECT_GE(backup.global_step, 20);
}

TEST(MpiTrain, AStoppedRankIsNamedByStrataWatchdogWhichEndsTheJob) {
  StopOrKillOneRank(SIGSTOP, "MpiTrain.AStoppedRankIsNamedByStrataWatchdogWhichEndsTheJob");
}

TEST(MpiTrain, AKilledRankIsNamedByStrataWatchdogWhichEndsTheJob) {
  StopOrKillOneRank(SIGKILL, "MpiTrain.AKilledRankIsNamedByStrataWatchdogWhichEndsTheJob");
}

// Busy loops pinned to one core each, killed when the object goes.
struct CpuHogs {
  std::vector<pid_t> pids;
  CpuHogs(int core, int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(core, &set);
        ::sched_setaffinity(0, sizeof(set), &set);
        volatile uint64_t spins = 0;
        for (;;) spins = spins + 1;
      }
      pids.push_back(pid);
    }
  }
  ~CpuHogs() {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  }
};

// Slow is not dead. Two workers, one per core, train 8 steps; from step 2 on they share their
// cores with busy loops: 4 on worker 0's core, 9 on worker 1's, so the job steps about ten
// times slower than usual (the figures are printed). The deadline's floor is 0.05 s
// (STRATA_COLLECTIVE_TIMEOUT=0.05): a fixed collective timeout of that length would stop this
// job (its longest collective wait, from --summary-json, is checked to be longer), while the
// pace-scaled deadline and the heartbeats (the peer answers, and says it computes) let it
// train to the end. The busy loops stop when training ends (the chief's
// evaluation of the test set runs unloaded, to keep the test short).
TEST(MpiTrain, TwoWorkersSlowedByCpuHogsTrainToTheEndWithoutAFalseAlarm) {
  ASSERT_TRUE(fs::exists("/usr/bin/mpirun")) << "mpirun is not installed (scripts/deps.sh installs openmpi-bin)";
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  ASSERT_TRUE(CPU_ISSET(0, &mine) && CPU_ISSET(1, &mine)) << "needs cores 0 and 1";
  const std::string dir = ::testing::TempDir() + "/strata-mpi-hogs";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // One worker per core (bound), where the busy loops are.
  const std::string train = "mpirun --oversubscribe --map-by core --bind-to core --mca btl self,vader,tcp "
                            "--mca btl_tcp_if_include lo -np 2 " + Strata() +
                            " train --epochs 1 --steps-per-epoch 8 --replicas 1 --batch-per-replica 64 --no-monitor --seed 11 --validation-steps 2 ";
  auto usual = RunCommand(MpiEnv() + train + "--summary-json " + dir + "/usual.json", true);
  ASSERT_EQ(usual.exit_code, 0) << usual.output;
  nlohmann::json u = nlohmann::json::parse(*ReadFileToString(dir + "/usual.json"));

  BackgroundJob job = BackgroundJob::Start(
      "export " + MpiEnv() + "STRATA_COLLECTIVE_TIMEOUT=0.05 && exec " + train + "--summary-json " + dir + "/loaded.json",
      dir + "/loaded.log");
  // mpirun gives the chief a terminal, so it draws the progress bar: step 1 (the compiled
  // programs' first run) is done.
  const bool started = job.WaitForText("1/8 [", 600);
  {
    CpuHogs hogs0(0, 4), hogs1(1, 9);
    job.WaitForText("trained ", 900);
  }
  job.Wait(600);
  const std::string out = job.output();
  job.KillAll();
  ASSERT_TRUE(started) << "the job never reached step 1:\n" << out;
  ASSERT_EQ(job.exit_code(), 0) << out;
  EXPECT_EQ(out.find("stopping the job"), std::string::npos) << out;
  nlohmann::json l = nlohmann::json::parse(*ReadFileToString(dir + "/loaded.json"));
  const double usual_s = u["train_seconds"].get<double>(), loaded_s = l["train_seconds"].get<double>();
  const double longest_wait = l["cross_host"]["longest_wait_s"].get<double>();
  std::printf("[ load     ] 8 steps in %.1f s usually, %.1f s with steps 2-8 among the busy loops (x%.1f); longest collective "
              "wait %.2f s, longest deadline given %.1f s, heartbeats %s\n",
              usual_s, loaded_s, loaded_s / usual_s, longest_wait, l["cross_host"]["longest_deadline_s"].get<double>(),
              l["cross_host"]["heartbeats"].get<bool>() ? "on" : "off");
  EXPECT_TRUE(l["cross_host"]["heartbeats"].get<bool>());
  // The floor in force is the one the job was given (an ignored STRATA_COLLECTIVE_TIMEOUT would
  // leave the 30 s default, under which nothing here could fire).
  const double floor = l["cross_host"]["deadline_floor_s"].get<double>();
  const double deadline = l["cross_host"]["longest_deadline_s"].get<double>();
  EXPECT_DOUBLE_EQ(floor, 0.05) << "STRATA_COLLECTIVE_TIMEOUT=0.05 was not the deadline's floor";
  // What makes this test able to fail: a fixed deadline at the floor would have fired...
  EXPECT_GT(longest_wait, floor) << "the busy loops did not slow a worker enough to test anything:\n" << out;
  // ...and the deadline in force was raised by the pace above the longest wait.
  EXPECT_GT(deadline, longest_wait) << "the deadline in force was not raised above the longest wait by the pace";
}

}  // namespace
}  // namespace strata::testing
