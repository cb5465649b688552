#include "strata/backend/cpu/norm_act_kernels.h"

#include <algorithm>
#include <cmath>

#include "strata/backend/cpu/fast_exp.h"
#include "strata/core/cpu.h"

namespace strata::backend::cpu {
namespace {

// Rows summed in f32 before the run's sums go into the f64 totals.
constexpr int64_t kRun = 256;

// The arrays of NormActScratch::f, each padded_channels() long.
enum FloatArray { kRunSum1, kRunSum2, kMean, kScale, kShift, kMeanDz, kMeanDzXc, kFloatArrays };

// How a body walks the tensor: `outer` x `blocks` runs of `inner` rows; block b holds channels
// [b * width, b * width + lanes(b)). Blocked layouts hold `width` lanes per block in memory
// (padding past `channels` included); plain [M, C] is one block of M whole rows (row by row:
// column blocks strided a row apart ran 10x slower, measured), its sums in L1-resident arrays.
struct Walk {
  int64_t outer, blocks, inner, width, channels;
  int64_t outer_stride, block_stride, row_stride;
  bool padded;
  int64_t lanes(int64_t b) const { return padded ? width : std::min(width, channels - b * width); }
};

Walk WalkOf(const ChannelLayout& l) {
  if (l.outer == 1 && l.blocks == 1 && l.width == l.channels) {  // plain [M, C]: whole rows
    return {1, 1, l.inner, l.channels, l.channels, 0, l.channels, l.channels, false};
  }
  return {l.outer, l.blocks, l.inner, l.width, l.channels, l.blocks * l.inner * l.width, l.inner * l.width, l.width,
          true};
}

// One body per pass, inlined into an AVX-512, an AVX2 and a generic function and vectorised
// by the compiler for each target. kW: the block's width when it is a vector block (16 or 8
// lanes: one register per row, the sums in registers), else 0 (plain rows of any width,
// `lanes`; restrict-qualified arrays, so that the loops vectorise).

// Sums over every row of one block of (u, v) = term(channel, element): f32 within a run of
// kRun rows, f64 across runs, into s1, s2 [channels].
template <int kW, class Term>
inline __attribute__((always_inline)) void BlockSums(const Walk& wk, int64_t first, int64_t c0, int64_t lanes,
                                                     double* __restrict s1, double* __restrict s2,
                                                     float* __restrict q1_scratch, float* __restrict q2_scratch,
                                                     const Term& term) {
  const int64_t w = kW > 0 ? kW : lanes;
  float local1[kW > 0 ? kW : 1], local2[kW > 0 ? kW : 1];
  float* q1 = kW > 0 ? local1 : q1_scratch;
  float* q2 = kW > 0 ? local2 : q2_scratch;
  for (int64_t r0 = 0; r0 < wk.inner; r0 += kRun) {
    const int64_t r1 = std::min(wk.inner, r0 + kRun);
    for (int64_t j = 0; j < w; ++j) q1[j] = q2[j] = 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = first + r * wk.row_stride;
      for (int64_t j = 0; j < w; ++j) {
        float u, v;
        term(c0 + j, at + j, u, v);
        q1[j] += u;
        q2[j] += v;
      }
    }
    for (int64_t j = 0; j < w; ++j) {
      s1[c0 + j] += q1[j];
      s2[c0 + j] += q2[j];
    }
  }
}

template <int kW, class Term>
inline __attribute__((always_inline)) void ChannelSums(const Walk& wk, int64_t padded_channels, NormActScratch& s,
                                                       const Term& term) {
  const int64_t CP = padded_channels;
  double* s1 = s.d.data();
  double* s2 = s1 + CP;
  std::fill(s1, s1 + 2 * CP, 0.0);
  float* q1 = s.f.data() + kRunSum1 * CP;
  float* q2 = s.f.data() + kRunSum2 * CP;
  for (int64_t o = 0; o < wk.outer; ++o)
    for (int64_t b = 0; b < wk.blocks; ++b) {
      const int64_t first = o * wk.outer_stride + b * wk.block_stride, lanes = wk.lanes(b);
      if (kW > 0 && lanes == kW) {
        BlockSums<kW>(wk, first, b * wk.width, lanes, s1, s2, q1, q2, term);
      } else {
        BlockSums<0>(wk, first, b * wk.width, lanes, s1, s2, q1, q2, term);
      }
    }
}

// f(channel, element) for every element, block by block.
template <int kW, class Fn>
inline __attribute__((always_inline)) void BlockEach(const Walk& wk, int64_t first, int64_t c0, int64_t lanes,
                                                     const Fn& fn) {
  const int64_t w = kW > 0 ? kW : lanes;
  for (int64_t r = 0; r < wk.inner; ++r)
    for (int64_t j = 0; j < w; ++j) fn(c0 + j, first + r * wk.row_stride + j);
}

template <int kW, class Fn>
inline __attribute__((always_inline)) void ForEach(const Walk& wk, const Fn& fn) {
  for (int64_t o = 0; o < wk.outer; ++o)
    for (int64_t b = 0; b < wk.blocks; ++b) {
      const int64_t first = o * wk.outer_stride + b * wk.block_stride, lanes = wk.lanes(b);
      if (kW > 0 && lanes == kW) {
        BlockEach<kW>(wk, first, b * wk.width, lanes, fn);
      } else {
        BlockEach<0>(wk, first, b * wk.width, lanes, fn);
      }
    }
}

// The forward's per-channel affine form, shared by both passes of both directions so that the
// backward's pre-activation is the forward's to the bit: z = fma(x - mean, scale, shift). The
// padding's z is pad_z, where the activation and its derivative are 0: dy's padding is never
// read into a sum or dx (it may hold anything, NaN included).
inline void AffineOf(const float* gamma, const float* beta, const float* mean, const float* var, int64_t channels,
                     int64_t padded, float epsilon, float pad_z, float* fmean, float* scale, float* shift) {
  for (int64_t c = 0; c < padded; ++c) {
    if (c < channels) {
      fmean[c] = mean[c];
      scale[c] = gamma[c] * (1.0f / std::sqrt(var[c] + epsilon));
      shift[c] = beta[c];
    } else {  // padding: z = pad_z, so y = 0 and dz = 0
      fmean[c] = scale[c] = 0.0f;
      shift[c] = pad_z;
    }
  }
}

// The activation and its derivative's factor, at the pre-activation z. Hard swish's kinks take
// oneDNN's (and the reference backend's) sides, so fused and unfused steps agree to the bit.
// Swish's padding sentinel: no batch norm output reaches it, and the activation and its
// derivative are 0 at and below it (swish itself is 0 only at 0, where its derivative is 1/2).
constexpr float kSwishPad = -1e30f;

// A pre-activation where the activation and its derivative are 0 (hard swish's -0 included).
template <NormActivation kAct>
constexpr float kPadZ = kAct == NormActivation::kRelu6 ? 0.0f : kAct == NormActivation::kHardSwish ? -4.0f : kSwishPad;

template <NormActivation kAct>
inline __attribute__((always_inline)) float Activate(float z) {
  if constexpr (kAct == NormActivation::kRelu6) return std::min(std::max(z, 0.0f), 6.0f);
  if constexpr (kAct == NormActivation::kHardSwish) return z * std::min(std::max(z + 3.0f, 0.0f), 6.0f) * (1.0f / 6);
  return z > kSwishPad ? z / (1.0f + FastExp(-z)) : 0.0f;
}
template <NormActivation kAct>
inline __attribute__((always_inline)) float Derive(float z, float dy) {
  if constexpr (kAct == NormActivation::kRelu6) return (z > 0.0f) & (z < 6.0f) ? dy : 0.0f;
  // One select at a time (blends the compiler vectorises), the last after the product: dy's
  // padding may hold anything.
  if constexpr (kAct == NormActivation::kHardSwish) {
    float f = std::fmaf(z, 1.0f / 3, 0.5f);
    f = z > 3.0f ? 1.0f : f;
    const float r = dy * f;
    return z < -3.0f ? 0.0f : r;
  }
  // d/dz z s(z) = s (1 + z (1 - s)), s = sigmoid(z).
  const float sg = 1.0f / (1.0f + FastExp(-z));
  const float r = dy * (sg * (1.0f + z * (1.0f - sg)));
  return z > kSwishPad ? r : 0.0f;
}

template <int kW, NormActivation kAct>
inline __attribute__((always_inline)) void ForwardBody(const float* __restrict x, const float* gamma,
                                                       const float* beta, const ChannelLayout& l, const Walk& wk,
                                                       float epsilon, NormActScratch& s, float* __restrict y,
                                                       float* mean, float* var) {
  const int64_t CP = l.padded_channels(), C = l.channels;
  ChannelSums<kW>(wk, CP, s, [x](int64_t, int64_t e, float& u, float& v) __attribute__((always_inline)) {
    u = x[e];
    v = x[e] * x[e];
  });
  const double count = static_cast<double>(l.count());
  for (int64_t c = 0; c < C; ++c) {
    const double mu = s.d[c] / count;
    mean[c] = static_cast<float>(mu);
    var[c] = static_cast<float>(std::max(s.d[CP + c] / count - mu * mu, 0.0));
  }
  float* fm = s.f.data() + kMean * CP;
  float* fa = s.f.data() + kScale * CP;
  float* fb = s.f.data() + kShift * CP;
  AffineOf(gamma, beta, mean, var, C, CP, epsilon, kPadZ<kAct>, fm, fa, fb);
  ForEach<kW>(wk, [=](int64_t c, int64_t e) __attribute__((always_inline)) {
    const float z = std::fmaf(x[e] - fm[c], fa[c], fb[c]);
    y[e] = Activate<kAct>(z);
  });
}

template <int kW, NormActivation kAct>
inline __attribute__((always_inline)) void BackwardBody(const float* __restrict x, const float* __restrict dy,
                                                        const float* gamma, const float* beta, const float* mean,
                                                        const float* var, const ChannelLayout& l, const Walk& wk,
                                                        float epsilon, NormActScratch& s, float* __restrict dx,
                                                        float* dgamma, float* dbeta) {
  const int64_t CP = l.padded_channels(), C = l.channels;
  float* fm = s.f.data() + kMean * CP;
  float* fa = s.f.data() + kScale * CP;
  float* fb = s.f.data() + kShift * CP;
  float* k2 = s.f.data() + kMeanDz * CP;
  float* k3 = s.f.data() + kMeanDzXc * CP;
  AffineOf(gamma, beta, mean, var, C, CP, epsilon, kPadZ<kAct>, fm, fa, fb);
  // Sums of dz and dz * (x - mean). Swish's dz (an exponential and a division an element) is
  // kept in dx for the second pass rather than computed twice: a write and a read more, measured
  // faster.
  constexpr bool kKeepDz = kAct == NormActivation::kSwish;
  ChannelSums<kW>(wk, CP, s, [=](int64_t c, int64_t e, float& u, float& v) __attribute__((always_inline)) {
    const float xc = x[e] - fm[c];
    const float z = std::fmaf(xc, fa[c], fb[c]);
    const float dz = Derive<kAct>(z, dy[e]);
    if constexpr (kKeepDz) dx[e] = dz;
    u = dz;
    v = dz * xc;
  });
  const double count = static_cast<double>(l.count());
  for (int64_t c = 0; c < CP; ++c) {
    if (c < C) {
      const double istd = 1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon);
      dbeta[c] = static_cast<float>(s.d[c]);
      dgamma[c] = static_cast<float>(s.d[CP + c] * istd);
      k2[c] = static_cast<float>(s.d[c] / count);                       // mean dz
      k3[c] = static_cast<float>(s.d[CP + c] * istd * istd / count);   // mean(dz * x_hat) / sigma
    } else {
      k2[c] = k3[c] = 0.0f;
    }
  }
  // dx = gamma / sigma * (dz - mean(dz) - (x - mean) / sigma * mean(dz * x_hat)); fa = gamma / sigma.
  ForEach<kW>(wk, [=](int64_t c, int64_t e) __attribute__((always_inline)) {
    const float xc = x[e] - fm[c];
    float dz;
    if constexpr (kKeepDz) {
      dz = dx[e];
    } else {
      dz = Derive<kAct>(std::fmaf(xc, fa[c], fb[c]), dy[e]);
    }
    dx[e] = fa[c] * (dz - k2[c] - xc * k3[c]);
  });
}

