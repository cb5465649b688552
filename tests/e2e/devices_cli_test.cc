// `strata devices` and the command's front door, run as a user runs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "common/bf16_expected.h"
#include "strata/backend/compile.h"
#include "strata/core/cpu.h"
#include "strata/core/file.h"
#include "strata/core/peak_flops.h"
#include "strata/core/version.h"

namespace strata::testing {
namespace {

class DevicesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // A private cache so the test measures once and then hits its own cache.
    cache_ = ::testing::TempDir() + "/strata-devices-cache";
    std::filesystem::create_directories(cache_);
    env_ = "STRATA_CACHE_DIR=" + cache_ + " ";
  }
  std::string cache_, env_;
};

// Capped to AVX2 (as on an AVX2-only host): no AVX-512 in the ISA list, f32 only, the AVX2 peak.
TEST_F(DevicesCli, CappedToAvx2ReportsF32OnlyAndTheAvx2Peak) {
  auto r = RunCommand("ONEDNN_MAX_CPU_ISA=AVX2 STRATA_MAX_ISA=avx2 " + env_ + Strata() + " devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  const auto isa = j["isa"].get<std::vector<std::string>>();
  EXPECT_EQ(std::count(isa.begin(), isa.end(), "AVX-512"), 0) << r.output;
  EXPECT_EQ(j["precisions"].get<std::vector<std::string>>(), std::vector<std::string>{"f32"});
  EXPECT_EQ(j["peak_kernels"]["f32"].get<std::string>(), HostIsa().avx2 ? "avx2-fma" : "scalar") << r.output;
  auto text = RunCommand("ONEDNN_MAX_CPU_ISA=AVX2 STRATA_MAX_ISA=avx2 " + env_ + Strata() + " devices");
  EXPECT_NE(text.output.find("precision f32 (bf16 needs AVX-512)"), std::string::npos) << text.output;
}

TEST_F(DevicesCli, JsonHasTheDocumentedFields) {
  auto r = RunCommand(env_ + Strata() + " devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"hosts", "replicas", "cores", "isa", "peak_gflops_f32_per_core",
                          "peak_gflops_bf16_per_core", "memory_bytes"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["hosts"], 1);
  EXPECT_EQ(j["cores"].get<int>(), UsableCores());
  EXPECT_EQ(j["replicas"].get<int>(), UsableCores());
  EXPECT_GT(j["peak_gflops_f32_per_core"].get<double>(), 0);
  EXPECT_GT(j["memory_bytes"].get<int64_t>(), 0);
  // Which precisions this host trains in: f32 always, bf16 where oneDNN has AVX-512.
  const std::vector<std::string> precisions = j["precisions"].get<std::vector<std::string>>();
  EXPECT_EQ(precisions, backend::TrainablePrecisions());
  EXPECT_EQ(precisions.front(), "f32");
  EXPECT_EQ(precisions.size(), testing::Bf16MustRun() ? 2u : 1u) << "bf16 runs exactly where the CPU's flags say: " << r.output;
  // The second run reads the cache written by the first, unless the first figure was doubtful
  // (another test beside this one shared a core): that one is measured again.
  EXPECT_TRUE(j["peak_provisional"].is_boolean()) << r.output;
  EXPECT_TRUE(j["peak_cores_measured"].is_number()) << r.output;
  auto again = RunCommand(env_ + Strata() + " devices --json");
  EXPECT_EQ(nlohmann::json::parse(again.output)["peak_from_cache"].get<bool>(), !j["peak_provisional"].get<bool>())
      << r.output;
}

TEST_F(DevicesCli, TasksetOneCoreMeansOneReplica) {
  int first_cpu = UsableCpuList().front();
  auto r = RunCommand(env_ + "taskset -c " + std::to_string(first_cpu) + " " + Strata() + " devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["cores"], 1);
  EXPECT_EQ(j["replicas"], 1);
}

TEST_F(DevicesCli, HumanOutputNamesCoresAndPeak) {
  auto r = RunCommand(env_ + Strata() + " devices");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("cores"), std::string::npos);
  EXPECT_NE(r.output.find("peak f32"), std::string::npos);
  EXPECT_NE(r.output.find("GFLOP/s per core"), std::string::npos);
}

// --check: the cached peak beside an independent straight-line asm loop (core/peak_check.h), for
// every path this CPU has; the calibration's own kernel is the one compared. A cached figure of a
// third of this machine's is called out (no timing threshold on a right one: tests have none).
TEST_F(DevicesCli, CheckComparesTheCachedPeakWithAnIndependentLoop) {
  auto r = RunCommand(env_ + Strata() + " devices --check --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  std::vector<std::string> kernels;
  for (const auto& row : j["check"]) {
    kernels.push_back(row["kernel"].get<std::string>());
    EXPECT_GT(row["independent_all_cores_gflops_per_core"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["independent_one_core_gflops"].get<double>(), 0) << row.dump();
    EXPECT_EQ(row["cores"].get<int>(), UsableCores()) << row.dump();
    if (row["in_use"].get<bool>()) {
      EXPECT_TRUE(row["difference"].is_number()) << row.dump();
    }
  }
  std::vector<std::string> expected;
  if (HostIsa().avx512f) expected.push_back("avx512-fma");
  if (HostIsa().avx512_bf16) expected.push_back("avx512-bf16-dp");
  if (HostIsa().avx2) expected.push_back("avx2-fma");
  EXPECT_EQ(kernels, expected) << r.output;
  if (!HostIsa().avx2) return;

  // A third of the cached figure: the check says by how much, and what to do.
  const std::string path = cache_ + "/peak-flops-" + MachineKey() + ".json";
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto cached = nlohmann::json::parse(*text);
  cached["f32_gflops_per_core"] = cached["f32_gflops_per_core"].get<double>() / 3;
  cached["provisional"] = false;
  ASSERT_TRUE(WriteFileAtomic(path, cached.dump()).ok());
  auto low = RunCommand(env_ + Strata() + " devices --check");
  ASSERT_EQ(low.exit_code, 0) << low.output;
  EXPECT_NE(low.output.find("cached vs"), std::string::npos) << low.output;
  EXPECT_NE(low.output.find("the cached f32 peak differs from the independent loop by more than 10 %"), std::string::npos)
      << low.output;
  auto again = RunCommand(env_ + Strata() + " devices --recalibrate");  // leave the cache right for the others
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

TEST(Cli, VersionHelpAndUsageErrors) {
  auto v = RunCommand(Strata() + " --version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.output, std::string("strata ") + STRATA_VERSION + "\n");
  auto h = RunCommand(Strata() + " help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.output.find("devices"), std::string::npos);
  auto dh = RunCommand(Strata() + " devices --help");
  EXPECT_EQ(dh.exit_code, 0);
  EXPECT_NE(dh.output.find("--recalibrate"), std::string::npos);
  EXPECT_EQ(RunCommand(Strata() + " help devices").output, dh.output);

  auto unknown = RunCommand(Strata() + " frobnicate", /*merge_stderr=*/true);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.output, "strata: unknown command 'frobnicate' (see 'strata help')\n");
  auto flag = RunCommand(Strata() + " devices --bogus", true);
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_EQ(std::count(flag.output.begin(), flag.output.end(), '\n'), 1) << flag.output;
  EXPECT_NE(flag.output.find("--bogus"), std::string::npos);
}

}  // namespace
}  // namespace strata::testing
