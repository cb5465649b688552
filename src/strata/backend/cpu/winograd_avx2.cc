// Winograd F(4x4, 3x3), AVX2 + FMA path (8 float lanes = one nChw8c channel block). Compiled
// for avx2,fma on these functions only; called after a run-time check of HostIsa().avx2.
// See winograd.h for the math and winograd_internal.h for the layouts.
#include <algorithm>
#include <cstdint>

#include "strata/backend/cpu/winograd_internal.h"
#include "strata/core/isa_region.h"

STRATA_ISA_REGION_BEGIN("avx2,fma")
#include <immintrin.h>

namespace strata::backend::cpu::winograd::internal {
namespace {

using F = __m256;
// Forced: GCC otherwise keeps the small vector arrays of the transforms in memory.
#define WINOGRAD_INLINE inline __attribute__((always_inline))

inline F Set1(float x) { return _mm256_set1_ps(x); }
inline F Add(F a, F b) { return _mm256_add_ps(a, b); }
inline F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
inline F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }

// r = B^T d over 6 vectors (winograd.h's rows of B^T, factored).
WINOGRAD_INLINE void BT(F d0, F d1, F d2, F d3, F d4, F d5, F* r) {
  const F four = Set1(4), m4 = Set1(-4), m5 = Set1(-5), two = Set1(2);
  r[0] = Fma(four, d0, Fma(m5, d2, d4));
  const F a = Fma(m4, d2, d4), b = Fma(m4, d1, d3);
  r[1] = Add(a, b);
  r[2] = Sub(a, b);
  const F c = Sub(d4, d2), e = _mm256_mul_ps(two, Sub(d3, d1));
  r[3] = Add(c, e);
  r[4] = Sub(c, e);
  r[5] = Fma(four, d1, Fma(m5, d3, d5));
}

// o = A^T m over 6 vectors -> 4.
WINOGRAD_INLINE void AT(F m0, F m1, F m2, F m3, F m4, F m5, F* o) {
  const F s1 = Add(m1, m2), s2 = Sub(m1, m2), s3 = Add(m3, m4), s4 = Sub(m3, m4);
  o[0] = Add(Add(m0, s1), s3);
  o[1] = Fma(Set1(2), s4, s2);
  o[2] = Fma(Set1(4), s3, s1);
  o[3] = Add(Fma(Set1(8), s4, s2), m5);
}

// V of one 6 x 6 tile of one channel block: d at q (rows rs floats apart, pixels 8) to
// out + pos * ps. Columns first (B^T d), kept in t, then rows ((B^T d) B).
WINOGRAD_INLINE void InputTile(const float* q, int64_t rs, float* out, int64_t ps) {
  F t[6][6];
#pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) {
    const float* c = q + j * 8;
    F r[6];
    BT(_mm256_loadu_ps(c), _mm256_loadu_ps(c + rs), _mm256_loadu_ps(c + 2 * rs), _mm256_loadu_ps(c + 3 * rs),
       _mm256_loadu_ps(c + 4 * rs), _mm256_loadu_ps(c + 5 * rs), r);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) t[i][j] = r[i];
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    F r[6];
    BT(t[i][0], t[i][1], t[i][2], t[i][3], t[i][4], t[i][5], r);
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) _mm256_store_ps(out + (i * 6 + j) * ps, r[j]);
  }
}

// The tile `t` as (image, tile row, tile column), advanced one tile at a time.
struct TileCursor {
  int64_t n, ty, tx;
  TileCursor(const Plan& p, int64_t t)
      : n(t / (p.tiles_h * p.tiles_w)), ty(t / p.tiles_w % p.tiles_h), tx(t % p.tiles_w) {}
  void Next(const Plan& p) {
    if (++tx == p.tiles_w) {
      tx = 0;
      if (++ty == p.tiles_h) {
        ty = 0;
        ++n;
      }
    }
  }
};

constexpr int kPrefetchTiles = 2;

