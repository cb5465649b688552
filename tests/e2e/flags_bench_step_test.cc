// Every flag of `strata bench-step` does what its help says (issue 21, part 0): --model picks
// the program (its counted FLOPs per image), --seconds the measured time, --warmup the steps
// before it, --threads the oneDNN threads per replica, --image-size the input the model is built
// for. (--batch, --replicas, --precision, --steps, --json: engine_cli_test.cc.)
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

// --model takes a Keras application (Keras's default size without --image-size) and
// --image-size builds the model for SxS images: an application or a spec whose input it sets.
TEST(FlagsBenchStep, ApplicationsAndImageSizeBuildTheModelForTheSize) {
  auto run = [](const std::string& flags) {
    auto r = RunCommand(Strata() + " bench-step --json --batch 1 --steps 1 --warmup 0 " + flags, true);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  };
  const auto at_default = run("--model mobilenet_v2");
  const auto small = run("--model mobilenet_v2 --image-size 32");
  const auto larger = run("--model mobilenet_v2 --image-size 64");
  ASSERT_FALSE(at_default.is_discarded() || small.is_discarded() || larger.is_discarded());
  EXPECT_EQ(at_default["model"], "mobilenet_v2");
  EXPECT_EQ(at_default["image_size"], 224) << "Keras's default input size";
  EXPECT_EQ(small["image_size"], 32);
  EXPECT_EQ(larger["image_size"], 64);
  EXPECT_GT(larger["flops_per_image"].get<double>(), 2 * small["flops_per_image"].get<double>()) << "4x the pixels";
  EXPECT_GT(at_default["flops_per_image"].get<double>(), larger["flops_per_image"].get<double>());
  const auto spec = run("--model flowers-cnn --image-size 64");
  ASSERT_FALSE(spec.is_discarded());
  EXPECT_EQ(spec["image_size"], 64) << "a spec's input set to --image-size";
  EXPECT_EQ(run("--model flowers-cnn")["image_size"], 192) << "the spec's own size";
}

}  // namespace
}  // namespace strata::testing
