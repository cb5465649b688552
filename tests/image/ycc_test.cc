// The fused 4:2:0 / 4:2:2 path (ycc.h): its vector kernels against the scalar reference on random
// planes, and DecodeJpeg's fused output against tjDecompress2's, byte for byte, for many
// sizes, both IDCTs, baseline and progressive files, every DCT scale and the real
// TensorFlow-written JPEGs of tensorflow/models' deeplab test shard.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/image/jpeg.h"
#include "strata/image/ycc.h"
#include "strata/record/example.h"
#include "strata/record/record_reader.h"
#include "test_util.h"

namespace strata::image {
namespace {

using kernels::Isa;

std::vector<const ycc::YccKernels*> HostKernels() {
  std::vector<const ycc::YccKernels*> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (const ycc::YccKernels* k = ycc::KernelsFor(isa)) out.push_back(k);
  }
  return out;
}

// A padded row as the vector kernels want it: index -1 and cw repeat the edges.
std::vector<uint8_t> PaddedRow(std::mt19937& gen, int cw) {
  std::vector<uint8_t> row(cw + 2 + ycc::kRowPad, 0);
  for (int j = 0; j < cw; ++j) row[1 + j] = static_cast<uint8_t>(gen());
  row[0] = row[1];
  row[1 + cw] = row[cw];
  return row;
}

TEST(Ycc, FancyRowKernelsMatchScalar) {
  std::mt19937 gen(7);
  for (const ycc::YccKernels* k : HostKernels()) {
    for (int cw = 1; cw <= 130; ++cw) {
      std::vector<uint8_t> near = PaddedRow(gen, cw), far = PaddedRow(gen, cw);
      std::vector<uint8_t> want(2 * cw + 2 * ycc::kRowPad, 0xAA), got(2 * cw + 2 * ycc::kRowPad, 0x55);
      ycc::ScalarKernels().fancy_h2v2_row(near.data() + 1, far.data() + 1, cw, want.data());
      k->fancy_h2v2_row(near.data() + 1, far.data() + 1, cw, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 2 * cw)) << kernels::IsaName(k->isa) << " cw=" << cw;
      ycc::ScalarKernels().fancy_h2v1_row(near.data() + 1, cw, want.data());
      k->fancy_h2v1_row(near.data() + 1, cw, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 2 * cw)) << kernels::IsaName(k->isa) << " h2v1 cw=" << cw;
    }
  }
}

TEST(Ycc, FancyRowScalarIsTheTriangleFilter) {
  // near = 0 0 200, far = 100 0 0: sums 100 0 600.
  const uint8_t near[] = {0, 0, 200}, far[] = {100, 0, 0};
  uint8_t out[6];
  ycc::ScalarKernels().fancy_h2v2_row(near, far, 3, out);
  EXPECT_EQ(out[0], (4 * 100 + 8) >> 4);         // left edge: s[-1] = s[0]
  EXPECT_EQ(out[1], (3 * 100 + 0 + 7) >> 4);
  EXPECT_EQ(out[2], (0 + 100 + 8) >> 4);
  EXPECT_EQ(out[3], (0 + 600 + 7) >> 4);
  EXPECT_EQ(out[4], (3 * 600 + 0 + 8) >> 4);
  EXPECT_EQ(out[5], (4 * 600 + 7) >> 4);  // right edge: s[cw] = s[cw - 1]
}

TEST(Ycc, FancyH2V1ScalarIsTheTriangleFilter) {
  const uint8_t in[] = {10, 200, 30};
  uint8_t out[6];
  ycc::ScalarKernels().fancy_h2v1_row(in, 3, out);
  EXPECT_EQ(out[0], (4 * 10 + 1) >> 2);  // left edge: c[-1] = c[0]
  EXPECT_EQ(out[1], (30 + 200 + 2) >> 2);
  EXPECT_EQ(out[2], (600 + 10 + 1) >> 2);
  EXPECT_EQ(out[3], (600 + 30 + 2) >> 2);
  EXPECT_EQ(out[4], (90 + 200 + 1) >> 2);
  EXPECT_EQ(out[5], (4 * 30 + 2) >> 2);  // right edge
}

