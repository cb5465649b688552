#include "strata/backend/cpu/broadcast_kernels.h"

#include <vector>

#include "strata/core/cpu.h"
#include "strata/core/isa_region.h"

namespace strata::backend::cpu {
namespace {

// One body per kernel, inlined into a generic, an AVX2 and an AVX-512 function; the compiler
// vectorises the inner loop for each target (no cross-iteration dependency; y may alias x
// element for element, so no __restrict on them).
#define STRATA_BROADCAST_BODIES                                                                              \
  static inline __attribute__((always_inline)) void MultiplyBody(const float* x, const float* s, int64_t a, \
                                                                  int64_t r, int64_t b, float* y) {           \
    if (b == 1) { /* one factor per row of r elements (drop-connect) */                                     \
      for (int64_t i = 0; i < a; ++i) {                                                                     \
        const float f = s[i];                                                                               \
        const float* xi = x + i * r;                                                                        \
        float* yi = y + i * r;                                                                              \
        for (int64_t j = 0; j < r; ++j) yi[j] = xi[j] * f;                                                  \
      }                                                                                                     \
      return;                                                                                               \
    }                                                                                                       \
    for (int64_t i = 0; i < a; ++i) {                                                                       \
      const float* si = s + i * b;                                                                          \
      for (int64_t j = 0; j < r; ++j) {                                                                     \
        const float* xr = x + (i * r + j) * b;                                                              \
        float* yr = y + (i * r + j) * b;                                                                    \
        for (int64_t k = 0; k < b; ++k) yr[k] = xr[k] * si[k];                                              \
      }                                                                                                     \
    }                                                                                                       \
  }                                                                                                         \
  /* y[i, k] = scale * sum_j x[i, j, k], accumulated in f64: eight partial sums when b == 1, */            \
  /* one per k otherwise (acc [b]). */                                                                      \
  static inline __attribute__((always_inline)) void SumBody(const float* __restrict x, int64_t a, int64_t r, \
                                                             int64_t b, double scale, double* __restrict acc, \
                                                             float* __restrict y) {                          \
    if (b == 1) {                                                                                           \
      for (int64_t i = 0; i < a; ++i) {                                                                     \
        const float* row = x + i * r;                                                                       \
        double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                             \
        int64_t j = 0;                                                                                      \
        for (; j + 8 <= r; j += 8)                                                                          \
          for (int t = 0; t < 8; ++t) p[t] += row[j + t];                                                   \
        for (; j < r; ++j) p[0] += row[j];                                                                  \
        y[i] = static_cast<float>((((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) * scale); \
      }                                                                                                     \
      return;                                                                                               \
    }                                                                                                       \
    for (int64_t i = 0; i < a; ++i) {                                                                       \
      for (int64_t k = 0; k < b; ++k) acc[k] = 0;                                                           \
      for (int64_t j = 0; j < r; ++j) {                                                                     \
        const float* row = x + (i * r + j) * b;                                                             \
        for (int64_t k = 0; k < b; ++k) acc[k] += row[k];                                                   \
      }                                                                                                     \
      for (int64_t k = 0; k < b; ++k) y[i * b + k] = static_cast<float>(acc[k] * scale);                    \
    }                                                                                                       \
  }                                                                                                         \
  static inline __attribute__((always_inline)) void BroadcastBody(const float* __restrict s, int64_t a,     \
                                                                   int64_t r, int64_t b, float scale,        \
                                                                   float* __restrict y) {                    \
    if (b == 1) {                                                                                           \
      for (int64_t i = 0; i < a; ++i) {                                                                     \
        const float f = scale * s[i];                                                                       \
        float* yi = y + i * r;                                                                              \
        for (int64_t j = 0; j < r; ++j) yi[j] = f;                                                          \
      }                                                                                                     \
      return;                                                                                               \
    }                                                                                                       \
    for (int64_t i = 0; i < a; ++i) {                                                                       \
      const float* si = s + i * b;                                                                          \
      for (int64_t j = 0; j < r; ++j) {                                                                     \
        float* yr = y + (i * r + j) * b;                                                                    \
        for (int64_t k = 0; k < b; ++k) yr[k] = scale * si[k];                                              \
      }                                                                                                     \
    }                                                                                                       \
  }

// One entry point per kernel and ISA, out of line so each keeps its namespace's target options.
#define STRATA_BROADCAST_ENTRY_POINTS                                                                        \
  __attribute__((noinline)) void Multiply(const float* x, const float* s, int64_t a, int64_t r, int64_t b,  \
                                          float* y) {                                                       \
    MultiplyBody(x, s, a, r, b, y);                                                                         \
  }                                                                                                         \
  __attribute__((noinline)) void Broadcast(const float* s, int64_t a, int64_t r, int64_t b, float scale,    \
                                           float* y) {                                                      \
    BroadcastBody(s, a, r, b, scale, y);                                                                    \
  }                                                                                                         \
  __attribute__((noinline)) void Sum(const float* x, int64_t a, int64_t r, int64_t b, double scale,         \
                                     double* acc, float* y) {                                               \
    SumBody(x, a, r, b, scale, acc, y);                                                                     \
  }

namespace generic {
STRATA_BROADCAST_BODIES
STRATA_BROADCAST_ENTRY_POINTS
}  // namespace generic

namespace avx2 {
STRATA_ISA_VECTORIZED_REGION_BEGIN("avx2,fma")
STRATA_BROADCAST_BODIES
STRATA_BROADCAST_ENTRY_POINTS
STRATA_ISA_REGION_END
}  // namespace avx2

namespace avx512 {
STRATA_ISA_VECTORIZED_REGION_BEGIN("avx512f,avx512vl,avx2,fma")
STRATA_BROADCAST_BODIES
STRATA_BROADCAST_ENTRY_POINTS
STRATA_ISA_REGION_END
}  // namespace avx512

#undef STRATA_BROADCAST_BODIES
#undef STRATA_BROADCAST_ENTRY_POINTS

}  // namespace


void MultiplyBroadcastMiddle(const float* x, const float* s, int64_t a, int64_t r, int64_t b, float* y,
                             KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::Multiply(x, s, a, r, b, y);
    case KernelIsa::kAvx2: return avx2::Multiply(x, s, a, r, b, y);
    case KernelIsa::kScalar: return generic::Multiply(x, s, a, r, b, y);
  }
}

void BroadcastMiddle(const float* s, int64_t a, int64_t r, int64_t b, float scale, float* y, KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::Broadcast(s, a, r, b, scale, y);
    case KernelIsa::kAvx2: return avx2::Broadcast(s, a, r, b, scale, y);
    case KernelIsa::kScalar: return generic::Broadcast(s, a, r, b, scale, y);
  }
}

void SumMiddle(const float* x, int64_t a, int64_t r, int64_t b, double scale, float* y, KernelIsa isa) {
  thread_local std::vector<double> acc;
  acc.resize(static_cast<size_t>(b));
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::Sum(x, a, r, b, scale, acc.data(), y);
    case KernelIsa::kAvx2: return avx2::Sum(x, a, r, b, scale, acc.data(), y);
    case KernelIsa::kScalar: return generic::Sum(x, a, r, b, scale, acc.data(), y);
  }
}

}  // namespace strata::backend::cpu
