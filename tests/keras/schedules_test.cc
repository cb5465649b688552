#include "strata/keras/schedules.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata::keras {
namespace {

TEST(Schedules, ConstantAndExponential) {
  EXPECT_DOUBLE_EQ(schedules::Constant(0.1)(12345), 0.1);
  auto e = schedules::ExponentialDecay(1.0, 10, 0.5);
  EXPECT_DOUBLE_EQ(e(0), 1.0);
  EXPECT_DOUBLE_EQ(e(10), 0.5);
  EXPECT_NEAR(e(5), std::sqrt(0.5), 1e-12);
  auto s = schedules::ExponentialDecay(1.0, 10, 0.5, /*staircase=*/true);
  EXPECT_DOUBLE_EQ(s(9), 1.0);
  EXPECT_DOUBLE_EQ(s(10), 0.5);
}

TEST(Schedules, CosineDecayWithWarmupMatchesKerasFormula) {
  // Keras: CosineDecay(initial_learning_rate=0, decay_steps=100, warmup_target=0.1, warmup_steps=10)
  auto c = schedules::CosineDecay(0.0, 100, {.alpha = 0, .warmup_target = 0.1, .warmup_steps = 10});
  EXPECT_DOUBLE_EQ(c(0), 0.0);
  EXPECT_NEAR(c(5), 0.05, 1e-12);
  EXPECT_NEAR(c(10), 0.1, 1e-12);
  EXPECT_NEAR(c(60), 0.05, 1e-12);  // halfway through the decay
  EXPECT_NEAR(c(110), 0.0, 1e-12);
  EXPECT_NEAR(c(500), 0.0, 1e-12);  // clamped after the end
  auto a = schedules::CosineDecay(1.0, 10, {.alpha = 0.1});
  EXPECT_NEAR(a(10), 0.1, 1e-12);
}

// Keras: a warmup_target is the peak even with warmup_steps=0 (no ramp), and warmup_steps
// without a target is ignored. `strata train --warmup-epochs 0` builds the first: before, it
// decayed from initial_learning_rate 0 and trained at a rate of 0 throughout.
TEST(Schedules, CosineDecayStartsFromTheWarmupTargetWithoutWarmupSteps) {
  auto c = schedules::CosineDecay(0.0, 100, {.warmup_target = 0.1, .warmup_steps = 0});
  EXPECT_NEAR(c(0), 0.1, 1e-12);
  EXPECT_NEAR(c(50), 0.05, 1e-12);
  EXPECT_NEAR(c(100), 0.0, 1e-12);
  auto untargeted = schedules::CosineDecay(0.2, 100, {.warmup_steps = 10});
  EXPECT_NEAR(untargeted(0), 0.2, 1e-12);
  EXPECT_NEAR(untargeted(50), 0.1, 1e-12);
}

TEST(Schedules, PiecewiseConstant) {
  auto p = schedules::PiecewiseConstant({100, 200}, {1.0, 0.5, 0.1});
  EXPECT_DOUBLE_EQ(p(0), 1.0);
  EXPECT_DOUBLE_EQ(p(100), 1.0);  // boundaries are inclusive, as Keras's
  EXPECT_DOUBLE_EQ(p(101), 0.5);
  EXPECT_DOUBLE_EQ(p(201), 0.1);
}

TEST(Schedules, FlowersRecipeRampSustainDecayScalesWithReplicas) {
  schedules::RampUpDecayOptions o{.start = 0.00001, .max = 0.00005, .min = 0.00001, .rampup_epochs = 5,
                                  .sustain_epochs = 0, .decay = 0.8, .replicas = 8};
  // The notebook's lrfn with strategy.num_replicas_in_sync = 8.
  const double max = 0.00005 * 8;
  EXPECT_NEAR(schedules::RampUpSustainDecayAtEpoch(o, 0), 0.00001, 1e-15);
  EXPECT_NEAR(schedules::RampUpSustainDecayAtEpoch(o, 1), (max - 0.00001) / 5 + 0.00001, 1e-15);
  EXPECT_NEAR(schedules::RampUpSustainDecayAtEpoch(o, 5), max, 1e-15);
  EXPECT_NEAR(schedules::RampUpSustainDecayAtEpoch(o, 7), (max - 0.00001) * 0.64 + 0.00001, 1e-15);
  auto s = schedules::RampUpSustainDecay(o, /*steps_per_epoch=*/100);
  EXPECT_DOUBLE_EQ(s(150), schedules::RampUpSustainDecayAtEpoch(o, 1));
  o.sustain_epochs = 2;
  EXPECT_NEAR(schedules::RampUpSustainDecayAtEpoch(o, 6), max, 1e-15);
  EXPECT_NEAR(schedules::RampUpSustainDecayAtEpoch(o, 8), (max - 0.00001) * 0.8 + 0.00001, 1e-15);
}

}  // namespace
}  // namespace strata::keras
