// AVX2 instance of the ycc.h kernels: 16 chroma columns (32 output pixels) per
// upsampling step, 8 pixels per colour step in 32-bit lanes (jdcolor.c's arithmetic).
#include <cstdint>
#include <cstring>

#include "strata/core/isa_region.h"
#include "strata/image/ycc.h"

STRATA_ISA_REGION_BEGIN("avx2")
#include <immintrin.h>

namespace strata::image::ycc {
namespace {

inline __m256i Widen(const uint8_t* p) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i ColSum(const uint8_t* near, const uint8_t* far) {  // 3 * near + far
  const __m256i n = Widen(near);
  return _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(n, n), n), Widen(far));
}

void FancyH2V2Row(const uint8_t* near, const uint8_t* far, int cw, uint8_t* out) {
  const __m256i c8 = _mm256_set1_epi16(8), c7 = _mm256_set1_epi16(7);
  for (int j = 0; j < cw; j += 16) {
    const __m256i left = ColSum(near + j - 1, far + j - 1);
    const __m256i mid = ColSum(near + j, far + j);
    const __m256i right = ColSum(near + j + 1, far + j + 1);
    const __m256i mid3 = _mm256_add_epi16(_mm256_add_epi16(mid, mid), mid);
    const __m256i even = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(mid3, left), c8), 4);
    const __m256i odd = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(mid3, right), c7), 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * j), _mm256_or_si256(even, _mm256_slli_epi16(odd, 8)));
  }
}

void FancyH2V1Row(const uint8_t* in, int cw, uint8_t* out) {
  const __m256i c1 = _mm256_set1_epi16(1), c2 = _mm256_set1_epi16(2);
  for (int j = 0; j < cw; j += 16) {
    const __m256i left = Widen(in + j - 1), mid = Widen(in + j), right = Widen(in + j + 1);
    const __m256i mid3 = _mm256_add_epi16(_mm256_add_epi16(mid, mid), mid);
    const __m256i even = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(mid3, left), c1), 2);
    const __m256i odd = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(mid3, right), c2), 2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * j), _mm256_or_si256(even, _mm256_slli_epi16(odd, 8)));
  }
}

inline __m256i Widen32(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

void YccToRgbRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb) {
  const __m256i c128 = _mm256_set1_epi32(128), half = _mm256_set1_epi32(32768);
  const __m256i k_rr = _mm256_set1_epi32(91881), k_bb = _mm256_set1_epi32(116130);
  const __m256i k_gb = _mm256_set1_epi32(-22554), k_gr = _mm256_set1_epi32(-46802);
  const __m256i zero = _mm256_setzero_si256(), max = _mm256_set1_epi32(255);
  const __m256i pack = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i gather = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
  for (int i = 0; i < n; i += 8) {
    const __m256i yy = Widen32(y + i);
    const __m256i xb = _mm256_sub_epi32(Widen32(cb + i), c128);
    const __m256i xr = _mm256_sub_epi32(Widen32(cr + i), c128);
    __m256i r = _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(xr, k_rr), half), 16);
    __m256i g = _mm256_srai_epi32(
        _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(xb, k_gb), _mm256_mullo_epi32(xr, k_gr)), half), 16);
    __m256i b = _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(xb, k_bb), half), 16);
    r = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(yy, r), zero), max);
    g = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(yy, g), zero), max);
    b = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(yy, b), zero), max);
    const __m256i px = _mm256_or_si256(_mm256_or_si256(r, _mm256_slli_epi32(g, 8)), _mm256_slli_epi32(b, 16));
    const __m256i out = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(px, pack), gather);  // 24 bytes
    if (n - i >= 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(rgb + 3 * i), _mm256_castsi256_si128(out));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(rgb + 3 * i + 16), _mm256_extracti128_si256(out, 1));
    } else {
      alignas(32) uint8_t tail[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tail), out);
      std::memcpy(rgb + 3 * i, tail, 3 * static_cast<size_t>(n - i));
    }
  }
}

}  // namespace

const YccKernels kAvx2Ycc = {kernels::Isa::kAvx2, FancyH2V2Row, FancyH2V1Row, YccToRgbRow};

}  // namespace strata::image::ycc

STRATA_ISA_REGION_END
