// Resize, flip, colour, rotation, crop and normalisation against their scalar
// references, and resize against PyTorch's values (testdata/image/make_testdata.py).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>
#include <numeric>
#include <vector>

#include "strata/core/thread_pool.h"
#include "strata/data/rng.h"
#include "strata/image/color.h"
#include "strata/image/crop.h"
#include "strata/image/flip.h"
#include "strata/image/jpeg.h"
#include "strata/image/kernels.h"
#include "strata/image/normalize.h"
#include "strata/image/pad_crop.h"
#include "strata/image/random.h"
#include "strata/image/resize.h"
#include "strata/image/rotate.h"
#include "test_util.h"

namespace strata::image {
namespace {

using testing::MakeTestImage;
using testing::MaxAbsDiff;
using testing::ReadRaw;
using testing::ReadTestFile;

struct ResizeCase {
  int h, w, c, oh, ow;
  ResizeMethod m;
  bool lr, ud;
};

TEST(Resize, MatchesScalarReference) {
  const ResizeCase cases[] = {
      {256, 256, 3, 192, 192, ResizeMethod::kBilinear, false, false},
      {256, 256, 3, 192, 192, ResizeMethod::kBilinear, true, false},
      {100, 80, 3, 33, 47, ResizeMethod::kBilinear, true, true},
      {20, 30, 1, 61, 77, ResizeMethod::kBilinear, false, true},   // upscale
      {17, 19, 4, 17, 19, ResizeMethod::kBilinear, false, false},  // identity size
      {1, 1, 3, 5, 7, ResizeMethod::kBilinear, false, false},
      {9, 1, 2, 4, 3, ResizeMethod::kBilinear, false, false},
      {512, 512, 3, 192, 192, ResizeMethod::kArea, false, false},
      {100, 80, 3, 33, 47, ResizeMethod::kArea, true, false},
      {64, 64, 1, 8, 8, ResizeMethod::kArea, false, true},
      {10, 12, 3, 25, 31, ResizeMethod::kArea, false, false},      // area upscale
      {300, 7, 3, 2, 3, ResizeMethod::kArea, false, false},        // 150x taps
  };
  for (const auto& t : cases) {
    Image src = MakeTestImage(t.h, t.w, t.c);
    const ResizeOptions o{.method = t.m, .flip_left_right = t.lr, .flip_up_down = t.ud};
    std::vector<float> got(static_cast<size_t>(t.oh) * t.ow * t.c), want(got.size());
    ASSERT_TRUE(ResizeToFloat(src.view(), t.oh, t.ow, o, got.data()).ok());
    ResizeToFloatReference(src.view(), t.oh, t.ow, o, want.data());
    EXPECT_LT(MaxAbsDiff(got.data(), want.data(), got.size()), 2e-3)
        << t.h << "x" << t.w << "x" << t.c << " -> " << t.oh << "x" << t.ow << " " << ResizeMethodName(t.m);
  }
}

TEST(Resize, IdentitySizeIsExact) {
  Image src = MakeTestImage(31, 17, 3);
  Image out;
  for (auto m : {ResizeMethod::kBilinear, ResizeMethod::kArea}) {
    ASSERT_TRUE(Resize(src.view(), 31, 17, {.method = m}, &out).ok());
    EXPECT_EQ(0, std::memcmp(src.data(), out.data(), src.size_bytes())) << ResizeMethodName(m);
  }
}

TEST(Resize, BilinearMatchesPyTorch) {
  Image photo;
  ASSERT_TRUE(DecodeJpeg(ReadTestFile("photo_64x48.jpg"), {.fast_dct = false}, &photo).ok());  // the goldens' decode
  for (auto [oh, ow] : {std::pair{20, 27}, {60, 70}, {48, 64}}) {
    const auto golden = ReadRaw<float>("bilinear_" + std::to_string(oh) + "x" + std::to_string(ow) + ".f32");
    ASSERT_EQ(golden.size(), static_cast<size_t>(oh) * ow * 3);
    std::vector<float> got(golden.size());
    ASSERT_TRUE(ResizeToFloat(photo.view(), oh, ow, {}, got.data()).ok());
    EXPECT_LT(MaxAbsDiff(got.data(), golden.data(), got.size()), 2e-3) << oh << "x" << ow;
  }
}

TEST(Resize, AreaMatchesPyTorchAtIntegerFactor) {
  Image photo;
  ASSERT_TRUE(DecodeJpeg(ReadTestFile("photo_64x48.jpg"), {.fast_dct = false}, &photo).ok());  // the goldens' decode
  const auto golden = ReadRaw<float>("area_12x16.f32");
  std::vector<float> got(golden.size());
  ASSERT_TRUE(ResizeToFloat(photo.view(), 12, 16, {.method = ResizeMethod::kArea}, got.data()).ok());
  EXPECT_LT(MaxAbsDiff(got.data(), golden.data(), got.size()), 2e-3);
}

TEST(Resize, OfACropViewEqualsResizeOfTheCopiedCrop) {
  Image src = MakeTestImage(90, 70, 3);
  auto crop = src.view().Crop(11, 7, 50, 41);
  ASSERT_TRUE(crop.ok());
  Image dense;
  CopyToImage(*crop, &dense);
  std::vector<float> a(24 * 24 * 3), b(a.size());
  ASSERT_TRUE(ResizeToFloat(*crop, 24, 24, {.flip_left_right = true}, a.data()).ok());
  ASSERT_TRUE(ResizeToFloat(dense.view(), 24, 24, {.flip_left_right = true}, b.data()).ok());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

TEST(Resize, RejectsBadSizes) {
  Image src = MakeTestImage(4, 4, 3);
  std::vector<float> out(16);
  EXPECT_EQ(ResizeToFloat(src.view(), 0, 4, {}, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeToFloat(ImageView{}, 2, 2, {}, out.data()).code(), StatusCode::kInvalidArgument);
}

TEST(Flip, FloatAndU8FlipsAgreeWithIndexing) {
  const int h = 5, w = 19, c = 3;
  Image src = MakeTestImage(h, w, c);
  std::vector<float> f(h * w * c), lr(f.size()), ud(f.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = src.data()[i];
  FlipLeftRight(f.data(), h, w, c, lr.data());
  FlipUpDown(f.data(), h, w, c, ud.data());
  Image ulr, uud;
  FlipLeftRight(src.view(), &ulr);
  FlipUpDown(src.view(), &uud);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        const uint8_t want_lr = src.data()[(y * w + (w - 1 - x)) * c + k];
        const uint8_t want_ud = src.data()[((h - 1 - y) * w + x) * c + k];
        ASSERT_EQ(lr[(y * w + x) * c + k], want_lr);
        ASSERT_EQ(ud[(y * w + x) * c + k], want_ud);
        ASSERT_EQ(ulr.data()[(y * w + x) * c + k], want_lr);
        ASSERT_EQ(uud.data()[(y * w + x) * c + k], want_ud);
      }
}

std::vector<float> FloatImage(int h, int w, int c, uint32_t seed = 3) {
  Image img = MakeTestImage(h, w, c, seed);
  return std::vector<float>(img.data(), img.data() + img.size_bytes());
}

TEST(PadCrop, IsAWindowOfTheZeroPaddedMirroredImage) {
  // 1..9 mirrored is [3 2 1; 6 5 4; 9 8 7]; padded by 1 and cut at row 1 + dy = 2, column
  // 1 + dx = 0 it reads [0 6 5; 0 9 8; 0 0 0] (worked by hand).
  const float src[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  float dst[9];
  PadCropFlip(src, 3, 3, 1, {.dy = 1, .dx = -1, .flip = true}, dst);
  EXPECT_EQ(std::vector<float>(dst, dst + 9), (std::vector<float>{0, 6, 5, 0, 9, 8, 0, 0, 0}));
  // Unmirrored, dy = -1, dx = 2: [0 0 0; 3 0 0; 6 0 0].
  PadCropFlip(src, 3, 3, 1, {.dy = -1, .dx = 2, .flip = false}, dst);
  EXPECT_EQ(std::vector<float>(dst, dst + 9), (std::vector<float>{0, 0, 0, 3, 0, 0, 6, 0, 0}));
  // Two channels move together; no offset and no mirror is a copy.
  const float rgb[8] = {1, 10, 2, 20, 3, 30, 4, 40};  // [2, 2, 2]
  float out[8];
  PadCropFlip(rgb, 2, 2, 2, {.dy = 0, .dx = 0, .flip = true}, out);
  EXPECT_EQ(std::vector<float>(out, out + 8), (std::vector<float>{2, 20, 1, 10, 4, 40, 3, 30}));
  PadCropFlip(rgb, 2, 2, 2, {}, out);
  EXPECT_EQ(std::vector<float>(out, out + 8), std::vector<float>(rgb, rgb + 8));
  // An offset as large as the image leaves nothing.
  PadCropFlip(src, 3, 3, 1, {.dy = 0, .dx = 3}, dst);
  EXPECT_EQ(std::vector<float>(dst, dst + 9), std::vector<float>(9, 0.0f));
}

TEST(PadCrop, DrawsEveryPlacementAndTheMirrorAtTheirRates) {
  data::Rng rng(11);
  std::map<std::tuple<int, int, bool>, int> seen;
  const int draws = 50000;
  for (int i = 0; i < draws; ++i) {
    const PadCropPlacement p = DrawPadCrop(2, 0.5f, rng);
    ASSERT_GE(p.dy, -2);
    ASSERT_LE(p.dy, 2);
    ASSERT_GE(p.dx, -2);
    ASSERT_LE(p.dx, 2);
    ++seen[{p.dy, p.dx, p.flip}];
  }
  ASSERT_EQ(seen.size(), 50u);  // 5 x 5 offsets, mirrored or not
  for (const auto& [placement, n] : seen) EXPECT_NEAR(n, draws / 50, 150) << "a placement's count";  // 5 sigma: 1,000 +- 31
  const PadCropPlacement none = DrawPadCrop(0, 0.0f, rng);
  EXPECT_EQ(none, PadCropPlacement{});
  EXPECT_TRUE(DrawPadCrop(0, 1.0f, rng).flip);
}

TEST(Color, SaturationFollowsTensorFlowSemantics) {
  std::vector<float> px = {200, 100, 50, 30, 30, 30, 0, 0, 0};
  auto a = px;
  ASSERT_TRUE(AdjustSaturation({a.data(), 3, 3}, 0).ok());
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(a[c], 200, 1e-3);  // S = 0: every channel becomes V
  for (int c = 3; c < 9; ++c) EXPECT_NEAR(a[c], px[c], 1e-3);  // grays and black stay
  a = px;
  ASSERT_TRUE(AdjustSaturation({a.data(), 3, 3}, 2).ok());
  // S = 0.75 -> clipped 1: min becomes 0, V stays, hue kept.
  EXPECT_NEAR(a[0], 200, 1e-3);
  EXPECT_NEAR(a[2], 0, 1e-3);
  EXPECT_NEAR(a[1], 200 - (200 - 100) * (200.0 / 150), 1e-3);
  EXPECT_FALSE(AdjustSaturation({a.data(), 1, 1}, 2).ok());
  EXPECT_FALSE(AdjustSaturation({a.data(), 3, 3}, -1).ok());
}

TEST(Color, HueRotationPermutesPrimaries) {
  std::vector<float> px = {255, 0, 0, 0, 255, 0};
  ASSERT_TRUE(AdjustHue({px.data(), 2, 3}, 1.0f / 3).ok());
  EXPECT_NEAR(px[0], 0, 1e-2);
  EXPECT_NEAR(px[1], 255, 1e-2);
  EXPECT_NEAR(px[2], 0, 1e-2);
  EXPECT_NEAR(px[5], 255, 1e-2);  // green -> blue
  auto img = FloatImage(16, 16, 3), orig = img;
  ASSERT_TRUE(AdjustHue({img.data(), 256, 3}, 0).ok());
  EXPECT_LT(MaxAbsDiff(img.data(), orig.data(), img.size()), 1e-3);
  ASSERT_TRUE(AdjustHue({img.data(), 256, 3}, 0.3f).ok());
  ASSERT_TRUE(AdjustHue({img.data(), 256, 3}, -0.3f).ok());
  EXPECT_LT(MaxAbsDiff(img.data(), orig.data(), img.size()), 1e-2);
}

TEST(Color, ContrastKeepsChannelMeansAndBrightnessShifts) {
  auto img = FloatImage(13, 11, 3);
  const int64_t n = 13 * 11;
  auto mean = [&](int c) {
    double s = 0;
    for (int64_t p = 0; p < n; ++p) s += img[p * 3 + c];
    return s / n;
  };
  const double m0 = mean(0), m2 = mean(2);
  const float v0 = img[0];
  AdjustContrast({img.data(), n, 3}, 0.5f);
  EXPECT_NEAR(mean(0), m0, 1e-2);
  EXPECT_NEAR(mean(2), m2, 1e-2);
  EXPECT_NEAR(img[0], (v0 - m0) * 0.5 + m0, 1e-2);
  const float before = img[5];
  AdjustBrightness({img.data(), n, 3}, 12.5f);
  EXPECT_NEAR(img[5], before + 12.5f, 1e-4);
}

TEST(Rotate, QuarterTurnIsRot90AndZeroIsIdentity) {
  const int s = 21, c = 3;
  auto img = FloatImage(s, s, c);
  std::vector<float> out(img.size());
  ASSERT_TRUE(Rotate(img.data(), s, s, c, 0, nullptr, out.data()).ok());
  EXPECT_LT(MaxAbsDiff(img.data(), out.data(), img.size()), 1e-4);
  ASSERT_TRUE(Rotate(img.data(), s, s, c, static_cast<float>(M_PI / 2), nullptr, out.data()).ok());
  for (int y = 0; y < s; ++y)
    for (int x = 0; x < s; ++x)
      for (int k = 0; k < c; ++k)  // counter-clockwise, as numpy.rot90
        ASSERT_NEAR(out[(y * s + x) * c + k], img[(x * s + (s - 1 - y)) * c + k], 1e-3) << y << "," << x;
}

TEST(Rotate, CornersTakeTheFillAndVectorMatchesScalar) {
  const int h = 30, w = 40, c = 3;
  auto img = FloatImage(h, w, c);
  std::vector<float> out(img.size());
  const float fill[3] = {7, 8, 9};
  ASSERT_TRUE(Rotate(img.data(), h, w, c, 0.6f, fill, out.data()).ok());
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], 8);
  EXPECT_EQ(out[2], 9);
  // The same rows through the scalar kernels.
  const auto& ref = kernels::ScalarKernels();
  std::vector<float> want(img.size());
  const float cy = (h - 1) * 0.5f, cx = (w - 1) * 0.5f, ca = std::cos(0.6f), sa = std::sin(0.6f);
  for (int y = 0; y < h; ++y) {
    const float oy = y - cy;
    ref.affine_sample_row(img.data(), h, w, c, cy + sa * -cx + ca * oy, cx + ca * -cx - sa * oy, sa, ca, w, fill,
                          want.data() + y * w * c);
  }
  EXPECT_LT(MaxAbsDiff(out.data(), want.data(), out.size()), 1e-3);
  EXPECT_FALSE(Rotate(img.data(), h, w, 5, 0.1f, fill, out.data()).ok());
}

TEST(Crop, RectanglesStayInsideAndFollowTheirRanges) {
  EXPECT_EQ(CentralCropRect(100, 200, 0.5f), (CropRect{25, 50, 50, 100}));
  EXPECT_EQ(CentralCropRect(10, 10, 1.0f), (CropRect{0, 0, 10, 10}));
  SeedStream rng(7, 0);
  EXPECT_FALSE(RandomCropRect(10, 10, 11, 5, rng).ok());
  int corners = 0;
  for (int i = 0; i < 2000; ++i) {
    auto r = RandomCropRect(10, 12, 8, 9, rng);
    ASSERT_TRUE(r.ok());
    ASSERT_LE(r->y + 8, 10);
    ASSERT_LE(r->x + 9, 12);
    corners += r->y == 2 && r->x == 3;
  }
  EXPECT_GT(corners, 100);  // the far corner is reachable (1/12 of draws)
  RandomResizedCropOptions o;
  double area_sum = 0;
  for (int i = 0; i < 2000; ++i) {
    CropRect r = RandomResizedCropRect(300, 400, o, rng);
    ASSERT_GE(r.y, 0);
    ASSERT_GE(r.x, 0);
    ASSERT_LE(r.y + r.height, 300);
    ASSERT_LE(r.x + r.width, 400);
    const double ratio = static_cast<double>(r.width) / r.height;
    ASSERT_GT(ratio, 0.7);
    ASSERT_LT(ratio, 1.4);
    area_sum += static_cast<double>(r.width) * r.height / (300.0 * 400);
  }
  EXPECT_GT(area_sum / 2000, 0.3);
  EXPECT_LT(area_sum / 2000, 0.6);
  // A very wide image falls back to a centred crop of the widest allowed ratio.
  CropRect r = RandomResizedCropRect(10, 1000, {.area_min = 0.99f, .area_max = 1.0f}, rng);
  EXPECT_EQ(r.height, 10);
  EXPECT_EQ(r.width, 13);
}

TEST(Random, PhiloxKnownAnswerAndStreams) {
  // Random123's known-answer test: philox4x32_10, counter 0, key 0.
  const uint32_t zero[4] = {0, 0, 0, 0};
  uint32_t out[4];
  SeedStream::Philox(zero, 0, 0, out);
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
  SeedStream a(1, 5), b(1, 5), c(1, 6), d(2, 5);
  const uint32_t x = a.NextU32();
  EXPECT_EQ(x, b.NextU32());
  EXPECT_NE(x, c.NextU32());
  EXPECT_NE(x, d.NextU32());
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    float u = a.Uniform();
    ASSERT_GE(u, 0);
    ASSERT_LT(u, 1);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(Normalize, AffineFormAndBf16MatchScalarMath) {
  Image src = MakeTestImage(7, 9, 3);
  Normalization n{.mean = {123.675f, 116.28f, 103.53f}, .std = {58.395f, 57.12f, 57.375f}};
  std::vector<float> f(src.size_bytes());
  std::vector<bf16> h(src.size_bytes());
  ASSERT_TRUE(NormalizeImage(src.view(), n, DType::kF32, f.data()).ok());
  ASSERT_TRUE(NormalizeImage(src.view(), n, DType::kBF16, h.data()).ok());
  for (size_t i = 0; i < f.size(); ++i) {
    const int c = static_cast<int>(i % 3);
    const float want = (src.data()[i] - n.mean[c]) / n.std[c];
    ASSERT_NEAR(f[i], want, 1e-5);
    ASSERT_NEAR(ToF32(h[i]), want, std::abs(want) / 128 + 1e-6);
  }
  auto crop = src.view().Crop(1, 2, 4, 5);  // strided source
  std::vector<float> g(4 * 5 * 3);
  ASSERT_TRUE(NormalizeImage(*crop, n, DType::kF32, g.data()).ok());
  EXPECT_NEAR(g[0], (crop->row(0)[0] - n.mean[0]) / n.std[0], 1e-5);
  EXPECT_NEAR(g[5 * 3], (crop->row(1)[0] - n.mean[0]) / n.std[0], 1e-5);
  EXPECT_FALSE(NormalizeImage(src.view(), n, DType::kI32, g.data()).ok());
}

TEST(Normalize, StackBatchNhwcWithPoolAndShapeErrors) {
  std::vector<Image> imgs;
  for (int i = 0; i < 5; ++i) imgs.push_back(MakeTestImage(6, 4, 1, i));
  std::vector<ImageView> views;
  for (auto& im : imgs) views.push_back(im.view());
  Tensor batch(DType::kF32, Shape{5, 6, 4, 1});
  ThreadPool pool({.num_threads = 2});
  ASSERT_TRUE(StackBatch(views, {}, &batch, &pool).ok());
  for (int i = 0; i < 5; ++i)
    for (int p = 0; p < 24; ++p)
      ASSERT_NEAR(batch.data<float>()[i * 24 + p], imgs[i].data()[p] / 255.0f, 1e-6);
  Image odd = MakeTestImage(6, 5, 1);
  views[3] = odd.view();
  Status st = StackBatch(views, {}, &batch);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("image 3"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace strata::image
