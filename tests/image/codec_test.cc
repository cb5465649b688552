// JPEG and PNG decode/encode: goldens from Pillow, every PNG colour type and depth, DCT
// scaling, and the errors corrupt, truncated and oversized inputs must produce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "strata/image/decode.h"
#include "strata/image/jpeg.h"
#include "strata/image/png.h"
#include "test_util.h"

namespace strata::image {
namespace {

using testing::MakeTestImage;
using testing::Psnr;
using testing::ReadRaw;
using testing::ReadTestFile;

// Pillow decodes with libjpeg's accurate integer IDCT, TensorFlow's INTEGER_ACCURATE.
TEST(Jpeg, AccurateDecodeMatchesPillowExactly) {
  const std::string jpg = ReadTestFile("photo_64x48.jpg");
  ASSERT_FALSE(jpg.empty());
  Image img;
  ASSERT_TRUE(DecodeJpeg(jpg, {.fast_dct = false}, &img).ok());
  EXPECT_EQ(img.height(), 48);
  EXPECT_EQ(img.width(), 64);
  EXPECT_EQ(img.channels(), 3);
  const auto golden = ReadRaw<uint8_t>("photo_64x48.rgb");
  ASSERT_EQ(golden.size(), img.size_bytes());
  EXPECT_EQ(0, std::memcmp(golden.data(), img.data(), golden.size()));
}

TEST(Jpeg, HalfScaleDecodeMatchesPillowDraft) {
  const std::string jpg = ReadTestFile("photo_64x48.jpg");
  Image img;
  ASSERT_TRUE(DecodeJpeg(jpg, {.min_height = 20, .min_width = 30, .fast_dct = false}, &img).ok());
  ASSERT_EQ(img.height(), 24);
  ASSERT_EQ(img.width(), 32);
  const auto golden = ReadRaw<uint8_t>("photo_32x24.rgb");
  ASSERT_EQ(golden.size(), img.size_bytes());
  EXPECT_EQ(0, std::memcmp(golden.data(), img.data(), golden.size()));
}

// The default is TensorFlow's: decode_jpeg's dct_method '' means INTEGER_FAST (JDCT_IFAST).
// It is a different IDCT, so pixels differ from the accurate one, but only by IFAST's
// rounding: a few levels at most, and the picture (PSNR) is the same.
TEST(Jpeg, DefaultIsTensorFlowsFastIdctAndStaysCloseToAccurate) {
  const std::string jpg = ReadTestFile("photo_64x48.jpg");
  Image fast, accurate;
  ASSERT_TRUE(DecodeJpeg(jpg, {}, &fast).ok());
  ASSERT_TRUE(DecodeJpeg(jpg, {.fast_dct = false}, &accurate).ok());
  ASSERT_EQ(fast.size_bytes(), accurate.size_bytes());
  EXPECT_NE(0, std::memcmp(fast.data(), accurate.data(), fast.size_bytes())) << "the default is not INTEGER_FAST";
  int max_diff = 0;
  for (size_t i = 0; i < fast.size_bytes(); ++i) max_diff = std::max(max_diff, std::abs(fast.data()[i] - accurate.data()[i]));
  EXPECT_LE(max_diff, 8);
  EXPECT_GT(Psnr(fast.data(), accurate.data(), fast.size_bytes()), 40.0);
}

TEST(Jpeg, PicksSmallestScaleStillAtLeastTarget) {
  EXPECT_EQ(JpegScaleEighths(512, 512, 0, 0), 8);
  EXPECT_EQ(JpegScaleEighths(512, 512, 192, 192), 4);   // 256 >= 192, 128 < 192
  EXPECT_EQ(JpegScaleEighths(512, 512, 128, 128), 2);   // exactly 128
  EXPECT_EQ(JpegScaleEighths(512, 512, 129, 100), 4);
  EXPECT_EQ(JpegScaleEighths(512, 512, 64, 64), 1);
  EXPECT_EQ(JpegScaleEighths(512, 512, 300, 10), 8);    // only full size is tall enough
  EXPECT_EQ(JpegScaleEighths(331, 331, 42, 42), 1);     // ceil(331/8) = 42
  EXPECT_EQ(JpegScaleEighths(331, 331, 43, 43), 2);
  EXPECT_EQ(JpegScaledDim(331, 1), 42);
}

TEST(Jpeg, EncodeDecodeRoundTripAndDctScaledSizes) {
  Image src = MakeTestImage(200, 152, 3);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(src.view(), {.quality = 95, .subsampling = 444}, &jpg).ok());
  auto hdr = ReadJpegHeader(jpg);
  ASSERT_TRUE(hdr.ok());
  EXPECT_EQ(hdr->height, 200);
  EXPECT_EQ(hdr->width, 152);
  Image out;
  ASSERT_TRUE(DecodeJpeg(jpg, {}, &out).ok());
  EXPECT_GT(Psnr(src.data(), out.data(), src.size_bytes()), 30.0);
  for (auto [min, h, w] : {std::tuple{100, 100, 76}, {50, 50, 38}, {25, 25, 19}, {26, 50, 38}}) {
    ASSERT_TRUE(DecodeJpeg(jpg, {.min_height = min, .min_width = 1}, &out).ok());
    EXPECT_EQ(out.height(), h) << min;
    EXPECT_EQ(out.width(), w) << min;
  }
}

TEST(Jpeg, GrayEncodeAndChannelsRequested) {
  Image src = MakeTestImage(33, 47, 1);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(src.view(), {.quality = 100}, &jpg).ok());
  Image out;
  ASSERT_TRUE(DecodeJpeg(jpg, {.channels = 0}, &out).ok());
  EXPECT_EQ(out.channels(), 1);
  EXPECT_GT(Psnr(src.data(), out.data(), src.size_bytes()), 35.0);
  ASSERT_TRUE(DecodeJpeg(jpg, {.channels = 3}, &out).ok());
  EXPECT_EQ(out.channels(), 3);
  EXPECT_FALSE(DecodeJpeg(jpg, {.channels = 2}, &out).ok());
}

