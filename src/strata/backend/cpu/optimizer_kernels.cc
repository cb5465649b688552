#include "strata/backend/cpu/optimizer_kernels.h"

#include <cmath>

#include "strata/core/cpu.h"

namespace strata::backend::cpu {
namespace {

// One body per update, inlined into a generic and an AVX-512 function; the compiler
// vectorises each for its target (the loops have no cross-iteration dependency).
#define STRATA_UPDATE_BODIES                                                                      \
  static inline __attribute__((always_inline)) void SgdBody(float* __restrict w, const float* __restrict g, \
                                                             float* __restrict v, int64_t n, SgdParams p) { \
    if (p.momentum == 0) {                                                                        \
      for (int64_t i = 0; i < n; ++i) w[i] -= p.lr * g[i];                                        \
    } else if (p.nesterov) {                                                                      \
      for (int64_t i = 0; i < n; ++i) {                                                           \
        const float vi = p.momentum * v[i] - p.lr * g[i];                                         \
        v[i] = vi;                                                                                \
        w[i] += p.momentum * vi - p.lr * g[i];                                                    \
      }                                                                                           \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; ++i) {                                                           \
        v[i] = p.momentum * v[i] - p.lr * g[i];                                                   \
        w[i] += v[i];                                                                             \
      }                                                                                           \
    }                                                                                             \
  }                                                                                               \
  static inline __attribute__((always_inline)) void AdamBody(float* __restrict w, const float* __restrict g, \
                                                              float* __restrict m, float* __restrict v, int64_t n, \
                                                              AdamParams p) {                     \
    const float lr_t = p.lr * std::sqrt(1 - std::pow(p.beta_2, p.step)) / (1 - std::pow(p.beta_1, p.step)); \
    const float decay = p.lr * p.weight_decay;                                                    \
    for (int64_t i = 0; i < n; ++i) {                                                             \
      const float wi = w[i] - decay * w[i];                                                       \
      const float mi = p.beta_1 * m[i] + (1 - p.beta_1) * g[i];                                   \
      const float vi = p.beta_2 * v[i] + (1 - p.beta_2) * g[i] * g[i];                            \
      m[i] = mi;                                                                                  \
      v[i] = vi;                                                                                  \
      w[i] = wi - lr_t * mi / (std::sqrt(vi) + p.epsilon);                                        \
    }                                                                                             \
  }                                                                                               \
  static inline __attribute__((always_inline)) void RmsBody(float* __restrict w, const float* __restrict g, \
                                                             float* __restrict r, float* __restrict mom, int64_t n, \
                                                             RmsPropParams p) {                   \
    for (int64_t i = 0; i < n; ++i) {                                                             \
      const float ri = p.rho * r[i] + (1 - p.rho) * g[i] * g[i];                                  \
      r[i] = ri;                                                                                  \
      const float inc = p.lr * g[i] / std::sqrt(ri + p.epsilon);                                  \
      if (p.momentum != 0) {                                                                      \
        mom[i] = p.momentum * mom[i] + inc;                                                       \
        w[i] -= mom[i];                                                                           \
      } else {                                                                                    \
        w[i] -= inc;                                                                              \
      }                                                                                           \
    }                                                                                             \
  }

STRATA_UPDATE_BODIES

__attribute__((target("avx512f"), optimize("tree-vectorize"))) void SgdAvx512(float* w, const float* g, float* v,
                                                                               int64_t n, SgdParams p) {
  SgdBody(w, g, v, n, p);
}
__attribute__((target("avx512f"), optimize("tree-vectorize"))) void AdamAvx512(float* w, const float* g, float* m,
                                                                                float* v, int64_t n, AdamParams p) {
  AdamBody(w, g, m, v, n, p);
}
__attribute__((target("avx512f"), optimize("tree-vectorize"))) void RmsAvx512(float* w, const float* g, float* r,
                                                                               float* mom, int64_t n, RmsPropParams p) {
  RmsBody(w, g, r, mom, n, p);
}

}  // namespace

namespace scalar {
void SgdUpdate(float* w, const float* g, float* v, int64_t n, SgdParams p) { SgdBody(w, g, v, n, p); }
void AdamUpdate(float* w, const float* g, float* m, float* v, int64_t n, AdamParams p) { AdamBody(w, g, m, v, n, p); }
void RmsPropUpdate(float* w, const float* g, float* r, float* mom, int64_t n, RmsPropParams p) {
  RmsBody(w, g, r, mom, n, p);
}
}  // namespace scalar

void SgdUpdate(float* w, const float* g, float* v, int64_t n, SgdParams p) {
  HostIsa().avx512f ? SgdAvx512(w, g, v, n, p) : scalar::SgdUpdate(w, g, v, n, p);
}
void AdamUpdate(float* w, const float* g, float* m, float* v, int64_t n, AdamParams p) {
  HostIsa().avx512f ? AdamAvx512(w, g, m, v, n, p) : scalar::AdamUpdate(w, g, m, v, n, p);
}
void RmsPropUpdate(float* w, const float* g, float* r, float* mom, int64_t n, RmsPropParams p) {
  HostIsa().avx512f ? RmsAvx512(w, g, r, mom, n, p) : scalar::RmsPropUpdate(w, g, r, mom, n, p);
}

}  // namespace strata::backend::cpu
