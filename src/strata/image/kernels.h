// The hand-vectorised inner loops of the image transforms, behind one table of function
// pointers chosen once at run time (AVX-512, AVX2, or the plain scalar reference).
//
// Everything here works on flat float arrays of interleaved channels (HWC rows, values on
// the 0..255 scale) so each kernel is a short loop; the transforms in resize.h, color.h,
// flip.h, rotate.h and normalize.h build the tables and call these. The scalar table is
// the reference the tests hold the vector tables to (kernels_test.cc); `KernelsFor`
// returns nullptr for an ISA this host lacks. STRATA_IMAGE_ISA=scalar|avx2|avx512 forces
// a table (for benchmarks and bisecting), clamped to what the host supports.
#pragma once

#include <cstdint>

namespace strata::image::kernels {

enum class Isa { kScalar, kAvx2, kAvx512 };
const char* IsaName(Isa isa);

struct KernelTable {
  Isa isa;
  // out[i] = sum_k weights[k] * rows[k][i], i < n. u8 rows in, f32 out.        // [n]
  void (*blend_rows_u8)(const uint8_t* const* rows, const float* weights, int taps, int64_t n, float* out);
  // out[j] = sum_k weights[k * n + j] * in[first[j] + k * stride], j < n.       // [n]
  // `in` must be readable (and finite) up to first[j] + (taps - 1) * stride.
  void (*gather_taps)(const float* in, const int32_t* first, const float* weights, int taps, int stride, int64_t n,
                      float* out);
  // out[j] = in[index[j]].
  void (*gather)(const float* in, const int32_t* index, int64_t n, float* out);
  // x[i] = x[i] * scale[i % C] + bias[i % C] over n pixels of C (1..4) channels, in place.
  void (*affine_f32)(float* x, int64_t pixels, int channels, const float* scale, const float* bias);
  // out = in * scale + bias, cast to bf16 (round to nearest even).
  void (*affine_f32_to_bf16)(const float* in, int64_t pixels, int channels, const float* scale, const float* bias,
                             uint16_t* out);
  // out = u8 in * scale + bias, as f32.
  void (*affine_u8_to_f32)(const uint8_t* in, int64_t pixels, int channels, const float* scale, const float* bias,
                           float* out);
  void (*affine_u8_to_bf16)(const uint8_t* in, int64_t pixels, int channels, const float* scale, const float* bias,
                            uint16_t* out);
  // sums[c] += sum over pixels of x[p * C + c].
  void (*channel_sums)(const float* x, int64_t pixels, int channels, double* sums);
  // out[i] = saturate_u8(round_half_even(in[i])).
  void (*f32_to_u8)(const float* in, int64_t n, uint8_t* out);
  // RGB pixels in place: scale HSV saturation by factor (>= 0), clip S to [0, 1].
  void (*saturation_rgb)(float* rgb, int64_t pixels, float factor);
  // RGB pixels in place: rotate HSV hue by delta turns (delta in [-1, 1]).
  void (*hue_rgb)(float* rgb, int64_t pixels, float delta);
  // One output row of an affine resampling (rotation): pixel x samples src at
  // (sy0 + x * dy, sx0 + x * dx) bilinearly, pixel centres on integers; samples outside
  // the image read `fill[c]`.                                                     // [n, C]
  void (*affine_sample_row)(const float* src, int height, int width, int channels, float sy0, float sx0, float dy,
                            float dx, int n, const float* fill, float* out);
};

const KernelTable& Kernels();            // the best for this host (or STRATA_IMAGE_ISA)
const KernelTable* KernelsFor(Isa isa);  // nullptr when the host cannot run it
const KernelTable& ScalarKernels();

// Defined in kernels_avx512.cc / kernels_avx2.cc / kernels_scalar.cc.
extern const KernelTable kAvx512Table;
extern const KernelTable kAvx2Table;
extern const KernelTable kScalarTable;

}  // namespace strata::image::kernels
