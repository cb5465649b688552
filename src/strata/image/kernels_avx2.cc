// AVX2 + FMA (8 float lanes) instance of kernels_body.inc, for hosts without AVX-512.
#include <cstdint>

#include "strata/core/isa_region.h"
#include "strata/image/kernels.h"

STRATA_ISA_REGION_BEGIN("avx2,fma")
#include <immintrin.h>

namespace strata::image::kernels::avx2 {
namespace {

using F = __m256;
using I = __m256i;
using M = __m256;  // all-ones lanes where true
constexpr int kLanes = 8;

inline F LoadF(const float* p) { return _mm256_loadu_ps(p); }
inline void StoreF(float* p, F v) { _mm256_storeu_ps(p, v); }
inline F Set1F(float x) { return _mm256_set1_ps(x); }
inline F Add(F a, F b) { return _mm256_add_ps(a, b); }
inline F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
inline F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
inline F Div(F a, F b) { return _mm256_div_ps(a, b); }
inline F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
inline F Min(F a, F b) { return _mm256_min_ps(a, b); }
inline F Max(F a, F b) { return _mm256_max_ps(a, b); }
inline F Floor(F a) { return _mm256_floor_ps(a); }
inline M CmpLt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline M CmpGt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline M CmpGe(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
inline M CmpEq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
inline M MaskAnd(M a, M b) { return _mm256_and_ps(a, b); }
inline F Select(M m, F if_true, F if_false) { return _mm256_blendv_ps(if_false, if_true, m); }

inline I LoadI(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline I Set1I(int32_t x) { return _mm256_set1_epi32(x); }
inline I AddI(I a, I b) { return _mm256_add_epi32(a, b); }
inline I MulI(I a, I b) { return _mm256_mullo_epi32(a, b); }
inline I CvtFI(F a) { return _mm256_cvttps_epi32(a); }
inline F GatherF(const float* base, I idx) { return _mm256_i32gather_ps(base, idx, 4); }
// No two-source permute over 8 lanes: GatherTaps keeps the hardware gather here. The
// primitives exist only so the shared body compiles; they are never called.
constexpr bool kHasWindowGather = false;
inline int32_t ReduceMinI(I) { return 0; }
inline int32_t ReduceMaxI(I) { return 0; }
inline I SubI(I a, I b) { return _mm256_sub_epi32(a, b); }
inline F LoadPrefixF(const float* p, int) { return LoadF(p); }
inline F Permute2F(F lo, I, F) { return lo; }

inline F LoadU8F(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline void StoreU8(uint8_t* p, F v) {
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
  const __m256i i = _mm256_cvtps_epi32(v);
  const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w16, w16));
}
inline void StoreBF16(uint16_t* p, F v) {
  __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  u = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)));
}

// 8 RGB pixels (24 floats) <-> three channel vectors: one in-lane-agnostic permute per
// source register, then blends pick the register each lane comes from.
struct Rgb3Tables {
  alignas(32) int32_t de_idx[3][8] = {}, in_idx[3][8] = {};
  alignas(32) int32_t de_from1[3][8] = {}, de_from2[3][8] = {}, in_g[3][8] = {}, in_b[3][8] = {};
  // constexpr: built by the compiler, so no AVX code runs at static initialisation.
  constexpr Rgb3Tables() {
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 8; ++i) {
        const int p = 3 * i + k;
        de_idx[k][i] = p % 8;
        de_from1[k][i] = p / 8 == 1 ? -1 : 0;
        de_from2[k][i] = p / 8 == 2 ? -1 : 0;
      }
    for (int j = 0; j < 3; ++j)
      for (int l = 0; l < 8; ++l) {
        const int p = 8 * j + l;
        in_idx[j][l] = p / 3;
        in_g[j][l] = p % 3 == 1 ? -1 : 0;
        in_b[j][l] = p % 3 == 2 ? -1 : 0;
      }
  }
};
constexpr Rgb3Tables kRgb3;

inline __m256 MaskOf(const int32_t* m) { return _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(m))); }
inline __m256i IdxOf(const int32_t* m) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(m)); }

inline void Deinterleave3(const float* p, F* r, F* g, F* b) {
  const F a = _mm256_loadu_ps(p), bb = _mm256_loadu_ps(p + 8), c = _mm256_loadu_ps(p + 16);
  F* out[3] = {r, g, b};
  for (int k = 0; k < 3; ++k) {
    const __m256i idx = IdxOf(kRgb3.de_idx[k]);
    F v = _mm256_permutevar8x32_ps(a, idx);
    v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(bb, idx), MaskOf(kRgb3.de_from1[k]));
    *out[k] = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(c, idx), MaskOf(kRgb3.de_from2[k]));
  }
}
inline void Interleave3(float* p, F r, F g, F b) {
  for (int j = 0; j < 3; ++j) {
    const __m256i idx = IdxOf(kRgb3.in_idx[j]);
    F v = _mm256_permutevar8x32_ps(r, idx);
    v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(g, idx), MaskOf(kRgb3.in_g[j]));
    _mm256_storeu_ps(p + 8 * j, _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(b, idx), MaskOf(kRgb3.in_b[j])));
  }
}

}  // namespace

#include "strata/image/kernels_body.inc"

}  // namespace strata::image::kernels::avx2

STRATA_ISA_REGION_END

namespace strata::image::kernels {
const KernelTable kAvx2Table = {
    Isa::kAvx2,         avx2::BlendRowsU8,    avx2::GatherTaps,    avx2::Gather,
    avx2::AffineF32,    avx2::AffineF32ToBF16, avx2::AffineU8ToF32, avx2::AffineU8ToBF16,
    avx2::ChannelSums,  avx2::F32ToU8,        avx2::SaturationRgb, avx2::HueRgb,
    avx2::AffineSampleRow,
};
}  // namespace strata::image::kernels
