// Keras losses: how a model's output is compared with its labels. A Loss is the one home of
// everything that depends on its kind:
// - the training graph's loss (Build): the fused graph ops (softmax cross-entropy with integer
//   labels and its gradient in one kernel; MSE), on the logits where the model ends in a
//   softmax or sigmoid;
// - the labels as the graph and the metrics take them (ClassIndices);
// - evaluation on the host from the fetched outputs (Evaluate), so a last partial batch can
//   be masked exactly;
// - what the metrics see of a batch (ForMetrics).
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/core/tensor.h"
#include "strata/graph/graph.h"

namespace strata::keras {

// Keras's backend epsilon (keras.backend.epsilon()): cross-entropies of probabilities clip
// them to [kEps, 1 - kEps] before the log.
inline constexpr float kEps = 1e-7f;

// One batch as a metric sees it: outputs f32 [n, k]; labels either sparse i64 [n] or
// dense f32 [n, k] (one-hot / probabilities).
struct MetricBatch {
  const float* outputs = nullptr;
  int64_t n = 0, k = 0;
  const int64_t* sparse_labels = nullptr;
  const float* dense_labels = nullptr;
};

struct Loss {
  enum class Kind { kSparseCategoricalCrossentropy, kCategoricalCrossentropy, kBinaryCrossentropy, kMeanSquaredError };
  Kind kind = Kind::kSparseCategoricalCrossentropy;
  bool from_logits = false;     // Keras's default: the model ends in softmax/sigmoid
  // Cross-entropies (sparse and categorical): the targets are (1 - e) one-hot + e / classes.
  float label_smoothing = 0;
  std::string name() const;     // "sparse_categorical_crossentropy"
  bool sparse_labels() const { return kind == Kind::kSparseCategoricalCrossentropy; }

  // The training graph's loss of `output` ([batch, ...]): a labels input fed each step and the
  // scalar mean loss. from_logits = false needs the model to end in the matching softmax
  // (sigmoid for binary_crossentropy), whose input is used.
  struct InGraph {
    graph::Value labels;  // i32 class indices ([batch], binary: [batch K] 0/1), or f32 like output (MSE)
    graph::Value value;   // f32 []
  };
  Result<InGraph> Build(graph::Graph& g, graph::Value output, int64_t batch) const;

  // The labels y of `rows` examples with K outputs each as class indices: [rows] (sparse from
  // any integer or f32 dtype, categorical from the one-hot's argmax), [rows K] for
  // binary_crossentropy's 0/1 labels; left empty for MSE. An out-of-range class or a wrong
  // shape is an error naming the example.
  Status ClassIndices(const Tensor& y, int64_t rows, int64_t k, std::vector<int64_t>* indices) const;

  // One evaluated batch: the per-example losses of `rows` outputs [rows, K] (masked exactly:
  // only `rows`) against y / ClassIndices's `indices`, and what the metrics see of it (its
  // pointers into outputs, indices and `*scratch`, valid while those are).
  Status Evaluate(const float* outputs, int64_t rows, int64_t k, const std::vector<int64_t>& indices, const Tensor& y,
                  std::vector<float>* per_example, Tensor* scratch, MetricBatch* batch) const;

  // What the metrics see of a training step's outputs [rows, K] and its class indices:
  // binary_crossentropy makes every output a yes/no prediction.
  MetricBatch ForMetrics(const float* outputs, int64_t rows, int64_t k, const int64_t* indices) const;
};

namespace losses {
struct CrossentropyOptions {
  bool from_logits = false;
  float label_smoothing = 0;
};
// label_smoothing here is Strata's, not Keras's (whose sparse loss has none): the same smoothing
// as CategoricalCrossentropy on the one-hot labels, without making them.
inline Loss SparseCategoricalCrossentropy(CrossentropyOptions o = {}) {
  return {Loss::Kind::kSparseCategoricalCrossentropy, o.from_logits, o.label_smoothing};
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

#pragma GCC visibility pop
