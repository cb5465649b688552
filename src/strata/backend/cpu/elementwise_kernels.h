// Element-wise arithmetic of Strata's own where oneDNN has no primitive: dropout (its mask is
// a counter-based hash, identical in every backend: backend/dropout_mask.h) and broadcast (a
// gather through precomputed source indices). Sums over contiguous axes, which oneDNN 2.6
// runs as its reference kernel, are in broadcast_kernels.h. Planned in ops_elementwise.cc and ops_reduce.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/core/shape.h"

namespace strata::backend::cpu {

// Inverted dropout of step `step`: mask[e] = 0 where DropoutUniform(seed, step, e) < rate, else
// 1 / (1 - rate); y = x * mask. x, y, mask [count].
void DropoutForward(const float* x, int64_t count, float rate, uint64_t seed, uint64_t step, float* y, float* mask);

// The source index of every element of `out` broadcast along `axes` from the shape with those
// axes removed: computed once at compile time, so a step does no shape work. -> [out elements].
std::vector<int32_t> BroadcastSourceIndex(const Shape& out, const std::vector<int>& axes);

// y[e] = x[index[e]]. index, y [count].
void Gather(const float* x, const int32_t* index, int64_t count, float* y);

}  // namespace strata::backend::cpu