// V[pos][r][.] for tiles t0 .. t0 + nt of the block.
void InputTransform(const Plan& p, const float* src, int64_t t0, int64_t nt) {
  const int64_t C = p.c, CB = C / 8, H = p.h, W = p.w, pos_stride = p.v_stride;
  TileCursor tc(p, t0), ahead(p, t0);
  for (int i = 0; i < kPrefetchTiles; ++i) ahead.Next(p);
  for (int64_t r = 0; r < nt; ++r, tc.Next(p), ahead.Next(p)) {
    const int64_t y0 = tc.ty * 4 - p.pt, x0 = tc.tx * 4 - p.pl;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + 6 <= H && x0 + 6 <= W;
    const int i0 = static_cast<int>(std::max<int64_t>(0, -y0)), i1 = static_cast<int>(std::min<int64_t>(6, H - y0));
    const int j0 = static_cast<int>(std::max<int64_t>(0, -x0)), j1 = static_cast<int>(std::min<int64_t>(6, W - x0));
    // The source lines of a tile kPrefetchTiles ahead: the loads below miss the caches
    // otherwise (24 short streams per tile defeat the hardware prefetchers).
    const int64_t py0 = ahead.ty * 4 - p.pt, px0 = std::clamp<int64_t>(ahead.tx * 4 - p.pl, 0, W - 1);
    const bool prefetch = ahead.n < p.n;
    for (int64_t cb = 0; cb < CB; ++cb) {
      const float* img = src + (tc.n * CB + cb) * H * W * 8;
      if (prefetch) {
        const float* pimg = src + (ahead.n * CB + cb) * H * W * 8;
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i) {
          const int64_t y = py0 + i;
          if (y < 0 || y >= H) continue;
          const char* q = reinterpret_cast<const char*>(pimg + (y * W + px0) * 8);
          _mm_prefetch(q, _MM_HINT_T0);
          _mm_prefetch(q + 64, _MM_HINT_T0);
          _mm_prefetch(q + 128, _MM_HINT_T0);
        }
      }
      float* out = p.v + r * C + cb * 8;
      if (inside) {
        InputTile(img + (y0 * W + x0) * 8, W * 8, out, pos_stride);
      } else {  // a zero-padded copy of the part inside the image: rows i0..i1, columns j0..j1
        alignas(32) float tile[6 * 6 * 8];
#pragma GCC unroll 36
        for (int e = 0; e < 36; ++e) _mm256_store_ps(tile + e * 8, _mm256_setzero_ps());
        for (int i = i0; i < i1; ++i) {
          const float* row = img + ((y0 + i) * W + x0) * 8;
          for (int j = j0; j < j1; ++j) _mm256_store_ps(tile + (i * 6 + j) * 8, _mm256_loadu_ps(row + j * 8));
        }
        InputTile(tile, 6 * 8, out, pos_stride);
      }
    }
  }
}

// dst tiles of t0 .. t0 + nt from M[pos][r][.], with bias and ReLU.
void OutputTransform(const Plan& p, const float* bias, float* dst, int64_t t0, int64_t nt) {
  const int64_t K = p.k, KB = K / 8, Ho = p.ho, Wo = p.wo, pos_stride = p.m_stride;
  TileCursor tc(p, t0), ahead(p, t0);
  for (int i = 0; i < kPrefetchTiles; ++i) ahead.Next(p);
  for (int64_t r = 0; r < nt; ++r, tc.Next(p), ahead.Next(p)) {
    const int64_t y0 = tc.ty * 4, x0 = tc.tx * 4;
    const int rows = static_cast<int>(std::min<int64_t>(4, Ho - y0)), cols = static_cast<int>(std::min<int64_t>(4, Wo - x0));
    const bool prefetch = ahead.n < p.n;
    const int prows = static_cast<int>(std::min<int64_t>(4, Ho - ahead.ty * 4));
    for (int64_t kb = 0; kb < KB; ++kb) {
      if (prefetch) {  // the destination lines of the tile kPrefetchTiles ahead (stores miss otherwise)
        const char* q = reinterpret_cast<const char*>(dst + ((ahead.n * KB + kb) * Ho + ahead.ty * 4) * Wo * 8 +
                                                      ahead.tx * 4 * 8);
        for (int i = 0; i < prows; ++i) {
          _mm_prefetch(q + i * Wo * 32, _MM_HINT_T0);
          _mm_prefetch(q + i * Wo * 32 + 64, _MM_HINT_T0);
        }
      }
      const float* in = p.m + r * K + kb * 8;
      F am[4][6];  // am[.][c] = A^T m[.][c]
#pragma GCC unroll 6
      for (int c = 0; c < 6; ++c) {
        F o[4];
        AT(_mm256_load_ps(in + (0 * 6 + c) * pos_stride), _mm256_load_ps(in + (1 * 6 + c) * pos_stride),
           _mm256_load_ps(in + (2 * 6 + c) * pos_stride), _mm256_load_ps(in + (3 * 6 + c) * pos_stride),
           _mm256_load_ps(in + (4 * 6 + c) * pos_stride), _mm256_load_ps(in + (5 * 6 + c) * pos_stride), o);
#pragma GCC unroll 6
        for (int i = 0; i < 4; ++i) am[i][c] = o[i];
      }
      const F b = bias != nullptr ? _mm256_loadu_ps(bias + kb * 8) : _mm256_setzero_ps();
      float* out = dst + ((tc.n * KB + kb) * Ho + y0) * Wo * 8 + x0 * 8;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        F o[4];
        AT(am[i][0], am[i][1], am[i][2], am[i][3], am[i][4], am[i][5], o);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          o[j] = Add(o[j], b);
          if (p.relu) o[j] = _mm256_max_ps(o[j], _mm256_setzero_ps());
        }
        if (i >= rows) break;
        float* row = out + i * Wo * 8;
        if (cols == 4) {
          _mm256_storeu_ps(row, o[0]);
          _mm256_storeu_ps(row + 8, o[1]);
          _mm256_storeu_ps(row + 16, o[2]);
          _mm256_storeu_ps(row + 24, o[3]);
        } else {
          for (int j = 0; j < cols; ++j) _mm256_storeu_ps(row + j * 8, o[j]);
        }
      }
    }
  }
}

