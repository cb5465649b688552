// AVX-512 (16 float lanes) instance of kernels_body.inc. Chosen at run time when the
// host has AVX-512F; the rest of the library stays generic x86-64.
#include <cstdint>

#include "strata/core/isa_region.h"
#include "strata/image/kernels.h"

STRATA_ISA_REGION_BEGIN("avx512f,avx2,fma")
#include <immintrin.h>

namespace strata::image::kernels::avx512 {
namespace {

using F = __m512;
using I = __m512i;
using M = __mmask16;
constexpr int kLanes = 16;

inline F LoadF(const float* p) { return _mm512_loadu_ps(p); }
inline void StoreF(float* p, F v) { _mm512_storeu_ps(p, v); }
inline F Set1F(float x) { return _mm512_set1_ps(x); }
inline F Add(F a, F b) { return _mm512_add_ps(a, b); }
inline F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
inline F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
inline F Div(F a, F b) { return _mm512_div_ps(a, b); }
inline F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
inline F Min(F a, F b) { return _mm512_min_ps(a, b); }
inline F Max(F a, F b) { return _mm512_max_ps(a, b); }
inline F Floor(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
inline M CmpLt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
inline M CmpGt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline M CmpGe(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
inline M CmpEq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
inline M MaskAnd(M a, M b) { return static_cast<M>(a & b); }
inline F Select(M m, F if_true, F if_false) { return _mm512_mask_blend_ps(m, if_false, if_true); }

inline I LoadI(const int32_t* p) { return _mm512_loadu_si512(p); }
inline I Set1I(int32_t x) { return _mm512_set1_epi32(x); }
inline I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
inline I MulI(I a, I b) { return _mm512_mullo_epi32(a, b); }
inline I CvtFI(F a) { return _mm512_cvttps_epi32(a); }
inline F GatherF(const float* base, I idx) { return _mm512_i32gather_ps(idx, base, 4); }
// Gathers from a window of 2 * kLanes consecutive floats by one two-source permute: far
// cheaper than a hardware gather when a block's taps lie close together (resize ratios
// up to ~2, which DCT-scaled decode always leaves). The loads are masked to the lanes
// [0, count), so nothing past the last tap is read.
constexpr bool kHasWindowGather = true;
inline int32_t ReduceMinI(I a) { return _mm512_reduce_min_epi32(a); }
inline int32_t ReduceMaxI(I a) { return _mm512_reduce_max_epi32(a); }
inline I SubI(I a, I b) { return _mm512_sub_epi32(a, b); }
inline F LoadPrefixF(const float* p, int count) {
  const M m = count >= kLanes ? M(0xffff) : count <= 0 ? M(0) : static_cast<M>((1u << count) - 1);
  return _mm512_maskz_loadu_ps(m, p);
}
inline F Permute2F(F lo, I idx, F hi) { return _mm512_permutex2var_ps(lo, idx, hi); }

inline F LoadU8F(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void StoreU8(uint8_t* p, F v) {
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
}
inline void StoreBF16(uint16_t* p, F v) {  // round to nearest even (finite inputs)
  __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(u));
}

// 16 RGB pixels (48 floats) <-> three channel vectors, by two-source permutes.
struct Rgb3Tables {
  alignas(64) int32_t de1[3][16] = {}, de2[3][16] = {}, in1[3][16] = {}, in2[3][16] = {};
  // constexpr: built by the compiler, so no AVX code runs at static initialisation.
  constexpr Rgb3Tables() {
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 16; ++i) {
        const int p = 3 * i + k;  // element i of channel k sits at flat position p
        de1[k][i] = p < 32 ? p : 0;
        de2[k][i] = p < 32 ? i : 16 + (p - 32);
      }
    for (int j = 0; j < 3; ++j)
      for (int l = 0; l < 16; ++l) {
        const int p = 16 * j + l, ch = p % 3, px = p / 3;
        in1[j][l] = ch == 0 ? px : ch == 1 ? 16 + px : 0;
        in2[j][l] = ch == 2 ? 16 + px : l;
      }
  }
};
constexpr Rgb3Tables kRgb3;

inline void Deinterleave3(const float* p, F* r, F* g, F* b) {
  const F a = _mm512_loadu_ps(p), bb = _mm512_loadu_ps(p + 16), c = _mm512_loadu_ps(p + 32);
  F* out[3] = {r, g, b};
  for (int k = 0; k < 3; ++k) {
    const F t = _mm512_permutex2var_ps(a, _mm512_load_si512(kRgb3.de1[k]), bb);
    *out[k] = _mm512_permutex2var_ps(t, _mm512_load_si512(kRgb3.de2[k]), c);
  }
}
inline void Interleave3(float* p, F r, F g, F b) {
  for (int j = 0; j < 3; ++j) {
    const F t = _mm512_permutex2var_ps(r, _mm512_load_si512(kRgb3.in1[j]), g);
    _mm512_storeu_ps(p + 16 * j, _mm512_permutex2var_ps(t, _mm512_load_si512(kRgb3.in2[j]), b));
  }
}

}  // namespace

#include "strata/image/kernels_body.inc"

}  // namespace strata::image::kernels::avx512

STRATA_ISA_REGION_END

namespace strata::image::kernels {
const KernelTable kAvx512Table = {
    Isa::kAvx512,         avx512::BlendRowsU8,   avx512::GatherTaps,    avx512::Gather,
    avx512::AffineF32,    avx512::AffineF32ToBF16, avx512::AffineU8ToF32, avx512::AffineU8ToBF16,
    avx512::ChannelSums,  avx512::F32ToU8,       avx512::SaturationRgb, avx512::HueRgb,
    avx512::AffineSampleRow,
};
}  // namespace strata::image::kernels