TEST(Ycc, ColourKernelsMatchScalarOnEveryTripleClass) {
  std::mt19937 gen(11);
  for (const ycc::YccKernels* k : HostKernels()) {
    for (int n = 1; n <= 200; n += (n < 40 ? 1 : 13)) {
      std::vector<uint8_t> y(n + ycc::kRowPad), cb(n + ycc::kRowPad), cr(n + ycc::kRowPad);
      for (int i = 0; i < n; ++i) {
        y[i] = static_cast<uint8_t>(gen());
        cb[i] = static_cast<uint8_t>(gen());
        cr[i] = static_cast<uint8_t>(gen());
      }
      // Extremes that clamp both ways.
      y[0] = 0, cb[0] = 0, cr[0] = 0;
      if (n > 1) y[1] = 255, cb[1] = 255, cr[1] = 255;
      std::vector<uint8_t> want(3 * n + 64, 0xAA), got(3 * n + 64, 0xAA);
      ycc::ScalarKernels().ycc_to_rgb_row(y.data(), cb.data(), cr.data(), n, want.data());
      k->ycc_to_rgb_row(y.data(), cb.data(), cr.data(), n, got.data());
      ASSERT_EQ(want, got) << kernels::IsaName(k->isa) << " n=" << n << " (writes past 3n count too)";
    }
  }
}

TEST(Ycc, ColourKernelsMatchScalarOnEveryChromaPair) {
  // All 65,536 (cb, cr) pairs in one row, for Y values at and near both clamps.
  const int n = 256 * 256;
  std::vector<uint8_t> y(n + ycc::kRowPad), cb(n + ycc::kRowPad), cr(n + ycc::kRowPad);
  for (int i = 0; i < n; ++i) {
    cb[i] = static_cast<uint8_t>(i & 255);
    cr[i] = static_cast<uint8_t>(i >> 8);
  }
  for (const ycc::YccKernels* k : HostKernels()) {
    for (int yv : {0, 1, 16, 100, 128, 200, 235, 254, 255}) {
      std::fill(y.begin(), y.begin() + n, static_cast<uint8_t>(yv));
      std::vector<uint8_t> want(3 * n), got(3 * n);
      ycc::ScalarKernels().ycc_to_rgb_row(y.data(), cb.data(), cr.data(), n, want.data());
      k->ycc_to_rgb_row(y.data(), cb.data(), cr.data(), n, got.data());
      ASSERT_EQ(want, got) << kernels::IsaName(k->isa) << " y=" << yv;
    }
  }
}

// jdcolor.c's tables, built as libjpeg-turbo builds them (FIX(), ONE_HALF, SCALEBITS 16),
// checked against the closed forms of the scalar kernel for all 256^3 inputs' classes.
TEST(Ycc, ScalarColourEqualsLibjpegTables) {
  auto fix = [](double x) { return static_cast<int32_t>(x * 65536 + 0.5); };
  for (int cb = 0; cb < 256; cb += 1) {
    for (int cr = 0; cr < 256; cr += 3) {
      for (int y : {0, 1, 37, 128, 200, 254, 255}) {
        const int xb = cb - 128, xr = cr - 128;
        const int r_add = (fix(1.40200) * xr + 32768) >> 16;
        const int b_add = (fix(1.77200) * xb + 32768) >> 16;
        const int g_add = ((-fix(0.34414)) * xb + 32768 + (-fix(0.71414)) * xr) >> 16;
        const uint8_t yy = y, cbb = cb, crr = cr;
        uint8_t rgb[3];
        ycc::ScalarKernels().ycc_to_rgb_row(&yy, &cbb, &crr, 1, rgb);
        ASSERT_EQ(rgb[0], std::clamp(y + r_add, 0, 255));
        ASSERT_EQ(rgb[1], std::clamp(y + g_add, 0, 255));
        ASSERT_EQ(rgb[2], std::clamp(y + b_add, 0, 255));
      }
    }
  }
}

