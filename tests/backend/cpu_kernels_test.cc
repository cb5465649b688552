// The cpu backend's hand-written kernels called directly, on inputs small enough to check by
// hand: losses (loss_kernels.h), dropout and broadcast (elementwise_kernels.h), batch-norm
// statistics (norm_kernels.h). The compiled-program tests cover them inside training steps.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "strata/backend/cpu/elementwise_kernels.h"
#include "strata/backend/cpu/loss_kernels.h"
#include "strata/backend/cpu/norm_kernels.h"
#include "strata/backend/dropout_mask.h"

namespace strata::backend::cpu {
namespace {

TEST(CpuKernelsTest, SoftmaxCrossEntropyOfUniformLogitsIsLogClasses) {
  const std::vector<float> logits = {0, 0, 0, 0, 2, 2, 2, 2};  // [2, 4]
  const std::vector<int32_t> labels = {1, 3};
  std::vector<float> probs(8);
  float loss = 0;
  ASSERT_TRUE(SoftmaxCrossEntropyForward(logits.data(), labels.data(), 2, 4, 0.0f, probs.data(), &loss).ok());
  EXPECT_NEAR(loss, std::log(4.0f), 1e-6);
  for (float p : probs) EXPECT_NEAR(p, 0.25f, 1e-7);
  // d loss / d logits = (p - one-hot) / rows.
  std::vector<float> dz(8);
  SoftmaxCrossEntropyBackward(probs.data(), labels.data(), 2, 4, 0.0f, 1.0f, dz.data());
  EXPECT_NEAR(dz[0], 0.125f, 1e-7);
  EXPECT_NEAR(dz[1], -0.375f, 1e-7);
  EXPECT_NEAR(dz[7], -0.375f, 1e-7);
}

TEST(CpuKernelsTest, SoftmaxCrossEntropyNamesALabelOutOfRange) {
  const std::vector<float> logits(6, 0.0f);  // [2, 3]
  const std::vector<int32_t> labels = {0, 3};
  std::vector<float> probs(6);
  float loss = 0;
  const Status st = SoftmaxCrossEntropyForward(logits.data(), labels.data(), 2, 3, 0.0f, probs.data(), &loss);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "label 3 of example 1 is outside [0, 3)");
}

TEST(CpuKernelsTest, MeanSquaredErrorAndItsGradient) {
  const std::vector<float> a = {1, 2, 3, 4}, b = {0, 2, 5, 4};
  EXPECT_FLOAT_EQ(MeanSquaredError(a.data(), b.data(), 4), (1.0f + 4.0f) / 4);
  std::vector<float> da(4);
  MeanSquaredErrorBackward(a.data(), b.data(), 4, 2.0f, da.data());  // 2 (a - b) * 2 / 4
  EXPECT_FLOAT_EQ(da[0], 1.0f);
  EXPECT_FLOAT_EQ(da[1], 0.0f);
  EXPECT_FLOAT_EQ(da[2], -2.0f);
}

TEST(CpuKernelsTest, DropoutMaskIsTheSharedHashScaledByKeep) {
  const int64_t n = 1000;
  const float rate = 0.3f;
  std::vector<float> x(n, 2.0f), y(n), mask(n);
  DropoutForward(x.data(), n, rate, /*seed=*/5, /*step=*/7, y.data(), mask.data());
  for (int64_t e = 0; e < n; ++e) {
    const bool dropped = DropoutUniform(5, 7, static_cast<uint64_t>(e)) < rate;
    EXPECT_EQ(mask[e], dropped ? 0.0f : 1.0f / (1.0f - rate)) << e;
    EXPECT_EQ(y[e], 2.0f * mask[e]) << e;
  }
}

TEST(CpuKernelsTest, BroadcastSourceIndexRepeatsAlongTheBroadcastAxes) {
  // [2, 3] from [2] along axis 1, and from [3] along axis 0.
  EXPECT_EQ(BroadcastSourceIndex(Shape{2, 3}, {1}), (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(BroadcastSourceIndex(Shape{2, 3}, {0}), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(BroadcastSourceIndex(Shape{2, 3}, {0, 1}), (std::vector<int32_t>(6, 0)));
  const std::vector<float> x = {10, 20, 30};
  const std::vector<int32_t> index = BroadcastSourceIndex(Shape{2, 3}, {0});
  std::vector<float> y(6);
  Gather(x.data(), index.data(), 6, y.data());
  EXPECT_EQ(y, (std::vector<float>{10, 20, 30, 10, 20, 30}));
}

TEST(CpuKernelsTest, SyncBatchNormWithoutASumIsTheLocalBatchNorm) {
  const std::vector<float> x = {1, 10, 3, 30};  // [2 rows, 2 channels]
  const std::vector<float> gamma = {1, 2}, beta = {0, 1};
  std::vector<float> mm = {0, 0}, mv = {1, 1}, y(4), mean(2), var(2);
  std::vector<double> acc(2 * 2 + 1);
  ASSERT_TRUE(SyncBatchNormForward(x.data(), gamma.data(), beta.data(), 2, 2, 0.0f, 0.5f, CrossReplicaSum(),
                                   acc.data(), mm.data(), mv.data(), y.data(), mean.data(), var.data())
                  .ok());
  EXPECT_FLOAT_EQ(mean[0], 2.0f);
  EXPECT_FLOAT_EQ(mean[1], 20.0f);
  EXPECT_FLOAT_EQ(var[0], 1.0f);  // biased
  EXPECT_FLOAT_EQ(var[1], 100.0f);
  EXPECT_FLOAT_EQ(y[0], -1.0f);
  EXPECT_FLOAT_EQ(y[3], 3.0f);  // 2 * 1 + 1
  EXPECT_FLOAT_EQ(mm[1], 10.0f);           // 0 * 0.5 + 20 * 0.5
  EXPECT_FLOAT_EQ(mv[0], 0.5f + 2 * 0.5f);  // unbiased variance 2
}

TEST(CpuKernelsTest, MovingStatisticsFollowKerasMomentum) {
  const std::vector<float> mean = {4}, var = {2};
  std::vector<float> mm = {2}, mv = {1};
  UpdateMovingStatistics(mean.data(), var.data(), 1, 0.75f, 2.0f, mm.data(), mv.data());
  EXPECT_FLOAT_EQ(mm[0], 2 * 0.75f + 4 * 0.25f);
  EXPECT_FLOAT_EQ(mv[0], 1 * 0.75f + 2 * 2 * 0.25f);
}

}  // namespace
}  // namespace strata::backend::cpu
