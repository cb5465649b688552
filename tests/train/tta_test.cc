// Test-time augmentation (train/tta.h) on a model whose outputs are written by hand: a dense
// layer over a 1 x 3 image scores class 0 by the left pixel and class 1 by the middle and right
// pixels. With the middle at 0.5 the mirror image swaps the side scores, so the mean of the two
// always favours class 1.
#include <gtest/gtest.h>

#include <array>

#include "strata/keras/model.h"
#include "strata/train/tta.h"

namespace strata::train {
namespace {

using namespace keras::layers;  // NOLINT

std::unique_ptr<keras::Model> LeftRightModel() {
  auto m = keras::Sequential({InputLayer({1, 3, 1}), Flatten(), Dense(2, {.use_bias = false, .name = "d"})}, "lr");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  EXPECT_TRUE((*m)->compile({.optimizer = keras::optimizers::SGD(0.01), .loss = keras::losses::MeanSquaredError()}).ok());
  auto kernel = (*m)->variables()->Value("d/kernel");  // [3 pixels, 2 classes]
  EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
  if (!kernel.ok()) return nullptr;
  float* w = kernel->data<float>();
  const float k[6] = {1, 0, 0, 1, 0, 1};  // class 0 <- left, class 1 <- middle + right
  for (int i = 0; i < 6; ++i) w[i] = k[i];
  return std::move(m).value();
}

// Images (left, middle, right) with their labels, in batches of two (the last one short).
data::Dataset Images(const std::vector<std::array<float, 3>>& pixels, const std::vector<int64_t>& labels) {
  const int64_t n = static_cast<int64_t>(pixels.size());
  Tensor x(DType::kF32, {n, 1, 3, 1}), y(DType::kI64, {n});
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 3; ++p) x.data<float>()[i * 3 + p] = pixels[i][p];
    y.data<int64_t>()[i] = labels[i];
  }
  return data::Dataset::from_tensor_slices(data::Element({x, y})).batch(2);
}

TEST(Tta, FlipAveragesTheImageAndItsMirrorImage) {
  auto m = LeftRightModel();
  ASSERT_NE(m, nullptr);
  // Plain: (3, 0): 3 against 0.5, class 0; (0, 3): class 1; (2, 1): 2 against 1.5, class 0.
  // Flip: every image scores l + r against l + r + 1, class 1.
  data::Dataset d = Images({{3, 0.5, 0}, {0, 0.5, 3}, {2, 0.5, 1}}, {0, 1, 0});
  auto plain = TtaAccuracy(*m, d, -1, "");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_DOUBLE_EQ(*plain, 1.0);
  auto flip = TtaAccuracy(*m, d, -1, "flip");
  ASSERT_TRUE(flip.ok()) << flip.status().ToString();
  EXPECT_DOUBLE_EQ(*flip, 1.0 / 3.0);
  // `steps` counts batches: the first two images only.
  auto first = TtaAccuracy(*m, d, 1, "flip");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_DOUBLE_EQ(*first, 0.5);
}

TEST(Tta, BadNamesAndElementsAreRefusedWithTheFlag) {
  EXPECT_TRUE(CheckTta("").ok());
  for (const std::string& name : TtaNames()) EXPECT_TRUE(CheckTta(name).ok()) << name;
  Status st = CheckTta("rotate");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--tta must be flip"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("rotate"), std::string::npos) << st.ToString();

  auto m = LeftRightModel();
  ASSERT_NE(m, nullptr);
  Tensor x(DType::kF32, {2, 1, 3, 1}), y(DType::kF32, {2});
  auto r = TtaAccuracy(*m, data::Dataset::from_tensor_slices(data::Element({x, y})).batch(2), -1, "flip");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("integer class ids"), std::string::npos) << r.status().ToString();
  auto images_only = TtaAccuracy(*m, data::Dataset::from_tensor_slices(data::Element({x})).batch(2), -1, "flip");
  ASSERT_FALSE(images_only.ok());
  EXPECT_NE(images_only.status().message().find("(image, label) batches"), std::string::npos)
      << images_only.status().ToString();
}

}  // namespace
}  // namespace strata::train
