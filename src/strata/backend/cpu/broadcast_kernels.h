// Element-wise kernels over a tensor and a second one broadcast along a contiguous run of its
// axes, both plain, viewed as [A, R, B] against [A, 1, B]: squeeze-and-excitation's scale
// ([N, H, W, C] * [N, 1, 1, C]: A = N, R = H * W, B = C), drop-connect's per-example mask
// ([N, H, W, C] * [N, 1, 1, 1]: A = N, R = H * W * C, B = 1) and a global average pool's
// gradient (dy [N, C] spread over H * W). oneDNN 2.6 runs the first two as its reference binary
// and the last as its reference pooling backward for large windows, at ~100-400 ns an element:
// 84 % of an EfficientNetB0 training step (BENCHMARKS.md, "EfficientNetB0"). Planned in
// ops_elementwise.cc, ops_reduce.cc and ops_pool.cc.
//
// Each kernel has an AVX-512, an AVX2 and a generic body (the same loop compiled for each
// target); the default picks the widest that HostIsa() allows (STRATA_MAX_ISA caps it).
#pragma once

#include <cstdint>

#include "strata/backend/cpu/kernel_isa.h"

namespace strata::backend::cpu {

// y[i, j, k] = x[i, j, k] * s[i, k]. x, y [a * r * b] (y may be x), s [a * b].
void MultiplyBroadcastMiddle(const float* x, const float* s, int64_t a, int64_t r, int64_t b, float* y,
                             KernelIsa isa = BestKernelIsa());

// y[i, j, k] = scale * s[i, k]. s [a * b], y [a * r * b].
void BroadcastMiddle(const float* s, int64_t a, int64_t r, int64_t b, float scale, float* y,
                     KernelIsa isa = BestKernelIsa());

// y[i, k] = scale * sum_j x[i, j, k], accumulated in f64: the reverse of BroadcastMiddle (a
// ReduceSum / ReduceMean over one contiguous run of axes; squeeze-and-excitation's factor
// gradient over H * W). x [a * r * b], y [a * b].
void SumMiddle(const float* x, int64_t a, int64_t r, int64_t b, double scale, float* y,
               KernelIsa isa = BestKernelIsa());

}  // namespace strata::backend::cpu
