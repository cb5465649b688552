// strata bench-step, run as a user would.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "common/bf16_expected.h"
#include "cli_support.h"
#include "strata/backend/compile.h"

namespace strata {
namespace {

using testing::RunCommand;
using testing::Strata;

TEST(BenchStepCli, JsonReportsSpeedFlopsAndUtilization) {
  auto r = RunCommand(Strata() + " bench-step --model reference-cnn --batch 8 --replicas 1 --precision f32"
                                 " --seconds 0.3 --warmup 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_GT(j["images_per_second"].get<double>(), 0);
  EXPECT_GT(j["step_ms"].get<double>(), 0);
  EXPECT_NEAR(j["flops_per_image"].get<double>() / 1e6, 111.7, 0.5);  // the reference CNN, counted
  EXPECT_GT(j["utilization"].get<double>(), 0);
  EXPECT_LT(j["utilization"].get<double>(), 1.5);
  EXPECT_EQ(j["batch"], 8);
  EXPECT_GE(j["steps"].get<int>(), 1);
}

// bf16 runs where oneDNN has AVX-512 kernels; elsewhere it is refused (exit 2, one line).
TEST(BenchStepCli, Bf16AndTwoReplicasRunOrAreRefused) {
  auto r = RunCommand(Strata() + " bench-step --batch 4 --replicas 2 --precision bf16 --steps 2 --warmup 0 --json");
  if (!testing::Bf16MustRun()) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(r.output, "") << "nothing on stdout: no work started";
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["steps"].get<int>(), 4);  // two per replica
  EXPECT_EQ(j["precision"], "bf16");
}

// On any machine: with oneDNN and Strata capped to AVX2 (an AVX2-only host), bf16 is refused
// before any work with one line naming AVX-512 and the alternative; f32 still runs there.
TEST(BenchStepCli, Bf16OnAnAvx2HostIsRefusedWithTheAlternative) {
  const std::string avx2 = "ONEDNN_MAX_CPU_ISA=AVX2 STRATA_MAX_ISA=avx2 ";
  for (const char* cmd : {" bench-step --batch 4 --precision bf16 --steps 1 --warmup 0",
                          " train --precision bf16 --epochs 1 --data /nonexistent/never-read-*.tfrec"}) {
    auto r = RunCommand(avx2 + Strata() + cmd, /*merge_stderr=*/true);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line:\n" << r.output;
    EXPECT_NE(r.output.find("AVX-512"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--precision f32"), std::string::npos) << r.output;
  }
  auto f32 = RunCommand(avx2 + Strata() + " bench-step --batch 4 --precision f32 --steps 1 --warmup 0 --json");
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  auto j = nlohmann::json::parse(f32.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << f32.output;
  EXPECT_EQ(j["precision"], "f32");
  auto bad = RunCommand("STRATA_MAX_ISA=avx3 " + Strata() + " devices", /*merge_stderr=*/true);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("STRATA_MAX_ISA=\"avx3\""), std::string::npos) << bad.output;
}

TEST(BenchStepCli, TextOutputNamesTheFigures) {
  auto r = RunCommand(Strata() + " bench-step --batch 4 --steps 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* word : {"images/s", "FLOPs/image", "utilization", "arena"})
    EXPECT_NE(r.output.find(word), std::string::npos) << word << " missing in\n" << r.output;
}

TEST(BenchStepCli, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCommand(Strata() + " bench-step --model resnet-9000").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " bench-step --precision f16").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " bench-step --batch 0").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " bench-step --no-such-flag").exit_code, 2);
  auto help = RunCommand(Strata() + " bench-step --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--precision"), std::string::npos);
}

}  // namespace
}  // namespace strata
