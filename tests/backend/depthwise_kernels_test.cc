// depthwise_kernels.h called directly: every body this host can run (generic, AVX2, AVX-512)
// against a plain f64 loop, for 3x3 and 5x5 (and a 9x9, past one group of 8 kernel columns),
// stride 1 and 2, same / valid / asymmetric padding, odd extents, channels that leave the last
// block part padding (24, 40: the padding lanes hold NaN and must not leak), blocks of 16 and
// 8, batch 3, with and without the bias gradient, f32 and bf16 inputs (the "avx2:" copies of
// these tests run under STRATA_MAX_ISA=avx2, where the AVX-512 body is skipped).
#include "strata/backend/cpu/depthwise_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "strata/core/dtype.h"

namespace strata::backend::cpu {
namespace {

struct Case {
  int64_t n, h, w, c;
  int k, s, pad_top, pad_bottom, pad_left, pad_right, block;
  bool bias;
};

// Output extent of one axis: (in + pads - k) / s + 1.
int64_t Out(int64_t in, int k, int s, int before, int after) { return (in + before + after - k) / s + 1; }

// A tensor [n, h, w, c] in nChw<block>c: the values U(-1, 1), the padding lanes NaN.
std::vector<float> Blocked(int64_t n, int64_t h, int64_t w, int64_t c, int block, std::mt19937_64& rng) {
  const ChannelBlocks l = BlockedChannelBlocks(h, w, c, block);
  std::vector<float> v(static_cast<size_t>(n * l.n_stride), NAN);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          v[i * l.n_stride + ch / block * l.block_stride + y * l.h_stride + x * block + ch % block] = u(rng);
  return v;
}

float At(const std::vector<float>& v, const ChannelBlocks& l, int64_t n, int64_t c, int64_t h, int64_t w) {
  return v[n * l.n_stride + c / l.block * l.block_stride + h * l.h_stride + w * l.block + c % l.block];
}

const Case kCases[] = {
    {3, 7, 9, 24, 3, 1, 1, 1, 1, 1, 16, true},    // 3x3 same, one and a half blocks
    {3, 7, 9, 40, 5, 1, 2, 2, 2, 2, 16, false},   // 5x5 same
    {3, 9, 11, 40, 5, 2, 1, 2, 2, 1, 16, true},   // 5x5 stride 2, asymmetric (a folded ZeroPadding2D)
    {3, 8, 8, 16, 5, 2, 1, 2, 1, 2, 8, true},     // even extents, blocks of 8
    {3, 11, 6, 24, 5, 1, 0, 0, 0, 0, 8, false},   // valid
    {3, 6, 7, 17, 3, 2, 0, 1, 0, 1, 16, true},    // 3x3 stride 2 same (pads after only)
    {2, 5, 13, 8, 9, 1, 4, 4, 4, 4, 8, true},     // 9x9: two groups of kernel columns
    {3, 1, 1, 24, 5, 1, 2, 2, 2, 2, 16, true},    // one pixel: every column but one in the padding
};

// v rounded to bf16: the values (as f32) and their bits.
std::vector<uint16_t> RoundToBf16(std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = ToBF16(v[i]).bits;
    v[i] = ToF32(bf16{bits[i]});
  }
  return bits;
}

void CheckEveryBody(bool bf16) {
  for (const Case& c : kCases) {
    const int64_t oh = Out(c.h, c.k, c.s, c.pad_top, c.pad_bottom), ow = Out(c.w, c.k, c.s, c.pad_left, c.pad_right);
    std::mt19937_64 rng(c.c * 131 + c.k);
    const ChannelBlocks xl = BlockedChannelBlocks(c.h, c.w, c.c, c.block);
    const ChannelBlocks dl = BlockedChannelBlocks(oh, ow, c.c, c.block);
    std::vector<float> x = Blocked(c.n, c.h, c.w, c.c, c.block, rng);
    std::vector<float> dy = Blocked(c.n, oh, ow, c.c, c.block, rng);
    std::vector<uint16_t> x16, dy16;
    if (bf16) {
      x16 = RoundToBf16(x);
      dy16 = RoundToBf16(dy);
    }
    std::vector<double> want_w(static_cast<size_t>(c.k * c.k * c.c)), want_b(static_cast<size_t>(c.c));
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t ch = 0; ch < c.c; ++ch)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const double d = At(dy, dl, n, ch, i, j);
            want_b[ch] += d;
            for (int kh = 0; kh < c.k; ++kh)
              for (int kw = 0; kw < c.k; ++kw) {
                const int64_t y = i * c.s + kh - c.pad_top, xx = j * c.s + kw - c.pad_left;
                if (y >= 0 && y < c.h && xx >= 0 && xx < c.w) want_w[(kh * c.k + kw) * c.c + ch] += d * At(x, xl, n, ch, y, xx);
              }
          }
    double scale = 1e-3;
    for (double v : want_w) scale = std::max(scale, std::fabs(v));
    for (double v : want_b) scale = std::max(scale, std::fabs(v));
    DepthwiseGeometry g;
    g.batch = c.n;
    g.channels = c.c;
    g.in_h = c.h;
    g.in_w = c.w;
    g.out_h = oh;
    g.out_w = ow;
    g.kernel_h = g.kernel_w = c.k;
    g.stride_h = g.stride_w = c.s;
    g.pad_top = c.pad_top;
    g.pad_left = c.pad_left;
    for (const KernelIsa isa : RunnableKernelIsas()) {
      const std::string what = std::string(KernelImplName(isa)) + (bf16 ? " bf16" : " f32") + " k" +
                               std::to_string(c.k) + " s" +
                               std::to_string(c.s) + " [" + std::to_string(c.n) + ", " + std::to_string(c.h) + ", " +
                               std::to_string(c.w) + ", " + std::to_string(c.c) + "] block " + std::to_string(c.block);
      std::vector<float> dw(want_w.size(), NAN), db(want_b.size(), NAN);
      float* dbp = c.bias ? db.data() : nullptr;
      if (bf16) {
        DepthwiseConvBackwardWeightsBf16(g, x16.data(), xl, dy16.data(), dl, dw.data(), dbp, isa);
      } else {
        DepthwiseConvBackwardWeights(g, x.data(), xl, dy.data(), dl, dw.data(), dbp, isa);
      }
      for (size_t e = 0; e < dw.size(); ++e) ASSERT_NEAR(dw[e], want_w[e], 1e-5 * scale) << what << " dW " << e;
      for (size_t e = 0; e < db.size(); ++e) {
        if (c.bias) {
          ASSERT_NEAR(db[e], want_b[e], 1e-5 * scale) << what << " db " << e;
        } else {
          ASSERT_TRUE(std::isnan(db[e])) << what << ": db written without a bias gradient";
        }
      }
    }
  }
}

TEST(DepthwiseKernelsTest, WeightAndBiasGradientsOfEveryBodyMatchAPlainLoop) { CheckEveryBody(false); }

TEST(DepthwiseKernelsTest, Bf16InputsWidenExactly) { CheckEveryBody(true); }

}  // namespace
}  // namespace strata::backend::cpu
