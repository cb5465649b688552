// Every flag of `strata bench-step` does what its help says (issue 21, part 0): --model picks
// the program (its counted FLOPs per image), --seconds the measured time, --warmup the steps
// before it, --threads the oneDNN threads per replica. (--batch, --replicas, --precision,
// --steps, --json: engine_cli_test.cc.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace strata::testing {
namespace {

TEST(FlagsBenchStep, ModelSecondsAndThreadsHaveTheirEffect) {
  auto run = [](const std::string& flags) {
    auto r = RunCommand(Strata() + " bench-step --json " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  };
  const auto reference = run("--batch 2 --steps 1 --warmup 0");
  const auto flowers = run("--model flowers-cnn --batch 2 --steps 1 --warmup 0");
  ASSERT_FALSE(reference.is_discarded());
  ASSERT_FALSE(flowers.is_discarded());
  EXPECT_EQ(flowers["model"], "flowers-cnn");
  EXPECT_NEAR(reference["flops_per_image"].get<double>() / 1e6, 111.7, 0.5) << "the default: reference-cnn";
  EXPECT_NE(flowers["flops_per_image"], reference["flops_per_image"]) << "another program";
  const auto timed = run("--batch 2 --seconds 0.3 --warmup 1 --threads 2");
  ASSERT_FALSE(timed.is_discarded());
  EXPECT_GE(timed["seconds"].get<double>(), 0.3) << "--seconds: measured for at least that long";
  EXPECT_GE(timed["steps"].get<int>(), 1);
  EXPECT_EQ(timed["threads_per_replica"], 2);
  EXPECT_EQ(timed["warmup_steps"], 1);
  EXPECT_EQ(reference["warmup_steps"], 1) << "--warmup 0 still runs the compiling step";
  EXPECT_EQ(run("--batch 2 --steps 1 --warmup 3")["warmup_steps"], 3);
  EXPECT_EQ(RunCommand(Strata() + " bench-step --threads 0").exit_code, 2);
}

}  // namespace
}  // namespace strata::testing
