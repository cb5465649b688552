// Every vector kernel table this host can run, against the scalar reference, over
// lengths that exercise full vectors and tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/image/kernels.h"

namespace strata::image::kernels {
namespace {

std::vector<const KernelTable*> VectorTables() {
  std::vector<const KernelTable*> t;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (const KernelTable* k = KernelsFor(isa)) t.push_back(k);
  return t;
}

class KernelsVsScalar : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    table_ = KernelsFor(GetParam());
    if (!table_) {
      // This host (or STRATA_MAX_ISA) lacks the ISA: the fallback that runs instead is the
      // widest table it has. Check that it is narrower, then hold it to the same tests.
      table_ = &Kernels();
      ASSERT_LT(static_cast<int>(table_->isa), static_cast<int>(GetParam()))
          << IsaName(GetParam()) << " is missing here, yet Kernels() chose " << IsaName(table_->isa);
    }
  }
  const KernelTable* table_ = nullptr;
  const KernelTable& ref_ = ScalarKernels();
  std::mt19937 gen_{42};
  std::vector<float> Floats(size_t n, float lo = 0, float hi = 255) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen_);
    return v;
  }
  std::vector<uint8_t> Bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = static_cast<uint8_t>(gen_());
    return v;
  }
};

const int kLengths[] = {1, 7, 8, 15, 16, 17, 31, 48, 100, 257};

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << what << " at " << i;
}

TEST_P(KernelsVsScalar, BlendRowsU8) {
  for (int n : kLengths)
    for (int taps : {1, 2, 3, 5}) {
      std::vector<std::vector<uint8_t>> rows;
      std::vector<const uint8_t*> ptrs;
      for (int k = 0; k < taps; ++k) rows.push_back(Bytes(n + 16));
      for (auto& r : rows) ptrs.push_back(r.data());
      auto w = Floats(taps, 0, 1);
      std::vector<float> a(n), b(n);
      table_->blend_rows_u8(ptrs.data(), w.data(), taps, n, a.data());
      ref_.blend_rows_u8(ptrs.data(), w.data(), taps, n, b.data());
      ExpectNear(a, b, 1e-3, "blend n=" + std::to_string(n));
    }
}

TEST_P(KernelsVsScalar, GatherTapsAndGather) {
  for (int n : kLengths)
    for (int taps : {2, 4}) {
      const int stride = 3;
      auto in = Floats(400);
      std::vector<int32_t> first(n);
      for (int j = 0; j < n; ++j) first[j] = static_cast<int32_t>(gen_() % (400 - (taps - 1) * stride));
      auto w = Floats(static_cast<size_t>(taps) * n, -1, 1);
      std::vector<float> a(n), b(n);
      table_->gather_taps(in.data(), first.data(), w.data(), taps, stride, n, a.data());
      ref_.gather_taps(in.data(), first.data(), w.data(), taps, stride, n, b.data());
      ExpectNear(a, b, 1e-3, "gather_taps");
      table_->gather(in.data(), first.data(), n, a.data());
      ref_.gather(in.data(), first.data(), n, b.data());
      ExpectNear(a, b, 0, "gather");
    }
}

// Resize-shaped tables: neighbouring outputs read neighbouring inputs, so at ratios up to
// ~2 a block's taps fit one 32-float window (the AVX-512 permute path) and past that they
// do not (the hardware gather); flipped tables read backwards. `in` ends at the last
// float a tap reads, so a window that loaded past it would read outside the vector.
TEST_P(KernelsVsScalar, GatherTapsOnResizeTables) {
  const int c = 3;
  for (double ratio : {0.5, 1.0, 4.0 / 3, 2.0, 2.7})
    for (bool flip : {false, true})
      for (int taps : {1, 2, 3})
        for (int out_px : {5, 16, 67}) {
          const int in_px = static_cast<int>(out_px * ratio) + taps;
          const int64_t n = static_cast<int64_t>(out_px) * c;
          auto in = Floats(static_cast<size_t>(in_px) * c);
          std::vector<int32_t> first(n);
          for (int x = 0; x < out_px; ++x) {
            const int src = std::min(static_cast<int>(x * ratio), in_px - taps);
            const int dst = flip ? out_px - 1 - x : x;
            for (int k = 0; k < c; ++k) first[dst * c + k] = src * c + k;
          }
          auto w = Floats(static_cast<size_t>(taps) * n, -1, 1);
          std::vector<float> a(n), b(n);
          table_->gather_taps(in.data(), first.data(), w.data(), taps, c, n, a.data());
          ref_.gather_taps(in.data(), first.data(), w.data(), taps, c, n, b.data());
          ExpectNear(a, b, 1e-4, "gather_taps ratio " + std::to_string(ratio) + (flip ? " flipped" : "") +
                                     " taps " + std::to_string(taps) + " out " + std::to_string(out_px));
        }
}

