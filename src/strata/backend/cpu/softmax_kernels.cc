#include "strata/backend/cpu/softmax_kernels.h"

#include <algorithm>

#include "strata/backend/cpu/fast_exp.h"
#include "strata/core/isa_region.h"
#include "strata/graph/graph.h"

namespace strata::backend::cpu {
namespace {

using graph::kMaskedScore;

// One body per kernel, compiled for a generic, an AVX2 and an AVX-512 target; each loop is free
// of calls and cross-iteration dependencies but its reductions, so the compiler vectorises it.
#define STRATA_SOFTMAX_BODIES                                                                                 \
  /* The maximum and the sum in 16 lanes of partials (a float reduction vectorises only so). */             \
  /* m null: no mask (a plain softmax). */                                                                  \
  template <bool kMasked>                                                                                    \
  static inline __attribute__((always_inline)) void Row(const float* __restrict x, const float* __restrict m, \
                                                         int64_t S, float* __restrict y) {                    \
    constexpr int L = 16;                                                                                    \
    float pm[L], ps[L];                                                                                      \
    for (int j = 0; j < L; ++j) pm[j] = -3.4e38f, ps[j] = 0.0f;                                              \
    int64_t k = 0;                                                                                           \
    for (; k + L <= S; k += L)                                                                               \
      for (int j = 0; j < L; ++j) {                                                                          \
        const float z = kMasked ? x[k + j] + (1.0f - m[k + j]) * kMaskedScore : x[k + j];                     \
        y[k + j] = z;                                                                                        \
        pm[j] = pm[j] > z ? pm[j] : z;                                                                       \
      }                                                                                                      \
    for (; k < S; ++k) {                                                                                     \
      y[k] = kMasked ? x[k] + (1.0f - m[k]) * kMaskedScore : x[k];                                           \
      pm[0] = pm[0] > y[k] ? pm[0] : y[k];                                                                   \
    }                                                                                                        \
    float mx = pm[0];                                                                                        \
    for (int j = 1; j < L; ++j) mx = mx > pm[j] ? mx : pm[j];                                                \
    for (k = 0; k + L <= S; k += L)                                                                          \
      for (int j = 0; j < L; ++j) {                                                                          \
        y[k + j] = FastExp(y[k + j] - mx);                                                                       \
        ps[j] += y[k + j];                                                                                   \
      }                                                                                                      \
    for (; k < S; ++k) {                                                                                     \
      y[k] = FastExp(y[k] - mx);                                                                                 \
      ps[0] += y[k];                                                                                         \
    }                                                                                                        \
    float sum = 0;                                                                                           \
    for (int j = 0; j < L; ++j) sum += ps[j];                                                                \
    const float inv = 1.0f / sum;                                                                            \
    for (k = 0; k < S; ++k) y[k] *= inv;                                                                     \
  }                                                                                                          \
  __attribute__((noinline)) void Plain(const float* x, int64_t rows, int64_t S, float* y) {                  \
    for (int64_t r = 0; r < rows; ++r) Row<false>(x + r * S, nullptr, S, y + r * S);                         \
  }                                                                                                          \
  __attribute__((noinline)) void Backward(const float* __restrict y, const float* __restrict dy, int64_t rows, \
                                          int64_t S, float* __restrict dx) {                                  \
    constexpr int L = 16;                                                                                    \
    for (int64_t r = 0; r < rows; ++r) {                                                                     \
      const float* yr = y + r * S;                                                                           \
      const float* dr = dy + r * S;                                                                          \
      float* xr = dx + r * S;                                                                                \
      float pd[L];                                                                                           \
      for (int j = 0; j < L; ++j) pd[j] = 0.0f;                                                              \
      int64_t k = 0;                                                                                         \
      for (; k + L <= S; k += L)                                                                             \
        for (int j = 0; j < L; ++j) pd[j] += yr[k + j] * dr[k + j];                                          \
      for (; k < S; ++k) pd[0] += yr[k] * dr[k];                                                             \
      float dot = 0;                                                                                         \
      for (int j = 0; j < L; ++j) dot += pd[j];                                                              \
      for (k = 0; k < S; ++k) xr[k] = yr[k] * (dr[k] - dot);                                                 \
    }                                                                                                        \
  }                                                                                                          \
  __attribute__((noinline)) void Masked(const float* x, const float* mask, int64_t B, int64_t G, int64_t T,  \
                                        int64_t S, float* y) {                                               \
    for (int64_t b = 0; b < B; ++b)                                                                          \
      for (int64_t g = 0; g < G; ++g)                                                                        \
        for (int64_t t = 0; t < T; ++t) {                                                                    \
          const int64_t row = (b * G + g) * T + t;                                                           \
          Row<true>(x + row * S, mask + (b * T + t) * S, S, y + row * S);                                    \
        }                                                                                                    \
  }

namespace generic {
STRATA_SOFTMAX_BODIES
}  // namespace generic

namespace avx2 {
STRATA_ISA_VECTORIZED_REGION_BEGIN("avx2,fma")
STRATA_SOFTMAX_BODIES
STRATA_ISA_REGION_END
}  // namespace avx2

namespace avx512 {
STRATA_ISA_VECTORIZED_REGION_BEGIN("avx512f,avx512vl,avx512dq,avx2,fma")
STRATA_SOFTMAX_BODIES
STRATA_ISA_REGION_END
}  // namespace avx512

#undef STRATA_SOFTMAX_BODIES

}  // namespace

void MaskedSoftmax(const float* x, const float* mask, int64_t B, int64_t G, int64_t T, int64_t S, float* y,
                   KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::Masked(x, mask, B, G, T, S, y);
    case KernelIsa::kAvx2: return avx2::Masked(x, mask, B, G, T, S, y);
    case KernelIsa::kScalar: return generic::Masked(x, mask, B, G, T, S, y);
  }
}

void Softmax(const float* x, int64_t rows, int64_t S, float* y, KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::Plain(x, rows, S, y);
    case KernelIsa::kAvx2: return avx2::Plain(x, rows, S, y);
    case KernelIsa::kScalar: return generic::Plain(x, rows, S, y);
  }
}

void SoftmaxBackward(const float* y, const float* dy, int64_t rows, int64_t S, float* dx, KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::Backward(y, dy, rows, S, dx);
    case KernelIsa::kAvx2: return avx2::Backward(y, dy, rows, S, dx);
    case KernelIsa::kScalar: return generic::Backward(y, dy, rows, S, dx);
  }
}

}  // namespace strata::backend::cpu
