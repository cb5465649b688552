// Element-wise arithmetic of Strata's own where oneDNN has no primitive: dropout (its mask is
// a counter-based hash, identical in every backend: backend/dropout_mask.h) and broadcast (a
// gather through precomputed source indices), and sums over contiguous axes, which oneDNN 2.6
// runs as its reference kernel. Planned in ops_eltwise.cc.
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

// y[a, b] = scale * sum_r x[a, r, b]: a reduction over one contiguous run of axes of a plain
// tensor viewed as [A, R, B], accumulated in f64. x [A * R * B], y [A * B].
void SumMiddleAxis(const float* x, int64_t a, int64_t r, int64_t b, double scale, float* y);

}  // namespace strata::backend::cpu
