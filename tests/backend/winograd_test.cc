// Strata's Winograd F(4x4, 3x3) (backend/cpu/winograd.h): the AVX2 path and the scalar
// reference against a naive direct convolution accumulated in double, forward (with bias
// and ReLU) and backward-data, on the reference CNN's and ResNet-style 3x3 layers, both
// paddings, and sizes that are not multiples of the 4x4 output tile.
//
// Tolerance, relative to the RMS of the f64 result, per output tensor: the RMS of the error
// <= 1e-5 and its largest element <= 2e-4. Why: F(4x4, 3x3) amplifies f32 rounding through
// its transforms (constants up to 8 in A^T, 5 in B^T, 1/24 in G), more so as the channel
// count (the length of the sums) grows. Measured here (both paths, printed by every check):
// RMS error 1.7e-6 and largest 3.9e-5 at most on the reference CNN's layers, 3.5e-6 and 8.1e-5
// at 512 channels; f32 direct convolution is ~10x tighter (docs/engine.md: oneDNN's own
// Winograd reads ~6.6e-6 of the RMS at worst). The bounds leave ~2.5-3x margin; a broken
// kernel (a wrong tap, transform constant, padding or channel block) is off by ~1e-1 to
// 1 x RMS. AVX2 and scalar round differently (FMA, order of sums), so both are held to the
// f64 result rather than to each other bit for bit.
#include "strata/backend/cpu/winograd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "strata/core/cpu.h"

namespace strata::backend::cpu::winograd {
namespace {

constexpr double kMaxTolerance = 2e-4, kRmsTolerance = 1e-5;  // x RMS of the reference (file comment)

struct Case {
  int64_t n, h, w, cin, cout;
  int pad;  // 1: same, 0: valid
};

std::string Name(const Case& c) {
  char b[96];
  std::snprintf(b, sizeof b, "N%ld %ldx%ld %ld->%ld pad %d", static_cast<long>(c.n), static_cast<long>(c.h),
                static_cast<long>(c.w), static_cast<long>(c.cin), static_cast<long>(c.cout), c.pad);
  return b;
}

Geometry Geo(const Case& c) {
  Geometry g;
  g.batch = c.n;
  g.in_channels = c.cin;
  g.out_channels = c.cout;
  g.in_h = c.h;
  g.in_w = c.w;
  g.out_h = c.h + 2 * c.pad - 2;
  g.out_w = c.w + 2 * c.pad - 2;
  g.pad_top = g.pad_left = c.pad;
  return g;
}

std::vector<float> Random(int64_t count, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(count);
  for (float& f : v) f = u(rng);
  return v;
}

// [N, H, W, C] <-> oneDNN nChw8c [N, C/8, H, W, 8]: the blocked index of plain element (i, y, z, k).
int64_t BlockedIndex(int64_t i, int64_t y, int64_t z, int64_t k, int64_t h, int64_t w, int64_t c) {
  return (((i * (c / 8) + k / 8) * h + y) * w + z) * 8 + k % 8;
}
// Calls f(plain index, blocked index) for every element.
template <class F>
void ForEachBlocked(int64_t n, int64_t h, int64_t w, int64_t c, const F& f) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t z = 0; z < w; ++z)
        for (int64_t k = 0; k < c; ++k) f(((i * h + y) * w + z) * c + k, BlockedIndex(i, y, z, k, h, w, c));
}
std::vector<float> ToBlocked(const std::vector<float>& x, int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<float> b(x.size());
  ForEachBlocked(n, h, w, c, [&](int64_t plain, int64_t blocked) { b[blocked] = x[plain]; });
  return b;
}
std::vector<double> FromBlocked(const std::vector<float>& b, int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<double> x(b.size());
  ForEachBlocked(n, h, w, c, [&](int64_t plain, int64_t blocked) { x[plain] = b[blocked]; });
  return x;
}

// y[n, oy, ox, o] = bias[o] + sum x[n, oy - pad + a, ox - pad + b, i] w[a, b, i, o] (NHWC, HWIO), f64.
std::vector<double> DirectForward(const Case& c, const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>* bias, bool relu) {
  const Geometry g = Geo(c);
  std::vector<double> y(c.n * g.out_h * g.out_w * c.cout);
  std::vector<double> acc(c.cout);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t oy = 0; oy < g.out_h; ++oy)
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        for (int64_t o = 0; o < c.cout; ++o) acc[o] = bias ? (*bias)[o] : 0.0;
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) {
            const int64_t iy = oy - c.pad + a, ix = ox - c.pad + b;
            if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
            const float* xp = &x[((n * c.h + iy) * c.w + ix) * c.cin];
            const float* wp = &w[(a * 3 + b) * c.cin * c.cout];
            double* a = acc.data();  // raw pointers: this loop is most of the test's time under ASan
            for (int64_t i = 0; i < c.cin; ++i) {
              const double xi = xp[i];
              const float* wr = wp + i * c.cout;
              for (int64_t o = 0; o < c.cout; ++o) a[o] += xi * wr[o];
            }
          }
        double* yp = &y[((n * g.out_h + oy) * g.out_w + ox) * c.cout];
        for (int64_t o = 0; o < c.cout; ++o) yp[o] = relu ? std::max(acc[o], 0.0) : acc[o];
      }
  return y;
}

