// Keras losses: how a model's output is compared with its labels.
//
// The training graph uses the fused graph ops (softmax cross-entropy with integer labels and
// its gradient in one kernel; MSE). Evaluation computes the same formulas on the host from
// the fetched outputs, so a last partial batch can be masked exactly.
#pragma once

#include <cstdint>
#include <string>

#include "strata/core/status.h"
#include "strata/core/tensor.h"

namespace strata::keras {

// Keras's backend epsilon (keras.backend.epsilon()): cross-entropies of probabilities clip
// them to [kEps, 1 - kEps] before the log.
inline constexpr float kEps = 1e-7f;

struct Loss {
  enum class Kind { kSparseCategoricalCrossentropy, kCategoricalCrossentropy, kBinaryCrossentropy, kMeanSquaredError };
  Kind kind = Kind::kSparseCategoricalCrossentropy;
  bool from_logits = false;     // Keras's default: the model ends in softmax/sigmoid
  float label_smoothing = 0;    // categorical cross-entropy only
  std::string name() const;     // "sparse_categorical_crossentropy"
  bool sparse_labels() const { return kind == Kind::kSparseCategoricalCrossentropy; }
};

namespace losses {
struct CrossentropyOptions {
  bool from_logits = false;
  float label_smoothing = 0;
};
inline Loss SparseCategoricalCrossentropy(CrossentropyOptions o = {}) {
  return {Loss::Kind::kSparseCategoricalCrossentropy, o.from_logits, 0};
}
inline Loss CategoricalCrossentropy(CrossentropyOptions o = {}) {
  return {Loss::Kind::kCategoricalCrossentropy, o.from_logits, o.label_smoothing};
}
inline Loss BinaryCrossentropy(CrossentropyOptions o = {}) { return {Loss::Kind::kBinaryCrossentropy, o.from_logits, 0}; }
inline Loss MeanSquaredError() { return {Loss::Kind::kMeanSquaredError, false, 0}; }
// By Keras name ("sparse_categorical_crossentropy", "mse", ...).
Result<Loss> Get(const std::string& name, bool from_logits = false);
}  // namespace losses

// Per-example losses of `n` rows computed on the host. outputs f32 [n, K]; labels i64 [n]
// (sparse) or f32 [n, K]. Writes `n` values to `per_example`.
// binary_crossentropy, as Keras: the mean over the K outputs of
//   from_logits: max(z, 0) - z t + log(1 + exp(-|z|))          (sigmoid_cross_entropy_with_logits)
//   else:        -t log(p) - (1 - t) log(1 - p), p clipped to [kEps, 1 - kEps]
Status HostLoss(const Loss& loss, const float* outputs, int64_t n, int64_t k, const int64_t* sparse_labels,
                const float* dense_labels, float* per_example);

}  // namespace strata::keras
