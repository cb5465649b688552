// Loss arithmetic of Strata's own (oneDNN has no loss primitives): softmax cross-entropy with
// label smoothing and mean squared error, each a mean, with its gradient. Planned in ops_loss.cc.
#pragma once

#include <cstdint>

#include "strata/core/status.h"

namespace strata::backend::cpu {

// Softmax cross-entropy against labels smoothed by `smoothing` (target q = (1 - s) one-hot +
// s / classes), averaged over rows; keeps the probabilities, from which the gradient is one pass.
// logits [rows, classes], labels [rows] in [0, classes) -> probs [rows, classes], *loss [].
// A label outside [0, classes) is InvalidArgument ("label 12 of example 3 is outside [0, 10)"),
// with probs written up to that row.
Status SoftmaxCrossEntropyForward(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                                  float smoothing, float* probs, float* loss);

// dlogits = (probs - q) * dloss / rows. probs [rows, classes], labels [rows] -> dlogits [rows, classes].
void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, int64_t rows, int64_t classes,
                                 float smoothing, float dloss, float* dlogits);

// mean((a - b)^2), summed in f64. a, b [count].
float MeanSquaredError(const float* a, const float* b, int64_t count);

// da = 2 (a - b) * dloss / count. a, b, da [count].
void MeanSquaredErrorBackward(const float* a, const float* b, int64_t count, float dloss, float* da);

}  // namespace strata::backend::cpu