// dx[n, iy, ix, i] = sum over (oy, ox, a, b) with oy - pad + a = iy of dy[n, oy, ox, o] w[a, b, i, o]: the
// transpose of DirectForward, f64.
std::vector<double> DirectBackwardData(const Case& c, const std::vector<float>& dy, const std::vector<float>& w) {
  const Geometry g = Geo(c);
  std::vector<double> dx(c.n * c.h * c.w * c.cin, 0.0);
  std::vector<float> wt(w.size());  // [a, b, o, i]: the inner loop runs over contiguous i
  for (int t = 0; t < 9; ++t)
    for (int64_t i = 0; i < c.cin; ++i)
      for (int64_t o = 0; o < c.cout; ++o) wt[(t * c.cout + o) * c.cin + i] = w[(t * c.cin + i) * c.cout + o];
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t oy = 0; oy < g.out_h; ++oy)
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const float* dp = &dy[((n * g.out_h + oy) * g.out_w + ox) * c.cout];
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) {
            const int64_t iy = oy - c.pad + a, ix = ox - c.pad + b;
            if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
            double* xp = &dx[((n * c.h + iy) * c.w + ix) * c.cin];
            const float* wp = &wt[(a * 3 + b) * c.cout * c.cin];
            for (int64_t o = 0; o < c.cout; ++o) {
              const double d = dp[o];
              const float* wr = wp + o * c.cin;
              for (int64_t i = 0; i < c.cin; ++i) xp[i] += d * wr[i];
            }
          }
      }
  return dx;
}

// Errors relative to RMS(want): the largest and the RMS of got - want.
struct Error {
  double max = 0, rms = 0;
};
Error RelError(const std::vector<double>& got, const std::vector<double>& want) {
  double sq = 0, esq = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    sq += want[i] * want[i];
    esq += (got[i] - want[i]) * (got[i] - want[i]);
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  const double rms = std::sqrt(sq / static_cast<double>(want.size()));
  const double erms = std::sqrt(esq / static_cast<double>(want.size()));
  if (!(rms > 0)) return {worst, erms};
  return {worst / rms, erms / rms};
}

// Runs `pass` with the given path and returns the result in NHWC f64.
std::vector<double> RunWinograd(const Case& c, Pass pass, Isa isa, const std::vector<float>& src_nhwc,
                                const std::vector<float>& w, const std::vector<float>* bias, bool relu,
                                Isa* ran_on = nullptr) {
  const Geometry g = Geo(c);
  const bool fwd = pass == Pass::kForward;
  const int64_t sh = fwd ? c.h : g.out_h, sw = fwd ? c.w : g.out_w, sc = fwd ? c.cin : c.cout;
  const int64_t dh = fwd ? g.out_h : c.h, dw = fwd ? g.out_w : c.w, dc = fwd ? c.cout : c.cin;
  Conv3x3 conv(g, pass, isa, relu);
  if (ran_on != nullptr) *ran_on = conv.isa();
  const std::vector<float> src = ToBlocked(src_nhwc, c.n, sh, sw, sc);
  std::vector<float> dst(c.n * dh * dw * dc, std::nanf(""));
  std::vector<char> scratch(conv.scratch_bytes() + 4);
  // Unaligned scratch, filled with NaN bytes: Run() must align it and overwrite what it reads.
  std::fill(scratch.begin(), scratch.end(), static_cast<char>(0xff));
  conv.Run(src.data(), w.data(), bias ? bias->data() : nullptr, dst.data(), scratch.data() + 4);
  return FromBlocked(dst, c.n, dh, dw, dc);
}

