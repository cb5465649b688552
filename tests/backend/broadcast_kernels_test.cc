// broadcast_kernels.h called directly: every body this host can run (generic, AVX2, AVX-512)
// against a plain loop, on extents that exercise the vector loops and their remainders (which
// body is the default: kernel_isa_test.cc). The "avx2:" copies of these tests run under
// STRATA_MAX_ISA=avx2, where the AVX-512 body is skipped and the default is AVX2.
#include "strata/backend/cpu/broadcast_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>


namespace strata::backend::cpu {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Extents {
  int64_t a, r, b;
};
// b == 1 (drop-connect), a block of 16 and of 8 (oneDNN's channel blocks), plain channel counts
// with remainders (37, 5), and r shorter than one vector.
const Extents kExtents[] = {{3, 101, 1}, {2, 7, 1}, {4, 9, 16}, {3, 11, 8}, {2, 6, 37}, {2, 5, 5}, {1, 3, 100}};

TEST(BroadcastKernelsTest, MultiplyBroadcastMiddleIsTheProductOfEveryBody) {
  for (const KernelIsa isa : RunnableKernelIsas()) {
    for (const Extents& e : kExtents) {
      const std::vector<float> x = Random(e.a * e.r * e.b, 1), s = Random(e.a * e.b, 2);
      std::vector<float> y(x.size(), NAN), in_place = x;
      MultiplyBroadcastMiddle(x.data(), s.data(), e.a, e.r, e.b, y.data(), isa);
      MultiplyBroadcastMiddle(in_place.data(), s.data(), e.a, e.r, e.b, in_place.data(), isa);
      for (int64_t i = 0; i < e.a; ++i)
        for (int64_t j = 0; j < e.r; ++j)
          for (int64_t k = 0; k < e.b; ++k) {
            const int64_t at = (i * e.r + j) * e.b + k;
            ASSERT_EQ(y[at], x[at] * s[i * e.b + k]) << KernelImplName(isa) << " [" << e.a << ", " << e.r << ", "
                                                     << e.b << "] at " << at;
            ASSERT_EQ(in_place[at], y[at]) << KernelImplName(isa) << " in place, at " << at;
          }
    }
  }
}

TEST(BroadcastKernelsTest, BroadcastMiddleSpreadsTheScaledFactor) {
  for (const KernelIsa isa : RunnableKernelIsas()) {
    for (const Extents& e : kExtents) {
      const std::vector<float> s = Random(e.a * e.b, 3);
      std::vector<float> y(e.a * e.r * e.b, NAN);
      const float scale = 1.0f / static_cast<float>(e.r);
      BroadcastMiddle(s.data(), e.a, e.r, e.b, scale, y.data(), isa);
      for (int64_t i = 0; i < e.a; ++i)
        for (int64_t j = 0; j < e.r; ++j)
          for (int64_t k = 0; k < e.b; ++k)
            ASSERT_EQ(y[(i * e.r + j) * e.b + k], scale * s[i * e.b + k])
                << KernelImplName(isa) << " [" << e.a << ", " << e.r << ", " << e.b << "]";
    }
  }
}

TEST(BroadcastKernelsTest, SumMiddleIsTheF64SumOfEveryBody) {
  for (const KernelIsa isa : RunnableKernelIsas()) {
    for (const Extents& e : kExtents) {
      const std::vector<float> x = Random(e.a * e.r * e.b, 4);
      std::vector<float> y(e.a * e.b, NAN);
      const double scale = 1.0 / static_cast<double>(e.r);
      SumMiddle(x.data(), e.a, e.r, e.b, scale, y.data(), isa);
      for (int64_t i = 0; i < e.a; ++i)
        for (int64_t k = 0; k < e.b; ++k) {
          double want = 0;
          for (int64_t j = 0; j < e.r; ++j) want += x[(i * e.r + j) * e.b + k];
          // f64 partial sums in another order round to the same f32 or its neighbour.
          ASSERT_NEAR(y[i * e.b + k], want * scale, 2.5e-7 * std::max(1.0, std::fabs(want * scale)))
              << KernelImplName(isa) << " [" << e.a << ", " << e.r << ", " << e.b << "] at " << i << ", " << k;
        }
    }
  }
}

// A sum over a long row (EfficientNet's 96 x 96 squeeze at b == 1 per channel block) keeps f64
// accuracy: f32 accumulation would be off by ~1e-4 relative here.
TEST(BroadcastKernelsTest, SumMiddleOfALongRowKeepsF64Accuracy) {
  const int64_t r = 96 * 96;
  std::vector<float> x(r);
  for (int64_t j = 0; j < r; ++j) x[j] = 1.0f + static_cast<float>(j % 7) * 1e-3f;
  double want = 0;
  for (float v : x) want += v;
  for (const KernelIsa isa : RunnableKernelIsas()) {
    float y = NAN;
    SumMiddle(x.data(), 1, r, 1, 1.0, &y, isa);
    EXPECT_EQ(y, static_cast<float>(want)) << KernelImplName(isa);
  }
}

}  // namespace
}  // namespace strata::backend::cpu
