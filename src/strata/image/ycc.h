// Chroma upsampling and YCbCr -> RGB for 4:2:0 and 4:2:2 JPEGs, bit-exact with libjpeg-turbo.
//
// libjpeg-turbo's full decode of a 4:2:0 file spends ~19 % of its time in two passes
// after the IDCT: "fancy" h2v2 upsampling (jdsample.c, a triangle filter) and colour
// conversion (jdcolor.c). DecodeJpeg instead takes the Y, Cb, Cr planes from
// tjDecompressToYUVPlanes (entropy decoding + IDCT only) and runs both steps here in one
// pass per output row, vectorised, producing the same bytes:
//
//   chroma column sums   s[j] = 3 * near[j] + far[j]   (near: the chroma row of this
//                        output row, far: the one above for even rows, below for odd;
//                        rows past the top or bottom repeat the edge row)
//   output columns       u[2j]   = (3 * s[j] + s[j-1] + 8) >> 4
//                        u[2j+1] = (3 * s[j] + s[j+1] + 7) >> 4   (s[-1] = s[0], s[cw] = s[cw-1])
//   colour (x = c - 128) R = clamp(Y + ((91881 * xr + 32768) >> 16))
//                        G = clamp(Y + ((-22554 * xb - 46802 * xr + 32768) >> 16))
//                        B = clamp(Y + ((116130 * xb + 32768) >> 16))
//
// 4:2:2 (h2v1, one chroma row per output row): u[2j] = (3 * c[j] + c[j-1] + 1) >> 2,
// u[2j+1] = (3 * c[j] + c[j+1] + 2) >> 2, edges repeated the same way.
//
// (91881 = FIX(1.40200), 116130 = FIX(1.77200), 22554 = FIX(0.34414), 46802 =
// FIX(0.71414) with SCALEBITS = 16.) libjpeg-turbo uses this filter only for chroma rows
// wider than 2 samples; narrower ones take the box filter, and DecodeJpeg leaves such
// images to tjDecompress2.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/image/kernels.h"

namespace strata::image::ycc {

// Padding the vector kernels may read or write past the logical end of a row.
inline constexpr int kRowPad = 64;

struct YccKernels {
  kernels::Isa isa;
  // One upsampled chroma row: out[0, 2 * cw) from chroma rows `near` and `far` of cw
  // samples.                                                               // [2 * cw]
  // Vector versions read near/far from index -1 to cw + kRowPad and expect near[-1] ==
  // near[0], near[cw] == near[cw - 1] (same for far); they may write out up to
  // 2 * cw + kRowPad. The scalar version reads [0, cw) only.
  void (*fancy_h2v2_row)(const uint8_t* near, const uint8_t* far, int cw, uint8_t* out);
  // The same for 4:2:2: out[0, 2 * cw) from one chroma row, same padding rules.  // [2 * cw]
  void (*fancy_h2v1_row)(const uint8_t* in, int cw, uint8_t* out);
  // n pixels of Y, Cb, Cr (full resolution) to interleaved RGB.           // [n, 3]
  // Reads y/cb/cr up to n + kRowPad; writes exactly 3 * n bytes.
  void (*ycc_to_rgb_row)(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb);
};

const YccKernels& Kernels();            // the best for this host (STRATA_IMAGE_ISA caps it)
const YccKernels* KernelsFor(kernels::Isa isa);  // nullptr when the host cannot run it
const YccKernels& ScalarKernels();

// The planes of a 4:2:0 or 4:2:2 image as tjDecompressToYUVPlanes writes them.
struct YccPlanes {
  const uint8_t* y;       // [height, width], row stride y_stride
  const uint8_t* cb;      // [ceil(height / 2) (4:2:2: height), ceil(width / 2)], row stride c_stride
  const uint8_t* cr;
  ptrdiff_t y_stride;
  ptrdiff_t c_stride;
};

// Fancy-upsampled RGB of the whole image into rgb ([height, width, 3], row stride
// rgb_stride). Needs ceil(width / 2) > 2. With vector kernels the chroma rows must carry
// the edge copies and padding described above (YccPlaneBuffers arranges it), and the Y
// rows must be readable to width + kRowPad. `scratch` holds two upsampled chroma rows:
// YccScratchBytes(width), 64-byte aligned.
size_t YccScratchBytes(int width);
void Ycc420ToRgb(const YccPlanes& planes, int height, int width, uint8_t* rgb, ptrdiff_t rgb_stride,
                 const YccKernels& k, uint8_t* scratch);
// The 4:2:2 twin (chroma rows = height), same requirements.
void Ycc422ToRgb(const YccPlanes& planes, int height, int width, uint8_t* rgb, ptrdiff_t rgb_stride,
                 const YccKernels& k, uint8_t* scratch);

// Per-thread storage for the three planes with the layout Ycc420ToRgb's vector kernels
// need; grows only, so decoding many images of one size allocates once.
class YccPlaneBuffers {
 public:
  // Lays out buffers for an image of height x width, chroma at half height (4:2:0) or
  // full height (4:2:2); false when out of memory.
  bool Reset(int height, int width, bool chroma_half_height = true);
  uint8_t* plane(int i) { return base_[i]; }
  int stride(int i) const { return i == 0 ? static_cast<int>(y_stride_) : static_cast<int>(c_stride_); }
  // Copies each chroma row's first and last sample one place outwards (index -1 and cw).
  void ReplicateChromaEdges();
  YccPlanes planes() const { return {base_[0], base_[1], base_[2], y_stride_, c_stride_}; }
  uint8_t* scratch() { return blocks_[3].p; }  // YccScratchBytes(width)
  void Release();  // frees the buffers (after an unusually large image)

 private:
  struct Block {
    uint8_t* p = nullptr;
    size_t size = 0;
  };
  bool Grow(Block* b, size_t size);
  Block blocks_[4];  // Y, Cb, Cr, upsampling scratch
  uint8_t* base_[3] = {nullptr, nullptr, nullptr};
  ptrdiff_t y_stride_ = 0, c_stride_ = 0;
  int ch_ = 0, cw_ = 0;

 public:
  YccPlaneBuffers() = default;
  YccPlaneBuffers(const YccPlaneBuffers&) = delete;
  YccPlaneBuffers& operator=(const YccPlaneBuffers&) = delete;
  ~YccPlaneBuffers();
};

// Defined in ycc_avx512.cc / ycc_avx2.cc / ycc.cc.
extern const YccKernels kAvx512Ycc;
extern const YccKernels kAvx2Ycc;
extern const YccKernels kScalarYcc;

}  // namespace strata::image::ycc