// Photo-like content (gradients + texture), plus blocks of saturated colour so that
// the colour conversion clamps.
Image PhotoLike(int h, int w, uint32_t seed) {
  Image img = testing::MakeTestImage(h, w, 3, seed);
  std::mt19937 gen(seed * 31 + 1);
  uint8_t* p = img.data();
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      if (((x / 7) + (y / 5)) % 4 != 0) continue;
      uint8_t* px = p + (static_cast<size_t>(y) * w + x) * 3;
      const int pick = (x / 7 + 3 * (y / 5)) % 3;
      px[0] = pick == 0 ? 255 : 0;
      px[1] = pick == 1 ? 255 : static_cast<uint8_t>(gen() % 16);
      px[2] = pick == 2 ? 255 : 0;
    }
  }
  return img;
}

std::string Encode(const Image& img, int subsampling, bool progressive, int quality = 90) {
  std::string jpg;
  EXPECT_TRUE(EncodeJpeg(img.view(), {.quality = quality, .subsampling = subsampling, .progressive = progressive}, &jpg)
                  .ok());
  return jpg;
}

// DecodeJpeg with and without the fused path, same options otherwise.
void ExpectSameAsTjDecompress2(const std::string& jpg, JpegDecodeOptions options, const std::string& what) {
  Image fused, reference;
  options.fused_color = false;
  const Status ref = DecodeJpeg(jpg, options, &reference);
  options.fused_color = true;
  const Status st = DecodeJpeg(jpg, options, &fused);
  ASSERT_EQ(st.ToString(), ref.ToString()) << what;
  ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
  ASSERT_EQ(fused.height(), reference.height()) << what;
  ASSERT_EQ(fused.width(), reference.width()) << what;
  ASSERT_EQ(fused.channels(), reference.channels()) << what;
  const uint8_t* a = fused.data();
  const uint8_t* b = reference.data();
  for (size_t i = 0; i < reference.size_bytes(); ++i) {
    ASSERT_EQ(a[i], b[i]) << what << ": first difference at byte " << i << " (row "
                          << i / (reference.width() * 3) << ", column " << i % (reference.width() * 3) / 3 << ")";
  }
}

struct Size {
  int h, w;
};
const Size kSizes[] = {{1, 1},   {2, 3},   {3, 2},    {4, 4},     {5, 5},     {6, 5},    {5, 6},
                       {7, 9},   {15, 17}, {16, 16},  {17, 33},   {31, 7},    {64, 48},  {48, 64},
                       {129, 333}, {333, 129}, {192, 192}, {224, 224}, {331, 331}, {512, 512}};

TEST(YccDecode, FusedEqualsTjDecompress2AtEverySizeAndIdct) {
  ASSERT_NE(ycc::Kernels().isa, Isa::kScalar) << "host without AVX2: the fused path is never taken";
  uint32_t seed = 1;
  for (int samp : {420, 422}) {
    for (Size s : kSizes) {
      const std::string jpg = Encode(PhotoLike(s.h, s.w, seed++), samp, false);
      for (bool fast : {true, false}) {
        const JpegDecodeOptions options{.fast_dct = fast};
        auto hdr = ReadJpegHeader(jpg);
        ASSERT_TRUE(hdr.ok());
        EXPECT_EQ(JpegUsesFusedColor(*hdr, options), s.w > 4) << samp << " " << s.h << "x" << s.w;
        ExpectSameAsTjDecompress2(jpg, options,
                                  std::to_string(samp) + " " + std::to_string(s.h) + "x" + std::to_string(s.w) +
                                      (fast ? " IFAST" : " ISLOW"));
      }
    }
  }
}

TEST(YccDecode, FusedEqualsTjDecompress2ForProgressiveAndLowQuality) {
  uint32_t seed = 100;
  for (Size s : {Size{15, 17}, Size{64, 48}, Size{331, 331}, Size{129, 333}}) {
    for (int quality : {20, 75, 100}) {
      for (bool progressive : {false, true}) {
        const std::string jpg = Encode(PhotoLike(s.h, s.w, seed++), 420, progressive, quality);
        for (bool fast : {true, false}) {
          ExpectSameAsTjDecompress2(jpg, {.fast_dct = fast},
                                    std::to_string(s.h) + "x" + std::to_string(s.w) + " q" + std::to_string(quality) +
                                        (progressive ? " progressive" : " baseline") + (fast ? " IFAST" : " ISLOW"));
        }
      }
    }
  }
}