// AVX2 where the host has it (else the fallback must be the scalar path, said so), and the
// scalar reference, both against the f64 direct convolution.
void Check(const Case& c, bool bias_relu = false) {
  SCOPED_TRACE(Name(c));
  ASSERT_TRUE(Supported(Geo(c)));
  const Geometry g = Geo(c);
  const std::vector<float> x = Random(c.n * c.h * c.w * c.cin, 1.0f, 1);
  const std::vector<float> w = Random(9 * c.cin * c.cout, 1.0f / std::sqrt(9.0f * c.cin), 2);
  const std::vector<float> dy = Random(c.n * g.out_h * g.out_w * c.cout, 1.0f, 3);
  const std::vector<float> bias = Random(c.cout, 0.5f, 4);
  const std::vector<float>* b = bias_relu ? &bias : nullptr;
  const std::vector<double> want_y = DirectForward(c, x, w, b, bias_relu);
  const std::vector<double> want_dx = DirectBackwardData(c, dy, w);

  const bool avx2 = HostIsa().avx2;
  for (Isa isa : {Isa::kAvx2, Isa::kScalar}) {
    Isa ran = isa;
    const Error ey = RelError(RunWinograd(c, Pass::kForward, isa, x, w, b, bias_relu, &ran), want_y);
    const Error edx = RelError(RunWinograd(c, Pass::kBackwardData, isa, dy, w, nullptr, false), want_dx);
    const Isa expect = isa == Isa::kAvx2 && !avx2 ? Isa::kScalar : isa;
    EXPECT_EQ(ran, expect) << "asked for " << IsaName(isa) << ", host AVX2 " << avx2;
    if (isa == Isa::kAvx2 && !avx2)
      std::printf("  host has no AVX2: the AVX2 request ran the scalar path (checked)\n");
    EXPECT_LE(ey.max, kMaxTolerance) << IsaName(ran) << " forward";
    EXPECT_LE(ey.rms, kRmsTolerance) << IsaName(ran) << " forward";
    EXPECT_LE(edx.max, kMaxTolerance) << IsaName(ran) << " backward-data";
    EXPECT_LE(edx.rms, kRmsTolerance) << IsaName(ran) << " backward-data";
    std::printf("  %-28s %-6s error / RMS: forward max %.1e rms %.1e, backward-data max %.1e rms %.1e\n",
                Name(c).c_str(), IsaName(ran), ey.max, ey.rms, edx.max, edx.rms);
  }
}

TEST(WinogradTest, DispatchFollowsHostIsa) {
  EXPECT_EQ(Best(), HostIsa().avx2 ? Isa::kAvx2 : Isa::kScalar);
  Conv3x3 conv(Geo({1, 6, 6, 8, 8, 1}), Pass::kForward, Isa::kAvx2);
  EXPECT_EQ(conv.isa(), HostIsa().avx2 ? Isa::kAvx2 : Isa::kScalar);
  Conv3x3 scalar(Geo({1, 6, 6, 8, 8, 1}), Pass::kForward, Isa::kScalar);
  EXPECT_EQ(scalar.isa(), Isa::kScalar);
  if (!HostIsa().avx2) std::printf("host has no AVX2: dispatch returns the scalar path (checked)\n");
}

TEST(WinogradTest, Supported) {
  EXPECT_TRUE(Supported(Geo({2, 28, 28, 32, 32, 1})));
  EXPECT_TRUE(Supported(Geo({2, 28, 28, 32, 32, 0})));
  EXPECT_FALSE(Supported(Geo({2, 28, 28, 1, 32, 1})));   // channels not in blocks of 8
  EXPECT_FALSE(Supported(Geo({2, 28, 28, 32, 12, 1})));
  EXPECT_TRUE(Profitable(Geo({8, 14, 14, 256, 256, 1})));  // 128 tiles
  EXPECT_FALSE(Profitable(Geo({8, 7, 7, 512, 512, 1})));   // 32 tiles
  Geometry g = Geo({1, 8, 8, 8, 8, 1});
  g.out_h = 12;  // padding after 5
  EXPECT_FALSE(Supported(g));
}

TEST(WinogradTest, ReferenceCnnLayers) {
  for (int pad : {1, 0}) {
    Check({2, 28, 28, 32, 32, pad});
    Check({2, 14, 14, 32, 64, pad});
    Check({2, 14, 14, 64, 64, pad});
  }
}

TEST(WinogradTest, FusedBiasAndRelu) {
  Check({2, 14, 14, 32, 64, 1}, /*bias_relu=*/true);
  Check({1, 9, 7, 16, 24, 0}, /*bias_relu=*/true);
}

TEST(WinogradTest, OddSizes) {
  for (int pad : {1, 0}) {
    Check({1, 13, 11, 8, 16, pad});
    Check({2, 9, 7, 16, 8, pad});
    Check({1, 5, 6, 24, 8, pad});
    Check({3, 3, 3, 8, 8, pad});  // valid: a 1x1 output
  }
  Check({1, 2, 3, 8, 24, 1});  // smaller than one tile
}

// Batch 1 and one padding each: the f64 reference dominates the time under ASan.
TEST(WinogradTest, ResNetLayers) {
  Check({1, 56, 56, 64, 64, 1});
  Check({1, 28, 28, 128, 128, 1});
  Check({1, 14, 14, 256, 256, 0});
  Check({1, 7, 7, 512, 512, 1});
}

}  // namespace
}  // namespace strata::backend::cpu::winograd