TEST(Jpeg, EncodeFromStridedCropView) {
  Image src = MakeTestImage(64, 64, 3);
  auto crop = src.view().Crop(8, 16, 32, 24);
  ASSERT_TRUE(crop.ok());
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(*crop, {.quality = 100, .subsampling = 444}, &jpg).ok());
  Image out;
  ASSERT_TRUE(DecodeJpeg(jpg, {}, &out).ok());
  ASSERT_EQ(out.height(), 32);
  ASSERT_EQ(out.width(), 24);
  Image dense;
  CopyToImage(*crop, &dense);
  EXPECT_GT(Psnr(dense.data(), out.data(), dense.size_bytes()), 35.0);
}

TEST(Jpeg, TruncatedIsAnErrorNotACrash) {
  Image out;
  Status st = DecodeJpeg(ReadTestFile("truncated.jpg"), {}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
  EXPECT_NE(st.message().find("JPEG"), std::string::npos);
}

// Every damaged file gives a named error or an image of the size its header declares: a cut
// file is Truncated (no EOI marker), a flipped byte is one of the codes a damaged file can give
// (never Internal), and a flip that libjpeg decodes past (entropy-coded data: wrong pixels, the
// same size) gives the original 48x64x3 unless it lay in the frame header (SOF), which declares
// the size. ASan/UBSan builds also turn any memory error here into a failure.
TEST(Jpeg, EveryTruncationAndByteFlipIsHandled) {
  const std::string jpg = ReadTestFile("photo_64x48.jpg");
  Image out;
  for (size_t n = 0; n < jpg.size(); n += 7) {
    Status st = DecodeJpeg(jpg.substr(0, n), {}, &out);
    ASSERT_EQ(st.code(), StatusCode::kTruncated) << "cut to " << n << " bytes: " << st.ToString();
    ASSERT_EQ(st.message().rfind("JPEG", 0), 0u) << st.ToString();
  }
  // The frame header: FF C0..C2 (baseline, extended, progressive), its length after the marker.
  size_t sof = std::string::npos;
  for (size_t i = 0; i + 3 < jpg.size() && sof == std::string::npos; ++i)
    if (static_cast<uint8_t>(jpg[i]) == 0xFF && (static_cast<uint8_t>(jpg[i + 1]) & 0xFC) == 0xC0 &&
        static_cast<uint8_t>(jpg[i + 1]) != 0xC3)
      sof = i;
  ASSERT_NE(sof, std::string::npos) << "no frame header in the test photo";
  const size_t sof_end = sof + 2 + (static_cast<size_t>(static_cast<uint8_t>(jpg[sof + 2])) << 8 | static_cast<uint8_t>(jpg[sof + 3]));
  int decoded = 0, refused = 0;
  for (size_t i = 0; i < jpg.size(); i += 3) {
    std::string bad = jpg;
    bad[i] ^= 0x5A;
    Status st = DecodeJpeg(bad, {}, &out);
    if (!st.ok()) {
      ++refused;
      const StatusCode c = st.code();
      ASSERT_TRUE(c == StatusCode::kTruncated || c == StatusCode::kCorruption || c == StatusCode::kUnimplemented ||
                  c == StatusCode::kInvalidArgument)
          << "byte " << i << " flipped: " << st.ToString();
      ASSERT_EQ(st.message().rfind("JPEG", 0), 0u) << st.ToString();
      continue;
    }
    ++decoded;
    if (i < sof || i >= sof_end) {
      ASSERT_EQ(out.height(), 48) << "byte " << i << " flipped";
      ASSERT_EQ(out.width(), 64) << "byte " << i << " flipped";
      ASSERT_EQ(out.channels(), 3) << "byte " << i << " flipped";
    } else {
      auto hdr = ReadJpegHeader(bad);
      ASSERT_TRUE(hdr.ok()) << hdr.status().ToString();
      ASSERT_EQ(out.height(), hdr->height) << "byte " << i << " flipped";
      ASSERT_EQ(out.width(), hdr->width) << "byte " << i << " flipped";
    }
  }
  std::printf("[ damage   ] %zu bytes: %d flips decoded (to the declared size), %d refused with a named error\n", jpg.size(),
              decoded, refused);
  EXPECT_GT(refused, 0);
}

TEST(Jpeg, RefusesOversizedImageBeforeAllocating) {
  Image src = MakeTestImage(64, 64, 3);
  std::string jpg;
  ASSERT_TRUE(EncodeJpeg(src.view(), {}, &jpg).ok());
  Image out;
  Status st = DecodeJpeg(jpg, {.max_pixels = 1000}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("64x64"), std::string::npos) << st.ToString();
  EXPECT_EQ(out.capacity(), 0u);
}

TEST(Jpeg, EncoderRejectsBadArguments) {
  Image src = MakeTestImage(8, 8, 4);
  std::string jpg;
  EXPECT_EQ(EncodeJpeg(src.view(), {}, &jpg).code(), StatusCode::kInvalidArgument);
  Image rgb = MakeTestImage(8, 8, 3);
  EXPECT_EQ(EncodeJpeg(rgb.view(), {.quality = 0}, &jpg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeJpeg(rgb.view(), {.subsampling = 411}, &jpg).code(), StatusCode::kInvalidArgument);
}

// The PNG test files follow formulas (make_testdata.py): recompute them here.
uint8_t V8(int y, int x, int c) { return static_cast<uint8_t>((x * 37 + y * 11 + c * 71) % 256); }
constexpr int kW = 13, kH = 7;
const uint8_t kPalette[7][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 20, 30},
                                {200, 100, 50}, {0, 0, 0}, {255, 255, 255}};
uint8_t Luma(int r, int g, int b) { return static_cast<uint8_t>((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16); }

// The expected RGBA of pixel (y, x) of each file.
void ExpectedRgba(const std::string& file, int y, int x, uint8_t rgba[4]) {
  int ct = file[6] - '0';
  if (file.rfind("png_ct0_", 0) == 0 && file != "png_ct0_8.png" && file != "png_ct0_16.png") {
    const int depth = std::atoi(file.c_str() + 8);
    const int v = (x + y) % (1 << depth);
    const uint8_t g = static_cast<uint8_t>(v * 255 / ((1 << depth) - 1));
    rgba[0] = rgba[1] = rgba[2] = g, rgba[3] = 255;
    return;
  }
  switch (ct) {
    case 0: rgba[0] = rgba[1] = rgba[2] = V8(y, x, 0), rgba[3] = 255; break;
    case 2: rgba[0] = V8(y, x, 0), rgba[1] = V8(y, x, 1), rgba[2] = V8(y, x, 2), rgba[3] = 255; break;
    case 4: rgba[0] = rgba[1] = rgba[2] = V8(y, x, 0), rgba[3] = V8(y, x, 1); break;
    case 6: for (int c = 0; c < 4; ++c) rgba[c] = V8(y, x, c); break;
    case 3: {
      const int i = (x + 2 * y) % 7;
      for (int c = 0; c < 3; ++c) rgba[c] = kPalette[i][c];
      rgba[3] = file.find("trns") != std::string::npos ? static_cast<uint8_t>(i * 36) : 255;
      break;
    }
  }
}

class PngFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(PngFiles, DecodesToEveryChannelCount) {
  const std::string file = GetParam();
  const std::string bytes = ReadTestFile(file);
  ASSERT_FALSE(bytes.empty()) << file;
  auto hdr = ReadPngHeader(bytes);
  ASSERT_TRUE(hdr.ok()) << hdr.status().ToString();
  EXPECT_EQ(hdr->height, kH);
  EXPECT_EQ(hdr->width, kW);
  for (int channels = 1; channels <= 4; ++channels) {
    Image img;
    Status st = DecodePng(bytes, {.channels = channels}, &img);
    ASSERT_TRUE(st.ok()) << file << ": " << st.ToString();
    ASSERT_EQ(img.channels(), channels);
    for (int y = 0; y < kH; ++y)
      for (int x = 0; x < kW; ++x) {
        uint8_t e[4] = {0, 0, 0, 0};
        ExpectedRgba(file, y, x, e);
        const uint8_t* p = img.data() + (y * kW + x) * channels;
        const bool gray_src = e[0] == e[1] && e[1] == e[2] && file[6] != '2' && file[6] != '6' && file[6] != '3';
        const uint8_t gray = gray_src ? e[0] : Luma(e[0], e[1], e[2]);
        switch (channels) {
          case 1: ASSERT_EQ(p[0], gray) << file << " y=" << y << " x=" << x; break;
          case 2: ASSERT_EQ(p[0], gray) << file; ASSERT_EQ(p[1], e[3]) << file; break;
          case 3: for (int c = 0; c < 3; ++c) ASSERT_EQ(p[c], e[c]) << file << " c=" << c; break;
          case 4: for (int c = 0; c < 4; ++c) ASSERT_EQ(p[c], e[c]) << file << " c=" << c; break;
        }
      }
  }
  Image stored;
  ASSERT_TRUE(DecodePng(bytes, {.channels = 0}, &stored).ok());
  EXPECT_EQ(stored.channels(), hdr->channels);
}

INSTANTIATE_TEST_SUITE_P(AllColourTypes, PngFiles,
                         ::testing::Values("png_ct0_1.png", "png_ct0_2.png", "png_ct0_4.png", "png_ct0_8.png",
                                           "png_ct0_16.png", "png_ct2_8.png", "png_ct2_16.png", "png_ct3_8.png",
                                           "png_ct3_8_trns.png", "png_ct4_8.png", "png_ct4_16.png", "png_ct6_8.png",
                                           "png_ct6_16.png"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, n.size() - 4);
                         });

TEST(Png, StoredChannelsOfPaletteFollowTrns) {
  EXPECT_EQ(ReadPngHeader(ReadTestFile("png_ct3_8.png"))->channels, 3);
  EXPECT_EQ(ReadPngHeader(ReadTestFile("png_ct3_8_trns.png"))->channels, 4);
  EXPECT_EQ(ReadPngHeader(ReadTestFile("png_ct4_16.png"))->bit_depth, 16);
}

TEST(Png, EncodeDecodeIsLosslessForEveryChannelCount) {
  for (int c = 1; c <= 4; ++c) {
    Image src = MakeTestImage(28, 28, c, c);
    std::string png;
    ASSERT_TRUE(EncodePng(src.view(), {}, &png).ok());
    Image out;
    ASSERT_TRUE(DecodePng(png, {.channels = 0}, &out).ok());
    ASSERT_EQ(out.channels(), c);
    EXPECT_EQ(0, std::memcmp(src.data(), out.data(), src.size_bytes())) << c;
    // A strided crop encodes row by row.
    auto crop = src.view().Crop(3, 5, 10, 11);
    ASSERT_TRUE(EncodePng(*crop, {.compression_level = 9}, &png).ok());
    ASSERT_TRUE(DecodePng(png, {.channels = 0}, &out).ok());
    Image dense;
    CopyToImage(*crop, &dense);
    EXPECT_EQ(0, std::memcmp(dense.data(), out.data(), dense.size_bytes())) << c;
  }
}

TEST(Png, BadCrcIsCorruption) {
  Image out;
  Status st = DecodePng(ReadTestFile("bad_crc.png"), {}, &out);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("PNG"), std::string::npos);
}

