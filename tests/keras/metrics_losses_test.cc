#include <gtest/gtest.h>

#include <cmath>

#include "strata/keras/callbacks.h"
#include "strata/keras/losses.h"
#include "strata/keras/metrics.h"

namespace strata::keras {
namespace {

TEST(Metrics, AccuracyTopKAndMacroF1) {
  // 4 examples, 3 classes.
  const float out[] = {0.7f, 0.2f, 0.1f,   // pred 0
                       0.1f, 0.3f, 0.6f,   // pred 2
                       0.2f, 0.5f, 0.3f,   // pred 1
                       0.3f, 0.3f, 0.4f};  // pred 2
  const int64_t labels[] = {0, 1, 1, 2};
  MetricBatch b{out, 4, 3, labels, nullptr};
  auto acc = MakeMetric("accuracy", losses::SparseCategoricalCrossentropy());
  ASSERT_TRUE(acc.ok());
  (*acc)->Update(b);
  EXPECT_DOUBLE_EQ((*acc)->Result(), 0.75);
  auto top2 = MakeMetric("top2", losses::SparseCategoricalCrossentropy());
  ASSERT_TRUE(top2.ok());
  (*top2)->Update(b);
  EXPECT_DOUBLE_EQ((*top2)->Result(), 1.0);  // example 1: label 1 (0.3) is second
  auto f1 = MakeMetric("f1_macro", losses::SparseCategoricalCrossentropy());
  ASSERT_TRUE(f1.ok());
  (*f1)->Update(b);
  // class 0: tp1 fp0 fn0 -> 1; class 1: tp1 fp0 fn1 -> 2/3; class 2: tp1 fp1 fn0 -> 2/3.
  EXPECT_NEAR((*f1)->Result(), (1.0 + 2.0 / 3 + 2.0 / 3) / 3, 1e-12);
  (*f1)->Reset();
  EXPECT_DOUBLE_EQ((*f1)->Result(), 0.0);
  EXPECT_FALSE(MakeMetric("auroc-ish", losses::SparseCategoricalCrossentropy()).ok());
}

TEST(Losses, HostCrossEntropyMatchesClosedForm) {
  const float logits[] = {2.0f, 1.0f, 0.1f};
  const int64_t y[] = {0};
  float l;
  ASSERT_TRUE(HostLoss(losses::SparseCategoricalCrossentropy({.from_logits = true}), logits, 1, 3, y, nullptr, &l).ok());
  double lse = std::log(std::exp(2.0) + std::exp(1.0) + std::exp(0.1));
  EXPECT_NEAR(l, lse - 2.0, 1e-6);
  const float probs[] = {0.5f, 0.25f, 0.25f};
  ASSERT_TRUE(HostLoss(losses::SparseCategoricalCrossentropy(), probs, 1, 3, y, nullptr, &l).ok());
  EXPECT_NEAR(l, -std::log(0.5), 1e-6);
  // Label smoothing 0.1 over 3 classes: targets (0.9333, 0.0333, 0.0333).
  const float onehot[] = {1, 0, 0};
  ASSERT_TRUE(HostLoss(losses::CategoricalCrossentropy({.label_smoothing = 0.1f}), probs, 1, 3, nullptr, onehot, &l).ok());
  double t0 = 0.9 + 0.1 / 3, t = 0.1 / 3;
  EXPECT_NEAR(l, -(t0 * std::log(0.5) + 2 * t * std::log(0.25)), 1e-6);
  // The sparse loss smooths the same way from the class index (Strata's; Keras's sparse loss has
  // no smoothing): -sum_j ((1 - e) [j == y] + e / K) log p_j, by hand for e = 0.1, K = 3.
  ASSERT_TRUE(HostLoss(losses::SparseCategoricalCrossentropy({.label_smoothing = 0.1f}), probs, 1, 3, y, nullptr, &l).ok());
  EXPECT_NEAR(l, -(t0 * std::log(0.5) + 2 * t * std::log(0.25)), 1e-6);
  ASSERT_TRUE(HostLoss(losses::SparseCategoricalCrossentropy({.from_logits = true, .label_smoothing = 0.1f}), logits, 1,
                       3, y, nullptr, &l)
                  .ok());
  EXPECT_NEAR(l, -(t0 * (2.0 - lse) + t * (1.0 - lse) + t * (0.1 - lse)), 1e-6);
  const float pred[] = {1.0f, 3.0f};
  const float target[] = {0.0f, 1.0f};
  ASSERT_TRUE(HostLoss(losses::MeanSquaredError(), pred, 1, 2, nullptr, target, &l).ok());
  EXPECT_NEAR(l, (1.0 + 4.0) / 2, 1e-6);
  const int64_t bad[] = {7};
  Status s = HostLoss(losses::SparseCategoricalCrossentropy(), probs, 1, 3, bad, nullptr, &l);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("label 7"), std::string::npos);
}

TEST(Progbar, LineLooksLikeKeras) {
  Logs logs = {{"loss", 0.31214}, {"accuracy", 0.88741}};
  std::string mid = ProgbarLogger::Line(234, 468, 12.0, logs, false);
  EXPECT_EQ(mid, "234/468 [==============>...............] - ETA: 12s - loss: 0.3121 - accuracy: 0.8874");
  std::string done = ProgbarLogger::Line(468, 468, 25.0, logs, true);
  EXPECT_EQ(done, "468/468 [==============================] - 25s 53ms/step - loss: 0.3121 - accuracy: 0.8874");
}

TEST(Callbacks, ModeResolvesFromTheMonitoredName) {
  EXPECT_EQ(ResolveMode(Mode::kAuto, "val_loss"), Mode::kMin);
  EXPECT_EQ(ResolveMode(Mode::kAuto, "val_accuracy"), Mode::kMax);
  EXPECT_EQ(ResolveMode(Mode::kAuto, "val_f1_macro"), Mode::kMax);
  EXPECT_EQ(ResolveMode(Mode::kMin, "accuracy"), Mode::kMin);
}

}  // namespace
}  // namespace strata::keras