// c[MR x 8 NV] = a[MR x kc] (row stride lda) . b[kc x 8 NV] (row stride ldb): MR x NV
// accumulators in registers, one broadcast of a per row and NV loads of b per step of kc.
template <int MR, int NV>
void Micro(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kc, float* c, int64_t ldc) {
  F acc[MR][NV];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t q = 0; q < kc; ++q) {
    F bv[NV];
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) bv[j] = _mm256_load_ps(b + q * ldb + j * 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const F av = _mm256_broadcast_ss(a + i * lda + q);
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j) acc[i][j] = Fma(av, bv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) _mm256_store_ps(c + i * ldc + j * 8, acc[i][j]);
}

template <int NV>
void MicroRows(int mr, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kc, float* c, int64_t ldc) {
  switch (mr) {
    case 6: return Micro<6, NV>(a, lda, b, ldb, kc, c, ldc);
    case 5: return Micro<5, NV>(a, lda, b, ldb, kc, c, ldc);
    case 4: return Micro<4, NV>(a, lda, b, ldb, kc, c, ldc);
    case 3: return Micro<3, NV>(a, lda, b, ldb, kc, c, ldc);
    case 2: return Micro<2, NV>(a, lda, b, ldb, kc, c, ldc);
    default: return Micro<1, NV>(a, lda, b, ldb, kc, c, ldc);
  }
}

// The 36 products M[pos] = V[pos] . U[pos] of one block of nt tiles.
void Gemms(const Plan& p, int64_t nt) {
  const int64_t C = p.c, K = p.k;
  for (int pos = 0; pos < 36; ++pos) {
    const float* a = p.v + pos * p.v_stride;
    float* m = p.m + pos * p.m_stride;
    // Panels outer: one panel of U[pos] (C rows) stays in L1 across the row groups.
    for (int64_t j0 = 0; j0 < K; j0 += 16) {
      const int64_t width = PanelWidth(K, j0);
      const float* b = p.u + UIndex(p, pos, 0, j0);
      for (int64_t r = 0; r < nt; r += 6) {
        const int mr = static_cast<int>(std::min<int64_t>(6, nt - r));
        if (width == 16)
          MicroRows<2>(mr, a + r * C, C, b, 36 * width, C, m + r * K + j0, K);
        else
          MicroRows<1>(mr, a + r * C, C, b, 36 * width, C, m + r * K + j0, K);
      }
    }
  }
}

#include "strata/backend/cpu/winograd_weights.inc"

}  // namespace

void TransformWeightsAvx2(const Plan& p, bool forward, const float* w) { TransformWeightsBody(p, forward, w); }

void RunAvx2(const Plan& p, const float* src, const float* bias, float* dst) {
  for (int64_t t0 = 0; t0 < p.tiles; t0 += p.block) {
    const int64_t nt = std::min(p.block, p.tiles - t0);
    InputTransform(p, src, t0, nt);
    Gemms(p, nt);
    OutputTransform(p, bias, dst, t0, nt);
  }
}

}  // namespace strata::backend::cpu::winograd::internal

#undef WINOGRAD_INLINE

STRATA_ISA_REGION_END
