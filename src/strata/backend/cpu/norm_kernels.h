// Batch-norm arithmetic of Strata's own, over the plain [M, C] layout (M: every axis but the
// last): the moving statistics after oneDNN's forward, and synchronized batch norm, whose
// statistics are those of the global batch (oneDNN's batch norm computes statistics of its
// own input only). The ops that run them are planned in ops_norm.cc.
#pragma once

#include <cstdint>

#include "strata/backend/compile.h"
#include "strata/core/status.h"

namespace strata::backend::cpu {

// Keras's moving statistics: moving = moving * momentum + batch * (1 - momentum), the batch
// variance scaled by `unbias` (N / (N - 1): the unbiased variance). All [C].
void UpdateMovingStatistics(const float* mean, const float* var, int64_t channels, float momentum, float unbias,
                            float* moving_mean, float* moving_var);

// Synchronized batch norm forward: per-channel sums in f64, then `sum` (the program's
// cross-replica sum; empty: the local batch only) adds every replica's in replica order
// (deterministic), then normalization with the global mean and (biased) variance, and the
// moving statistics with the unbiased one.
// x [rows, channels] -> y [rows, channels], mean, var [channels] (of the global batch);
// gamma, beta [channels]; moving_mean, moving_var [channels] updated in place;
// acc: 2 * channels + 1 doubles of scratch.
Status SyncBatchNormForward(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t channels,
                            float epsilon, float momentum, const CrossReplicaSum& sum, double* acc,
                            float* moving_mean, float* moving_var, float* y, float* mean, float* var);

// Synchronized batch norm backward. dgamma and dbeta are this replica's sums (the model averages
// gradients over replicas, like every other parameter's); dx uses the global sums:
//   dx = gamma / sigma * (dy - sum(dy) / N - x_hat * sum(dy * x_hat) / N)   (sums over all N).
// x, dy [rows, channels]; gamma, mean, var [channels] (mean, var: the forward's) ->
// dx [rows, channels], dgamma, dbeta [channels]; acc: 3 * channels + 1 doubles of scratch.
Status SyncBatchNormBackward(const float* x, const float* gamma, const float* mean, const float* var, const float* dy,
                             int64_t rows, int64_t channels, float epsilon, const CrossReplicaSum& sum, double* acc,
                             float* dx, float* dgamma, float* dbeta);

}  // namespace strata::backend::cpu
