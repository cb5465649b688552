// The decode + augment path: reproducible for a seed with any number of threads, the
// DCT-scaled path close to full decode + resize, and errors that name the element.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "strata/core/thread_pool.h"
#include "strata/image/augment.h"
#include "strata/image/jpeg.h"
#include "strata/image/png.h"
#include "test_util.h"

namespace strata::image {
namespace {

using testing::MakeTestImage;

std::vector<std::string> EncodedJpegs(int count, int size) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    Image img = MakeTestImage(size, size + i % 3, 3, i);
    std::string jpg;
    EXPECT_TRUE(EncodeJpeg(img.view(), {.quality = 90}, &jpg).ok());
    out.push_back(std::move(jpg));
  }
  return out;
}

AugmentOptions FlowersRecipe() {
  return {.height = 48, .width = 48, .crop = CropMode::kRandomResized, .flip_left_right = 0.5f,
          .brightness = 0.1f, .contrast_lower = 0.8f, .contrast_upper = 1.2f, .saturation_lower = 0,
          .saturation_upper = 2, .hue = 0.05f, .rotation = 0.2f};
}

// The input pipeline hands the augmenter uninitialised memory (Tensor::Empty): every
// output value must be written, whatever the crop, rotation (fill) and flips.
TEST(Augment, WritesEveryOutputValue) {
  auto jpgs = EncodedJpegs(6, 96);
  AugmentOptions plain{.height = 40, .width = 56};
  AugmentOptions central{.height = 40, .width = 40, .crop = CropMode::kCentral, .flip_up_down = 1};
  AugmentOptions random{.height = 33, .width = 47, .crop = CropMode::kRandom, .resize = ResizeMethod::kArea};
  for (const AugmentOptions& base : {FlowersRecipe(), plain, central, random}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      AugmentOptions o = base;
      o.dtype = dtype;
      auto aug = Augmenter::Make(o, 7);
      ASSERT_TRUE(aug.ok()) << aug.status().ToString();
      for (size_t i = 0; i < jpgs.size(); ++i) {
        std::vector<unsigned char> out(aug->output_bytes(), 0xFF);  // all-ones bits: NaN in f32 and bf16
        ASSERT_TRUE(aug->Run(jpgs[i], i, out.data()).ok());
        const size_t width = dtype == DType::kF32 ? 4 : 2;
        for (size_t v = 0; v < out.size(); v += width) {
          bool all_ones = true;
          for (size_t b = 0; b < width; ++b) all_ones &= out[v + b] == 0xFF;
          ASSERT_FALSE(all_ones) << "value " << v / width << " of element " << i << " left unwritten, "
                                 << DTypeName(dtype) << " " << o.height << "x" << o.width;
        }
      }
    }
  }
}

TEST(Augment, SameSeedSamePixelsForAnyThreadCount) {
  auto jpgs = EncodedJpegs(12, 96);
  std::vector<std::string_view> views(jpgs.begin(), jpgs.end());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    AugmentOptions o = FlowersRecipe();
    o.dtype = dtype;
    auto aug = Augmenter::Make(o, 1234);
    ASSERT_TRUE(aug.ok()) << aug.status().ToString();
    Tensor serial(dtype, Shape{12, 48, 48, 3}), one(dtype, Shape{12, 48, 48, 3}), two(dtype, Shape{12, 48, 48, 3});
    ASSERT_TRUE(aug->RunBatch(views, 100, &serial).ok());
    ThreadPool p1({.num_threads = 1}), p2({.num_threads = 2});
    ASSERT_TRUE(aug->RunBatch(views, 100, &one, &p1).ok());
    ASSERT_TRUE(aug->RunBatch(views, 100, &two, &p2).ok());
    EXPECT_EQ(0, std::memcmp(serial.raw_data(), one.raw_data(), serial.nbytes()));
    EXPECT_EQ(0, std::memcmp(serial.raw_data(), two.raw_data(), serial.nbytes()));
    // Element i alone gives the same pixels as element i inside the batch.
    std::vector<char> single(aug->output_bytes());
    ASSERT_TRUE(aug->Run(jpgs[5], 105, single.data()).ok());
    EXPECT_EQ(0, std::memcmp(single.data(), static_cast<char*>(serial.raw_data()) + 5 * single.size(), single.size()));
    // Another seed or another element index gives other pixels.
    auto other = Augmenter::Make(o, 99);
    std::vector<char> b(single.size());
    ASSERT_TRUE(other->Run(jpgs[5], 105, b.data()).ok());
    EXPECT_NE(0, std::memcmp(single.data(), b.data(), b.size()));
    ASSERT_TRUE(aug->Run(jpgs[5], 106, b.data()).ok());
    EXPECT_NE(0, std::memcmp(single.data(), b.data(), b.size()));
  }
}