TEST(Png, TruncationsAreErrors) {
  const std::string png = ReadTestFile("png_ct6_16.png");
  Image out;
  for (size_t n = 0; n + 1 < png.size(); ++n) {
    Status st = DecodePng(png.substr(0, n), {}, &out);
    EXPECT_FALSE(st.ok()) << "prefix of " << n << " bytes decoded";
  }
}

TEST(Png, RefusesOversizedImage) {
  Image out;
  Status st = DecodePng(ReadTestFile("png_ct2_8.png"), {.max_pixels = 50}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("7x13"), std::string::npos) << st.ToString();
}

TEST(Decode, SniffsFormatAndNamesUnknownBytes) {
  EXPECT_EQ(SniffFormat(ReadTestFile("photo_64x48.jpg")), ImageFormat::kJpeg);
  EXPECT_EQ(SniffFormat(ReadTestFile("png_ct2_8.png")), ImageFormat::kPng);
  Image out;
  Status st = DecodeImage("GIF89a....", {}, &out);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("474946"), std::string::npos) << st.ToString();
  EXPECT_EQ(DecodeImage("", {}, &out).code(), StatusCode::kUnimplemented);
  auto info = ReadImageInfo(ReadTestFile("png_ct3_8_trns.png"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->channels, 4);
  ASSERT_TRUE(DecodeImage(ReadTestFile("png_ct2_8.png"), {.channels = 3}, &out).ok());
  EXPECT_EQ(out.height(), kH);
}