#define STRATA_NORM_ACT_DISPATCH(SUFFIX, ATTR)                                                             \
  template <NormActivation kAct>                                                                           \
  ATTR void Forward##SUFFIX(const float* x, const float* gamma, const float* beta, const ChannelLayout& l, \
                            float epsilon, NormActScratch& s, float* y, float* mean, float* var) {         \
    const Walk wk = WalkOf(l);                                                                             \
    if (wk.width == 16) return ForwardBody<16, kAct>(x, gamma, beta, l, wk, epsilon, s, y, mean, var);     \
    if (wk.width == 8) return ForwardBody<8, kAct>(x, gamma, beta, l, wk, epsilon, s, y, mean, var);       \
    ForwardBody<0, kAct>(x, gamma, beta, l, wk, epsilon, s, y, mean, var);                                 \
  }                                                                                                        \
  template <NormActivation kAct>                                                                           \
  ATTR void Backward##SUFFIX(const float* x, const float* dy, const float* gamma, const float* beta,        \
                             const float* mean, const float* var, const ChannelLayout& l, float epsilon,   \
                             NormActScratch& s, float* dx, float* dgamma, float* dbeta) {                  \
    const Walk wk = WalkOf(l);                                                                             \
    if (wk.width == 16)                                                                                    \
      return BackwardBody<16, kAct>(x, dy, gamma, beta, mean, var, l, wk, epsilon, s, dx, dgamma, dbeta);  \
    if (wk.width == 8)                                                                                     \
      return BackwardBody<8, kAct>(x, dy, gamma, beta, mean, var, l, wk, epsilon, s, dx, dgamma, dbeta);   \
    BackwardBody<0, kAct>(x, dy, gamma, beta, mean, var, l, wk, epsilon, s, dx, dgamma, dbeta);            \
  }