// Scaled decodes keep tjDecompress2 (libjpeg-turbo IDCT-scales the chroma up instead of
// upsampling it); the bytes must not depend on fused_color there either.
TEST(YccDecode, EveryDctScaleIsUnchanged) {
  const std::string jpg = Encode(PhotoLike(331, 333, 5), 420, false);
  for (int eighths : {1, 2, 4, 8}) {
    const int mh = JpegScaledDim(331, eighths), mw = JpegScaledDim(333, eighths);
    const JpegDecodeOptions options{.min_height = mh, .min_width = mw};
    ASSERT_EQ(JpegScaleEighths(331, 333, mh, mw), eighths);
    auto hdr = ReadJpegHeader(jpg);
    ASSERT_TRUE(hdr.ok());
    EXPECT_EQ(JpegUsesFusedColor(*hdr, options), eighths == 8);
    for (bool fast : {true, false}) {
      JpegDecodeOptions o = options;
      o.fast_dct = fast;
      ExpectSameAsTjDecompress2(jpg, o, "331x333 at " + std::to_string(eighths) + "/8");
    }
  }
}

TEST(YccDecode, OtherLayoutsKeepTjDecompress2) {
  const Image img = PhotoLike(40, 56, 9);
  for (int samp : {444, 422}) {
    const std::string jpg = Encode(img, samp, false);
    auto hdr = ReadJpegHeader(jpg);
    ASSERT_TRUE(hdr.ok());
    EXPECT_EQ(JpegUsesFusedColor(*hdr, {}), samp == 422) << samp;
    ExpectSameAsTjDecompress2(jpg, {}, std::to_string(samp));
  }
  const std::string jpg420 = Encode(img, 420, false);
  auto hdr = ReadJpegHeader(jpg420);
  ASSERT_TRUE(hdr.ok());
  EXPECT_FALSE(JpegUsesFusedColor(*hdr, {.channels = 1}));
  EXPECT_FALSE(JpegUsesFusedColor(*hdr, {.fast_upsample = true}));
  EXPECT_FALSE(JpegUsesFusedColor(*hdr, {.fused_color = false}));
  ExpectSameAsTjDecompress2(jpg420, {.channels = 1}, "420 to gray");
  ExpectSameAsTjDecompress2(jpg420, {.fast_upsample = true}, "420 fast upsampling");
}

// A stream cut short decodes (libjpeg fills the rest) when warnings are allowed, and is an
// error otherwise; both paths must agree on the status and on the filled-in pixels.
TEST(YccDecode, TruncatedStreamsAgree) {
  const std::string jpg = Encode(PhotoLike(96, 130, 21), 420, false);
  for (size_t keep : {jpg.size() * 3 / 5, jpg.size() - 2}) {
    const std::string cut = jpg.substr(0, keep);
    ExpectSameAsTjDecompress2(cut, {.allow_warnings = true}, "cut to " + std::to_string(keep) + " bytes");
    Image a, b;
    const Status fused = DecodeJpeg(cut, {}, &a);
    const Status plain = DecodeJpeg(cut, {.fused_color = false}, &b);
    EXPECT_FALSE(fused.ok());
    EXPECT_EQ(fused.ToString(), plain.ToString());
  }
}