TEST_P(KernelsVsScalar, AffineFamilyAndSums) {
  for (int c = 1; c <= 4; ++c)
    for (int px : kLengths) {
      const int n = px * c;
      const float scale[4] = {0.5f, -2.0f, 1.0f / 255, 3.0f}, bias[4] = {1, -3, 0.25f, 100};
      auto x = Floats(n);
      auto a = x, b = x;
      table_->affine_f32(a.data(), px, c, scale, bias);
      ref_.affine_f32(b.data(), px, c, scale, bias);
      ExpectNear(a, b, 1e-3, "affine_f32 c=" + std::to_string(c));

      std::vector<uint16_t> ha(n), hb(n);
      table_->affine_f32_to_bf16(x.data(), px, c, scale, bias, ha.data());
      ref_.affine_f32_to_bf16(x.data(), px, c, scale, bias, hb.data());
      for (int i = 0; i < n; ++i)  // FMA vs mul+add may straddle a bf16 rounding boundary: 1 ulp
        ASSERT_LE(std::abs(int(ha[i]) - int(hb[i])), 1) << "bf16 at " << i;

      auto u = Bytes(n);
      std::vector<float> fa(n), fb(n);
      table_->affine_u8_to_f32(u.data(), px, c, scale, bias, fa.data());
      ref_.affine_u8_to_f32(u.data(), px, c, scale, bias, fb.data());
      ExpectNear(fa, fb, 1e-3, "affine_u8_to_f32");
      table_->affine_u8_to_bf16(u.data(), px, c, scale, bias, ha.data());
      ref_.affine_u8_to_bf16(u.data(), px, c, scale, bias, hb.data());
      for (int i = 0; i < n; ++i) ASSERT_LE(std::abs(int(ha[i]) - int(hb[i])), 1);

      double sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
      table_->channel_sums(x.data(), px, c, sa);
      ref_.channel_sums(x.data(), px, c, sb);
      for (int k = 0; k < c; ++k) ASSERT_NEAR(sa[k], sb[k], 1e-2 + 1e-6 * std::abs(sb[k]));
    }
}

TEST_P(KernelsVsScalar, F32ToU8RoundsHalfEvenAndSaturates) {
  std::vector<float> in = {-5, -0.5f, 0.49f, 0.5f, 1.5f, 2.5f, 254.5f, 255.4f, 300, 127.5f, 3.7f, 0, 1, 2, 3, 4, 5};
  for (int i = 0; i < 40; ++i) in.push_back(static_cast<float>(gen_() % 600) / 2 - 20);
  std::vector<uint8_t> a(in.size()), b(in.size());
  table_->f32_to_u8(in.data(), in.size(), a.data());
  ref_.f32_to_u8(in.data(), in.size(), b.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[3], 0);    // 0.5 -> 0 (ties to even)
  EXPECT_EQ(b[4], 2);    // 1.5 -> 2
  EXPECT_EQ(b[5], 2);    // 2.5 -> 2
  EXPECT_EQ(b[8], 255);
}

TEST_P(KernelsVsScalar, SaturationAndHueMatchTheHsvRoundTrip) {
  for (int px : kLengths) {
    auto x = Floats(px * 3);
    // Include grays, pure colours and ties between channels.
    if (px >= 4) {
      x[0] = x[1] = x[2] = 77;
      x[3] = 255, x[4] = 0, x[5] = 0;
      x[6] = 10, x[7] = 10, x[8] = 200;
      x[9] = 0, x[10] = 0, x[11] = 0;
    }
    for (float f : {0.0f, 0.3f, 1.0f, 1.7f, 2.0f, 8.0f}) {
      auto a = x, b = x;
      table_->saturation_rgb(a.data(), px, f);
      ref_.saturation_rgb(b.data(), px, f);
      ExpectNear(a, b, 2e-3, "saturation f=" + std::to_string(f));
    }
    for (float d : {-0.5f, -0.1f, 0.0f, 0.25f, 1.0f / 3, 0.9f}) {
      auto a = x, b = x;
      table_->hue_rgb(a.data(), px, d);
      ref_.hue_rgb(b.data(), px, d);
      ExpectNear(a, b, 5e-3, "hue d=" + std::to_string(d));
    }
  }
}

TEST_P(KernelsVsScalar, AffineSampleRowIsBitExact) {
  const int h = 9, w = 23;
  for (int c = 1; c <= 4; ++c) {
    auto src = Floats(h * w * c);
    const float fill[4] = {1, 2, 3, 4};
    for (float angle : {0.0f, 0.3f, 1.0f, 2.5f, -0.7f})
      for (int n : {5, 16, 23, 40}) {
        const float dy = std::sin(angle), dx = std::cos(angle);
        std::vector<float> a(n * c), b(n * c);
        table_->affine_sample_row(src.data(), h, w, c, 3.3f, -2.2f, dy, dx, n, fill, a.data());
        ref_.affine_sample_row(src.data(), h, w, c, 3.3f, -2.2f, dy, dx, n, fill, b.data());
        ExpectNear(a, b, 1e-3, "sample c=" + std::to_string(c));
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, KernelsVsScalar, ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

TEST(Kernels, DispatchPicksTheWidestSupported) {
  const KernelTable& k = Kernels();
  if (KernelsFor(Isa::kAvx512)) EXPECT_EQ(k.isa, Isa::kAvx512);
  else if (KernelsFor(Isa::kAvx2)) EXPECT_EQ(k.isa, Isa::kAvx2);
  else EXPECT_EQ(k.isa, Isa::kScalar);
  EXPECT_FALSE(VectorTables().empty() && k.isa != Isa::kScalar);
}

}  // namespace
}  // namespace strata::image::kernels