STRATA_NORM_ACT_DISPATCH(Avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma,prefer-vector-width=512"), optimize("tree-vectorize"))))
STRATA_NORM_ACT_DISPATCH(Avx2, __attribute__((target("avx2,fma"), optimize("tree-vectorize"))))
STRATA_NORM_ACT_DISPATCH(Scalar, )

bool UseAvx512() { return HostIsa().avx512f && HostIsa().avx512vl && HostIsa().avx512bw; }

template <NormActivation kAct>
void Forward(const float* x, const float* gamma, const float* beta, const ChannelLayout& l, float epsilon,
             NormActScratch& s, float* y, float* mean, float* var) {
  if (UseAvx512()) return ForwardAvx512<kAct>(x, gamma, beta, l, epsilon, s, y, mean, var);
  if (HostIsa().avx2) return ForwardAvx2<kAct>(x, gamma, beta, l, epsilon, s, y, mean, var);
  ForwardScalar<kAct>(x, gamma, beta, l, epsilon, s, y, mean, var);
}

template <NormActivation kAct>
void Backward(const float* x, const float* dy, const float* gamma, const float* beta, const float* mean,
              const float* var, const ChannelLayout& l, float epsilon, NormActScratch& s, float* dx, float* dgamma,
              float* dbeta) {
  if (UseAvx512()) return BackwardAvx512<kAct>(x, dy, gamma, beta, mean, var, l, epsilon, s, dx, dgamma, dbeta);
  if (HostIsa().avx2) return BackwardAvx2<kAct>(x, dy, gamma, beta, mean, var, l, epsilon, s, dx, dgamma, dbeta);
  BackwardScalar<kAct>(x, dy, gamma, beta, mean, var, l, epsilon, s, dx, dgamma, dbeta);
}

}  // namespace