TEST(Augment, DctScaledDecodeIsCloseToFullDecodeThenResize) {
  Image img = MakeTestImage(512, 512, 3, 9);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(img.view(), {.quality = 90}, &jpg).ok());
  AugmentOptions o{.height = 192, .width = 192, .resize = ResizeMethod::kArea};
  auto scaled = Augmenter::Make(o, 1);
  o.dct_scaling = false;
  auto full = Augmenter::Make(o, 1);
  std::vector<float> a(192 * 192 * 3), b(a.size());
  ASSERT_TRUE(scaled->Run(jpg, 0, a.data()).ok());
  ASSERT_TRUE(full->Run(jpg, 0, b.data()).ok());
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) se += (a[i] - b[i]) * (a[i] - b[i]);
  const double rmse = std::sqrt(se / a.size()) * 255;
  // The test image carries pixel noise, which 1/2-scale IDCT and area resize smooth
  // differently; on photos the difference is smaller.
  EXPECT_LT(rmse, 6.0) << "on the 0..255 scale";
}

TEST(Augment, CentralCropOfDecodedPixelsAndPng) {
  Image img = MakeTestImage(40, 40, 1);
  std::string png;
  ASSERT_TRUE(EncodePng(img.view(), {}, &png).ok());
  auto aug = Augmenter::Make({.height = 20, .width = 20, .channels = 1, .crop = CropMode::kCentral,
                              .central_fraction = 0.5f, .resize = ResizeMethod::kArea},
                             0);
  ASSERT_TRUE(aug.ok());
  std::vector<float> out(400);
  ASSERT_TRUE(aug->Run(png, 0, out.data()).ok());
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x)
      ASSERT_NEAR(out[y * 20 + x], img.data()[(y + 10) * 40 + x + 10] / 255.0f, 1e-5);
  std::vector<float> again(400);
  ASSERT_TRUE(aug->RunDecoded(img.view(), 0, again.data()).ok());
  EXPECT_EQ(out, again);
}

TEST(Augment, BadOptionsAndBadBytesAreErrors) {
  EXPECT_FALSE(Augmenter::Make({.channels = 1, .saturation_lower = 0, .saturation_upper = 2}, 0).ok());
  EXPECT_FALSE(Augmenter::Make({.height = 0}, 0).ok());
  EXPECT_FALSE(Augmenter::Make({.hue = 0.7f}, 0).ok());
  EXPECT_FALSE(Augmenter::Make({.dtype = DType::kI64}, 0).ok());
  auto aug = Augmenter::Make({.height = 8, .width = 8}, 0);
  std::vector<std::string> jpgs = EncodedJpegs(3, 16);
  jpgs[1] = jpgs[1].substr(0, jpgs[1].size() / 2);
  std::vector<std::string_view> views(jpgs.begin(), jpgs.end());
  Tensor batch(DType::kF32, Shape{3, 8, 8, 3});
  Status st = aug->RunBatch(views, 0, &batch);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("batch element 1"), std::string::npos) << st.ToString();
  Tensor wrong(DType::kF32, Shape{3, 8, 9, 3});
  EXPECT_EQ(aug->RunBatch(views, 0, &wrong).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::image
