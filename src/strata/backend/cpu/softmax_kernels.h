// Keras's masked softmax (attention's), and every softmax's gradient, as Strata's own row kernels.
// The masked softmax is one pass per row: oneDNN 2.6 has no
// masked softmax, and as a binary add of the mask's -1e9 then its softmax it wrote and read every
// score once more. A row of scores (a query's, one head's: a few hundred) stays in L1 through its
// three sweeps (masked maximum, exponentials and their sum, scaling). The exponential is Strata's
// own polynomial (fast_exp.h), so the loops vectorise.
#pragma once

#include <cstdint>

#include "strata/backend/cpu/kernel_isa.h"

namespace strata::backend::cpu {

// x, y [B, G, T, S] row-major (G: the axes between the batch and the last two, the heads), mask
// [B, T, S]: y = softmax(x + (1 - mask) * -1e9) over S, row (b, g, t) taking mask row (b, t).
void MaskedSoftmax(const float* x, const float* mask, int64_t B, int64_t G, int64_t T, int64_t S, float* y,
                   KernelIsa isa = BestKernelIsa());

// softmax(x) over the last axis, `rows` rows of S, row-major: the same row kernel without a mask,
// so a masked and an unmasked attention compute alike (as fast as oneDNN 2.6's softmax on
// ViT-S/16's rows of 197: 30 against 33 ms a step, traced).
void Softmax(const float* x, int64_t rows, int64_t S, float* y, KernelIsa isa = BestKernelIsa());

// The gradient of a softmax over the last axis from its output: dx = y * (dy - sum(y * dy)) per
// row of S, for `rows` rows, row-major. oneDNN 2.6 has this only for AVX-512 (its reference kernel
// elsewhere: Zen 3 would run every attention's backward there).
void SoftmaxBackward(const float* y, const float* dy, int64_t rows, int64_t S, float* dx,
                     KernelIsa isa = BestKernelIsa());

}  // namespace strata::backend::cpu
