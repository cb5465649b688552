// AVX-512 (F + BW) instance of the ycc.h kernels: 32 chroma columns (64 output pixels)
// per upsampling step, 16 pixels per colour step in 32-bit lanes (the products need 24
// bits, so the arithmetic is jdcolor.c's, exactly).
#include <cstdint>

#include "strata/image/ycc.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"       // GCC 12 false positives inside immintrin.h
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx2")
#endif
#include <immintrin.h>

namespace strata::image::ycc {
namespace {

inline __m512i Widen(const uint8_t* p) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512i ColSum(const uint8_t* near, const uint8_t* far) {  // 3 * near + far
  const __m512i n = Widen(near);
  return _mm512_add_epi16(_mm512_add_epi16(_mm512_add_epi16(n, n), n), Widen(far));
}

void FancyH2V2Row(const uint8_t* near, const uint8_t* far, int cw, uint8_t* out) {
  const __m512i c8 = _mm512_set1_epi16(8), c7 = _mm512_set1_epi16(7);
  for (int j = 0; j < cw; j += 32) {
    const __m512i left = ColSum(near + j - 1, far + j - 1);
    const __m512i mid = ColSum(near + j, far + j);
    const __m512i right = ColSum(near + j + 1, far + j + 1);
    const __m512i mid3 = _mm512_add_epi16(_mm512_add_epi16(mid, mid), mid);
    const __m512i even = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(mid3, left), c8), 4);
    const __m512i odd = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(mid3, right), c7), 4);
    // Both are 0..255: the 16-bit lane even | odd << 8 is the two output bytes in order.
    _mm512_storeu_si512(out + 2 * j, _mm512_or_si512(even, _mm512_slli_epi16(odd, 8)));
  }
}

inline __m512i Widen32(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void YccToRgbRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb) {
  const __m512i c128 = _mm512_set1_epi32(128), half = _mm512_set1_epi32(32768);
  const __m512i k_rr = _mm512_set1_epi32(91881), k_bb = _mm512_set1_epi32(116130);
  const __m512i k_gb = _mm512_set1_epi32(-22554), k_gr = _mm512_set1_epi32(-46802);
  const __m512i zero = _mm512_setzero_si512(), max = _mm512_set1_epi32(255);
  // Per 128-bit lane: bytes 0-2 of each 32-bit pixel (R, G, B), then 4 zero bytes.
  const __m512i pack = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
  // The four lanes' 12 bytes (3 dwords each) moved together: 48 bytes.
  const __m512i gather = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 15, 15, 15, 15);
  for (int i = 0; i < n; i += 16) {
    const __m512i yy = Widen32(y + i);
    const __m512i xb = _mm512_sub_epi32(Widen32(cb + i), c128);
    const __m512i xr = _mm512_sub_epi32(Widen32(cr + i), c128);
    __m512i r = _mm512_srai_epi32(_mm512_add_epi32(_mm512_mullo_epi32(xr, k_rr), half), 16);
    __m512i g = _mm512_srai_epi32(
        _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(xb, k_gb), _mm512_mullo_epi32(xr, k_gr)), half), 16);
    __m512i b = _mm512_srai_epi32(_mm512_add_epi32(_mm512_mullo_epi32(xb, k_bb), half), 16);
    r = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(yy, r), zero), max);
    g = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(yy, g), zero), max);
    b = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(yy, b), zero), max);
    const __m512i px = _mm512_or_si512(_mm512_or_si512(r, _mm512_slli_epi32(g, 8)), _mm512_slli_epi32(b, 16));
    const __m512i out = _mm512_permutexvar_epi32(gather, _mm512_shuffle_epi8(px, pack));
    const int left = n - i < 16 ? n - i : 16;
    const __mmask64 m = left == 16 ? __mmask64{0xFFFFFFFFFFFFull} : (__mmask64{1} << (3 * left)) - 1;
    _mm512_mask_storeu_epi8(rgb + 3 * i, m, out);
  }
}

}  // namespace

const YccKernels kAvx512Ycc = {kernels::Isa::kAvx512, FancyH2V2Row, YccToRgbRow};

}  // namespace strata::image::ycc

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
