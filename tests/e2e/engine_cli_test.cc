// strata bench-step, run as a user would.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_support.h"

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

TEST(BenchStepCli, Bf16AndTwoReplicasRun) {
  auto r = RunCommand(Strata() + " bench-step --batch 4 --replicas 2 --precision bf16 --steps 2 --warmup 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["steps"].get<int>(), 4);  // two per replica
  EXPECT_EQ(j["precision"], "bf16");
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
