// A depthwise convolution's weight gradient (and its fused bias gradient) as Strata's own kernel:
// dW[kh, kw, c] = sum over n, oh, ow of dy[n, oh, ow, c] * x[n, oh * sh + kh - pad_top,
// ow * sw + kw - pad_left, c] (zero outside x), db[c] = sum of dy[n, oh, ow, c]. oneDNN 2.6 has
// a jit kernel for this (jit_dw) only for 3x3 and runs every other size as im2col + gemm
// (x64:gemm:jit): EfficientNetB0's 5x5 depthwise convolutions were 34 % of its training step
// (BENCHMARKS.md, "EfficientNetB0"). Planned in ops_conv.cc (PlanConvBackpropFilter).
//
// x and dy are read in oneDNN's channel-blocked nChw16c / nChw8c, the layout the convolutions
// and batch norms of the program already have them in (channels padded to a whole block: the
// padding lanes are computed and never written). The loop vectorises over
// one channel block: for each (n, oh) row and each valid kh, the dy row and the x row stay in
// L1 and each kw accumulates over ow in registers; stride and padding clip the ow range per kw.
// Sums are f32 within an image and f64 across images.
//
// Like broadcast_kernels.h: an AVX-512, an AVX2 and a generic body of one loop; the default
// picks the widest that HostIsa() allows (STRATA_MAX_ISA caps it).
#pragma once

#include <cstdint>

#include "strata/backend/cpu/kernel_isa.h"

namespace strata::backend::cpu {

// Where element (n, c, h, w) of an [N, H, W, C] tensor lies, in elements from its start:
// n * n_stride + (c / block) * block_stride + h * h_stride + w * block + c % block (a row's
// pixels are one block apart).
struct ChannelBlocks {
  int block = 16;  // 8 or 16
  int64_t n_stride = 0, block_stride = 0, h_stride = 0;
};
// oneDNN's nChw16c (block 16) or nChw8c (block 8), channels padded to a whole block.
ChannelBlocks BlockedChannelBlocks(int64_t h, int64_t w, int64_t c, int block);

struct DepthwiseGeometry {
  int64_t batch = 0, channels = 0;
  int64_t in_h = 0, in_w = 0;    // x [batch, in_h, in_w, channels]
  int64_t out_h = 0, out_w = 0;  // dy [batch, out_h, out_w, channels]
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0;  // dilation 1; the pads after follow from the extents
};

// dw [kernel_h, kernel_w, channels] (the plain bytes of a [KH, KW, 1, C] depthwise kernel)
// and, unless db is null, db [channels]. x and dy must have the same block.
void DepthwiseConvBackwardWeights(const DepthwiseGeometry& g, const float* x, const ChannelBlocks& x_layout,
                                  const float* dy, const ChannelBlocks& dy_layout, float* dw, float* db,
                                  KernelIsa isa = BestKernelIsa());
// The same with x and dy in bf16 (their bits), widened to f32 as they are read (a mixed
// precision program's convolution inputs); the gradients are f32 as above.
void DepthwiseConvBackwardWeightsBf16(const DepthwiseGeometry& g, const uint16_t* x, const ChannelBlocks& x_layout,
                                      const uint16_t* dy, const ChannelBlocks& dy_layout, float* dw, float* db,
                                      KernelIsa isa = BestKernelIsa());

}  // namespace strata::backend::cpu