TEST(Decode, ErrorsTakeTheRecordName) {
  Image out;
  Status st = DecodeImage(ReadTestFile("truncated.jpg"), {}, &out).WithContext("train-00.tfrec record 17");
  EXPECT_NE(st.ToString().find("train-00.tfrec record 17"), std::string::npos) << st.ToString();
}

TEST(Image, ReusesItsBuffer) {
  Image img;
  uint8_t* p = img.Reset(100, 100, 3);
  EXPECT_EQ(img.Reset(50, 50, 3), p);
  EXPECT_EQ(img.Reset(100, 100, 3), p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
}

TEST(Image, CropOutsideIsAnError) {
  Image img = MakeTestImage(10, 10, 3);
  EXPECT_FALSE(img.view().Crop(5, 5, 6, 2).ok());
  EXPECT_FALSE(img.view().Crop(-1, 0, 2, 2).ok());
  auto c = img.view().Crop(2, 3, 4, 5);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->row(0), img.data() + (2 * 10 + 3) * 3);
}

// libjpeg-turbo 2.1 keeps a progressive encode's scan script in the compressor handle;
// the thread's next baseline encode wrote a stream that failed with "bad Huffman code".
TEST(Jpeg, BaselineEncodeAfterProgressiveEncodeDecodes) {
  const Image img = MakeTestImage(15, 17, 3, 4);
  std::string progressive, baseline;
  ASSERT_TRUE(EncodeJpeg(img.view(), {.quality = 20, .progressive = true}, &progressive).ok());
  ASSERT_TRUE(EncodeJpeg(img.view(), {.quality = 75}, &baseline).ok());
  Image out;
  const Status st = DecodeJpeg(baseline, {}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace strata::image
