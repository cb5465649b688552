#include "strata/backend/cpu/depthwise_kernels.h"

#include <cstdint>
#include <vector>

#include "strata/core/cpu.h"
#include "strata/core/isa_region.h"

namespace strata::backend::cpu {
namespace {

namespace generic {
#include "strata/backend/cpu/depthwise_kernels_body.inc"
}  // namespace generic

namespace avx2 {
STRATA_ISA_VECTORIZED_REGION_BEGIN("avx2,fma")
#include "strata/backend/cpu/depthwise_kernels_body.inc"
STRATA_ISA_REGION_END
}  // namespace avx2

namespace avx512 {
STRATA_ISA_VECTORIZED_REGION_BEGIN("avx512f,avx512vl,avx2,fma")
#include "strata/backend/cpu/depthwise_kernels_body.inc"
STRATA_ISA_REGION_END
}  // namespace avx512

}  // namespace


ChannelBlocks BlockedChannelBlocks(int64_t h, int64_t w, int64_t c, int block) {
  const int64_t blocks = (c + block - 1) / block;
  return {.block = block,
          .n_stride = blocks * h * w * block,
          .block_stride = h * w * block,
          .h_stride = w * block};
}

namespace {

void Dispatch(const DepthwiseGeometry& g, const void* x, const ChannelBlocks& x_layout, const void* dy,
              const ChannelBlocks& dy_layout, bool bf16, float* dw, float* db, KernelIsa isa) {
  if (g.batch <= 0 || g.out_h <= 0 || g.out_w <= 0) {  // nothing to sum: zero gradients
    for (int64_t k = 0; k < g.kernel_h * g.kernel_w * g.channels; ++k) dw[k] = 0;
    if (db != nullptr)
      for (int64_t c = 0; c < g.channels; ++c) db[c] = 0;
    return;
  }
  // Scratch of this thread, 64-byte aligned (a zmm load across two cache lines costs two):
  // img [kh][kw][block] + [block], the ring of padded x rows, a widened bf16 dy row; tot (f64)
  // and the ring's row numbers.
  thread_local std::vector<float> scratch;
  thread_local std::vector<double> tot;
  thread_local std::vector<int64_t> ring_rows;
  const int block = x_layout.block;
  const size_t n = static_cast<size_t>(g.kernel_h) * g.kernel_w * block + block;
  // The columns the kernel reaches, x's padding included: a padded row's width.
  const int64_t padded_w = (g.out_w - 1) * g.stride_w + g.kernel_w;
  const size_t ring_floats = static_cast<size_t>(g.kernel_h * padded_w * block);
  scratch.resize(n + ring_floats + static_cast<size_t>(g.out_w * block) + 16);
  float* img = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
  float* ring = img + n;               // n and ring_floats are multiples of the block: 64-byte
  float* dy_f32 = ring + ring_floats;  // aligned for block 16
  tot.resize(n);
  ring_rows.resize(static_cast<size_t>(g.kernel_h));
#define STRATA_DW_ARGS g, x, x_layout, dy, dy_layout, bf16, dw, db, img, tot.data(), ring, ring_rows.data(), padded_w, dy_f32
  switch (isa) {
    case KernelIsa::kAvx512: return avx512::BackwardWeights(STRATA_DW_ARGS);
    case KernelIsa::kAvx2: return avx2::BackwardWeights(STRATA_DW_ARGS);
    case KernelIsa::kScalar: return generic::BackwardWeights(STRATA_DW_ARGS);
  }
#undef STRATA_DW_ARGS
}

}  // namespace

void DepthwiseConvBackwardWeights(const DepthwiseGeometry& g, const float* x, const ChannelBlocks& x_layout,
                                  const float* dy, const ChannelBlocks& dy_layout, float* dw, float* db,
                                  KernelIsa isa) {
  Dispatch(g, x, x_layout, dy, dy_layout, false, dw, db, isa);
}

void DepthwiseConvBackwardWeightsBf16(const DepthwiseGeometry& g, const uint16_t* x, const ChannelBlocks& x_layout,
                                      const uint16_t* dy, const ChannelBlocks& dy_layout, float* dw, float* db,
                                      KernelIsa isa) {
  Dispatch(g, x, x_layout, dy, dy_layout, true, dw, db, isa);
}

}  // namespace strata::backend::cpu
