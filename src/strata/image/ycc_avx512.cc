// AVX-512 (F + BW) instance of the ycc.h kernels: 32 chroma columns (64 output pixels)
// per upsampling step, 32 pixels per colour step in 16-bit lanes (jdcolor.c's integer
// results exactly; see YccToRgbRow).
#include <cstdint>

#include "strata/core/isa_region.h"
#include "strata/image/ycc.h"

STRATA_ISA_REGION_BEGIN("avx512f,avx512bw,avx2")
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

void FancyH2V1Row(const uint8_t* in, int cw, uint8_t* out) {
  const __m512i c1 = _mm512_set1_epi16(1), c2 = _mm512_set1_epi16(2);
  for (int j = 0; j < cw; j += 32) {
    const __m512i left = Widen(in + j - 1), mid = Widen(in + j), right = Widen(in + j + 1);
    const __m512i mid3 = _mm512_add_epi16(_mm512_add_epi16(mid, mid), mid);
    const __m512i even = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(mid3, left), c1), 2);
    const __m512i odd = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(mid3, right), c2), 2);
    _mm512_storeu_si512(out + 2 * j, _mm512_or_si512(even, _mm512_slli_epi16(odd, 8)));
  }
}

inline __m512i Widen16(const uint8_t* p) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// floor((k * x + 32768) / 65536) for 16-bit x and k: the high half of the 32-bit product
// plus the top bit of its low half (the low half + 32768 carries exactly when that bit is set).
inline __m512i MulRound16(__m512i x, __m512i k) {
  return _mm512_add_epi16(_mm512_mulhi_epi16(x, k), _mm512_srli_epi16(_mm512_mullo_epi16(x, k), 15));
}

// 32 pixels per step in 16-bit lanes. jdcolor.c's constants do not fit 16 bits, so each is
// split into a multiple of 65536 (a plain add of x) and a 16-bit rest:
//   (91881 x + 32768) >> 16   =  x + MulRound16(x, 26345)
//   (116130 x + 32768) >> 16  = 2x + MulRound16(x, -14942)
//   (-22554 xb - 46802 xr + 32768) >> 16 = -xr + ((-22554 xb + 18734 xr + 32768) >> 16),
// the last from vpmaddwd on (xb, xr) pairs in 32-bit lanes. All exact.
void YccToRgbRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb) {
  const __m512i c128 = _mm512_set1_epi16(128), zero = _mm512_setzero_si512(), max = _mm512_set1_epi16(255);
  const __m512i k_r = _mm512_set1_epi16(26345), k_b = _mm512_set1_epi16(-14942);
  const __m512i k_g = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint16_t>(-22554) | (18734u << 16)));
  const __m512i half = _mm512_set1_epi32(32768);
  // Per 128-bit lane: bytes 0-2 of each 32-bit RGB0 pixel, then 4 zero bytes.
  const __m512i pack = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
  // unpacklo/hi put pixels 8k..8k+3 in lane k of `lo` and 8k+4..8k+7 in lane k of `hi`;
  // after `pack` each lane's first 3 dwords hold them. Dword order of the 96 output bytes:
  const __m512i order_a = _mm512_setr_epi32(0, 1, 2, 16, 17, 18, 4, 5, 6, 20, 21, 22, 8, 9, 10, 24);
  const __m512i order_b = _mm512_setr_epi32(25, 26, 12, 13, 14, 28, 29, 30, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int i = 0; i < n; i += 32) {
    const __m512i yy = Widen16(y + i);
    const __m512i xb = _mm512_sub_epi16(Widen16(cb + i), c128);
    const __m512i xr = _mm512_sub_epi16(Widen16(cr + i), c128);
    __m512i r = _mm512_add_epi16(xr, MulRound16(xr, k_r));
    __m512i b = _mm512_add_epi16(_mm512_add_epi16(xb, xb), MulRound16(xb, k_b));
    const __m512i glo =
        _mm512_srai_epi32(_mm512_add_epi32(_mm512_madd_epi16(_mm512_unpacklo_epi16(xb, xr), k_g), half), 16);
    const __m512i ghi =
        _mm512_srai_epi32(_mm512_add_epi32(_mm512_madd_epi16(_mm512_unpackhi_epi16(xb, xr), k_g), half), 16);
    __m512i g = _mm512_sub_epi16(_mm512_packs_epi32(glo, ghi), xr);  // packs undoes the unpack order
    r = _mm512_min_epi16(_mm512_max_epi16(_mm512_add_epi16(yy, r), zero), max);
    g = _mm512_min_epi16(_mm512_max_epi16(_mm512_add_epi16(yy, g), zero), max);
    b = _mm512_min_epi16(_mm512_max_epi16(_mm512_add_epi16(yy, b), zero), max);
    const __m512i rg = _mm512_or_si512(r, _mm512_slli_epi16(g, 8));
    const __m512i lo = _mm512_shuffle_epi8(_mm512_unpacklo_epi16(rg, b), pack);
    const __m512i hi = _mm512_shuffle_epi8(_mm512_unpackhi_epi16(rg, b), pack);
    const __m512i out_a = _mm512_permutex2var_epi32(lo, order_a, hi);  // bytes 0..63
    const __m512i out_b = _mm512_permutex2var_epi32(lo, order_b, hi);  // bytes 64..95
    const int bytes = 3 * (n - i < 32 ? n - i : 32);
    if (bytes == 96) {
      _mm512_storeu_si512(rgb + 3 * i, out_a);
      _mm512_mask_storeu_epi8(rgb + 3 * i + 64, __mmask64{0xFFFFFFFFull}, out_b);
    } else {
      const int first = bytes < 64 ? bytes : 64;
      _mm512_mask_storeu_epi8(rgb + 3 * i, first == 64 ? ~__mmask64{0} : (__mmask64{1} << first) - 1, out_a);
      if (bytes > 64) _mm512_mask_storeu_epi8(rgb + 3 * i + 64, (__mmask64{1} << (bytes - 64)) - 1, out_b);
    }
  }
}

}  // namespace

const YccKernels kAvx512Ycc = {kernels::Isa::kAvx512, FancyH2V2Row, FancyH2V1Row, YccToRgbRow};

}  // namespace strata::image::ycc

STRATA_ISA_REGION_END