// The planes decoded once, converted with every kernel table the host has (the decode
// path itself uses only the best one).
TEST(YccDecode, EveryIsaEqualsTjDecompress2OnWholeImages) {
  tjhandle tj = tjInitDecompress();
  ASSERT_NE(tj, nullptr);
  uint32_t seed = 50;
  for (int samp : {420, 422})
  for (Size s : {Size{5, 5}, Size{15, 17}, Size{129, 333}, Size{331, 331}, Size{224, 224}}) {
    const std::string jpg = Encode(PhotoLike(s.h, s.w, seed++), samp, false);
    for (bool fast : {true, false}) {
      const int flags = fast ? TJFLAG_FASTDCT : 0;
      const auto* src = reinterpret_cast<const unsigned char*>(jpg.data());
      std::vector<uint8_t> want(static_cast<size_t>(s.h) * s.w * 3);
      ASSERT_EQ(0, tjDecompress2(tj, src, jpg.size(), want.data(), s.w, s.w * 3, s.h, TJPF_RGB, flags));
      ycc::YccPlaneBuffers planes;
      ASSERT_TRUE(planes.Reset(s.h, s.w, samp == 420));
      unsigned char* dst[3] = {planes.plane(0), planes.plane(1), planes.plane(2)};
      int strides[3] = {planes.stride(0), planes.stride(1), planes.stride(2)};
      ASSERT_EQ(0, tjDecompressToYUVPlanes(tj, src, jpg.size(), dst, s.w, strides, s.h, flags));
      planes.ReplicateChromaEdges();
      for (const ycc::YccKernels* k : HostKernels()) {
        std::vector<uint8_t> got(want.size() + 1, 0x5A);
        (samp == 420 ? ycc::Ycc420ToRgb : ycc::Ycc422ToRgb)(planes.planes(), s.h, s.w, got.data(), s.w * 3, *k,
                                                            planes.scratch());
        EXPECT_EQ(got.back(), 0x5A) << "wrote past the image";
        got.pop_back();
        EXPECT_EQ(want, got) << kernels::IsaName(k->isa) << " " << samp << " " << s.h << "x" << s.w
                             << (fast ? " IFAST" : " ISLOW");
      }
    }
  }
  tjDestroy(tj);
}

// DecodeJpeg releases a thread's plane buffers after an image over 16 Mpx; the next
// decode must lay them out again.
TEST(YccDecode, PlaneBuffersWorkAfterRelease) {
  const std::string jpg = Encode(PhotoLike(21, 30, 77), 420, false);
  tjhandle tj = tjInitDecompress();
  ASSERT_NE(tj, nullptr);
  std::vector<uint8_t> want(21 * 30 * 3), got(21 * 30 * 3);
  const auto* src = reinterpret_cast<const unsigned char*>(jpg.data());
  ASSERT_EQ(0, tjDecompress2(tj, src, jpg.size(), want.data(), 30, 90, 21, TJPF_RGB, TJFLAG_FASTDCT));
  ycc::YccPlaneBuffers planes;
  ASSERT_TRUE(planes.Reset(400, 600));
  planes.Release();
  EXPECT_EQ(planes.plane(0), nullptr);
  ASSERT_TRUE(planes.Reset(21, 30));
  unsigned char* dst[3] = {planes.plane(0), planes.plane(1), planes.plane(2)};
  int strides[3] = {planes.stride(0), planes.stride(1), planes.stride(2)};
  ASSERT_EQ(0, tjDecompressToYUVPlanes(tj, src, jpg.size(), dst, 30, strides, 21, TJFLAG_FASTDCT));
  planes.ReplicateChromaEdges();
  ycc::Ycc420ToRgb(planes.planes(), 21, 30, got.data(), 90, ycc::Kernels(), planes.scratch());
  EXPECT_EQ(want, got);
  tjDestroy(tj);
}

// JPEGs TensorFlow's tooling wrote (tensorflow/models deeplab's PASCAL VOC test shard:
// 500 px wide, 333-366 px high, 4:2:0), from the repository's testdata/real.
TEST(YccDecode, RealTensorFlowJpegsAreUnchanged) {
  const std::string path =
      std::string(STRATA_TESTDATA) + "/real/tf-models_deeplab_pascal_voc_seg_val-00000-of-00001.tfrecord";
  auto reader = record::RecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  int fused = 0;
  std::string rec;
  while ((*reader)->ReadRecord(&rec).ok()) {
    auto ex = record::DecodeExample(rec);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    auto it = ex->features.find("image/encoded");
    ASSERT_NE(it, ex->features.end());
    const std::string& jpg = it->second.bytes.at(0);
    auto hdr = ReadJpegHeader(jpg);
    ASSERT_TRUE(hdr.ok());
    fused += JpegUsesFusedColor(*hdr, {}) ? 1 : 0;
    for (bool fast : {true, false}) ExpectSameAsTjDecompress2(jpg, {.fast_dct = fast}, "deeplab record " + std::to_string(fused));
  }
  EXPECT_GE(fused, 3) << "expected the shard's 4:2:0 JPEGs to take the fused path";
}

}  // namespace
}  // namespace strata::image