std::string NormActIsa() { return UseAvx512() ? "avx512" : HostIsa().avx2 ? "avx2" : "scalar"; }

void BatchNormActForward(NormActivation act, const float* x, const float* gamma, const float* beta,
                         const ChannelLayout& l, float epsilon, NormActScratch& s, float* y, float* mean, float* var) {
  switch (act) {
    case NormActivation::kRelu6: return Forward<NormActivation::kRelu6>(x, gamma, beta, l, epsilon, s, y, mean, var);
    case NormActivation::kHardSwish:
      return Forward<NormActivation::kHardSwish>(x, gamma, beta, l, epsilon, s, y, mean, var);
    case NormActivation::kSwish: return Forward<NormActivation::kSwish>(x, gamma, beta, l, epsilon, s, y, mean, var);
  }
}

void BatchNormActBackward(NormActivation act, const float* x, const float* dy, const float* gamma, const float* beta,
                          const float* mean, const float* var, const ChannelLayout& l, float epsilon,
                          NormActScratch& s, float* dx, float* dgamma, float* dbeta) {
  switch (act) {
    case NormActivation::kRelu6:
      return Backward<NormActivation::kRelu6>(x, dy, gamma, beta, mean, var, l, epsilon, s, dx, dgamma, dbeta);
    case NormActivation::kHardSwish:
      return Backward<NormActivation::kHardSwish>(x, dy, gamma, beta, mean, var, l, epsilon, s, dx, dgamma, dbeta);
    case NormActivation::kSwish:
      return Backward<NormActivation::kSwish>(x, dy, gamma, beta, mean, var, l, epsilon, s, dx, dgamma, dbeta);
  }
}

}  // namespace strata::backend::cpu
