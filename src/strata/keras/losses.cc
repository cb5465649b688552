#include "strata/keras/losses.h"

#include <algorithm>
#include <cmath>

namespace strata::keras {

std::string Loss::name() const {
  switch (kind) {
    case Kind::kSparseCategoricalCrossentropy: return "sparse_categorical_crossentropy";
    case Kind::kCategoricalCrossentropy: return "categorical_crossentropy";
    case Kind::kBinaryCrossentropy: return "binary_crossentropy";
    case Kind::kMeanSquaredError: return "mean_squared_error";
  }
  return "?";
}

Result<Loss> losses::Get(const std::string& name, bool from_logits) {
  if (name == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy({.from_logits = from_logits});
  if (name == "categorical_crossentropy") return CategoricalCrossentropy({.from_logits = from_logits});
  if (name == "binary_crossentropy") return BinaryCrossentropy({.from_logits = from_logits});
  if (name == "mean_squared_error" || name == "mse") return MeanSquaredError();
  return InvalidArgument("unknown loss '" + name +
                         "' (sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, mse)");
}

Status HostLoss(const Loss& loss, const float* out, int64_t n, int64_t k, const int64_t* sparse, const float* dense,
                float* per_example) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = out + i * k;
    switch (loss.kind) {
      case Loss::Kind::kSparseCategoricalCrossentropy:
      case Loss::Kind::kCategoricalCrossentropy: {
        // log-probabilities of the row
        float m = row[0];
        for (int64_t j = 1; j < k; ++j) m = std::max(m, row[j]);
        double lse = 0;
        if (loss.from_logits) {
          for (int64_t j = 0; j < k; ++j) lse += std::exp(static_cast<double>(row[j] - m));
          lse = std::log(lse) + m;
        }
        auto logp = [&](int64_t j) -> double {
          if (loss.from_logits) return row[j] - lse;
          return std::log(std::clamp(static_cast<double>(row[j]), static_cast<double>(kEps), 1.0 - kEps));
        };
        double l = 0;
        if (loss.kind == Loss::Kind::kSparseCategoricalCrossentropy) {
          int64_t y = sparse[i];
          if (y < 0 || y >= k)
            return InvalidArgument("label " + std::to_string(y) + " of example " + std::to_string(i) +
                                   " is outside [0, " + std::to_string(k) + ") for " + loss.name());
          l = -logp(y);
          if (loss.label_smoothing != 0) {  // -sum_j ((1 - e) [j == y] + e / k) log p_j
            double all = 0;
            for (int64_t j = 0; j < k; ++j) all += logp(j);
            l = (1.0 - loss.label_smoothing) * l - loss.label_smoothing / static_cast<double>(k) * all;
          }
        } else {
          const float* t = dense + i * k;
          for (int64_t j = 0; j < k; ++j) {
            double tj = t[j] * (1.0 - loss.label_smoothing) + loss.label_smoothing / static_cast<double>(k);
            if (tj != 0) l -= tj * logp(j);
          }
        }
        per_example[i] = static_cast<float>(l);
        break;
      }
      case Loss::Kind::kBinaryCrossentropy: {
        double l = 0;
        for (int64_t j = 0; j < k; ++j) {
          const double t = dense ? dense[i * k + j] : static_cast<double>(sparse[i]);
          if (loss.from_logits) {  // the stable form of -t log(sigmoid(z)) - (1 - t) log(1 - sigmoid(z))
            const double z = row[j];
            l += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::abs(z)));
            continue;
          }
          const double p = std::clamp(static_cast<double>(row[j]), static_cast<double>(kEps), 1.0 - kEps);
          l -= t * std::log(p) + (1 - t) * std::log(1 - p);
        }
        per_example[i] = static_cast<float>(l / static_cast<double>(k));
        break;
      }
      case Loss::Kind::kMeanSquaredError: {
        double l = 0;
        for (int64_t j = 0; j < k; ++j) {
          double t = dense ? dense[i * k + j] : static_cast<double>(sparse[i]);
          l += (row[j] - t) * (row[j] - t);
        }
        per_example[i] = static_cast<float>(l / static_cast<double>(k));
        break;
      }
    }
  }
  return Status::OK();
}

// ---- the loss in the training graph ------------------------------------------------------------

namespace {

using graph::Value;

// The cross-entropy's logits: from_logits = false models end in softmax, whose input is used,
// so the fused, numerically stable cross-entropy op applies (what Keras does internally too).
Result<Value> SoftmaxLogits(const graph::Graph& g, Value output, const Loss& loss) {
  if (loss.from_logits) return output;
  const graph::Node& n = g.node(output.node);
  if (n.kind == graph::OpKind::kSoftmax) return n.inputs[0];
  return InvalidArgument(loss.name() + " with from_logits=false needs the model to end in a softmax; " +
                         g.Describe(output) + " is not one (or pass from_logits=true)");
}

// binary_crossentropy's logits z [b, K]. from_logits = false models end in a sigmoid, whose
// input is used with the logit clipped to [-L, L], L = log((1 - eps) / eps): that is Keras's
// clipping of the probability to [eps, 1 - eps], done exactly (z is untouched inside the
// range; outside it the two relus cancel z and the gradient is 0, as clip_by_value's).
Result<Value> SigmoidLogits(graph::Graph& g, Value output, const Loss& loss) {
  if (loss.from_logits) return output;
  const graph::Node& n = g.node(output.node);
  if (n.kind != graph::OpKind::kActivation || n.attrs.activation != graph::Activation::kSigmoid)
    return InvalidArgument(loss.name() + " with from_logits=false needs the model to end in a sigmoid; " +
                           g.Describe(output) + " is not one (or pass from_logits=true)");
  const Value z = n.inputs[0];
  const float limit = static_cast<float>(std::log((1.0 - kEps) / static_cast<double>(kEps)));
  const Value l = g.Constant(limit, z.shape(), "loss/clip_limit");
  STRATA_ASSIGN_OR_RETURN(Value above, g.Sub(z, l, "loss/clip_above"));
  STRATA_ASSIGN_OR_RETURN(above, g.Relu(above, "loss/clip_above_relu"));
  STRATA_ASSIGN_OR_RETURN(Value neg, g.Scale(z, -1.0f, "loss/clip_negate"));
  STRATA_ASSIGN_OR_RETURN(Value below, g.Sub(neg, l, "loss/clip_below"));
  STRATA_ASSIGN_OR_RETURN(below, g.Relu(below, "loss/clip_below_relu"));
  STRATA_ASSIGN_OR_RETURN(Value clipped, g.Sub(z, above, "loss/clip_upper"));
  return g.Add(clipped, below, "loss/clipped_logits");
}

// A label of any numeric dtype as a double.
double LabelAt(const Tensor& y, int64_t i) {
  switch (y.dtype()) {
    case DType::kF32: return y.data<float>()[i];
    case DType::kI64: return static_cast<double>(y.data<int64_t>()[i]);
    case DType::kI32: return y.data<int32_t>()[i];
    default: return y.data<uint8_t>()[i];
  }
}

}  // namespace

Result<Loss::InGraph> Loss::Build(graph::Graph& g, Value out, int64_t batch) const {
  InGraph l;
  switch (kind) {
    case Kind::kSparseCategoricalCrossentropy:
    case Kind::kCategoricalCrossentropy: {
      if (out.shape().rank() != 2)
        return InvalidArgument(name() + ": the model output must be [batch, classes], got " + g.Describe(out));
      l.labels = g.Input("labels", DType::kI32, {batch});
      STRATA_ASSIGN_OR_RETURN(Value logits, SoftmaxLogits(g, out, *this));
      STRATA_ASSIGN_OR_RETURN(l.value, g.SoftmaxCrossEntropy(logits, l.labels, label_smoothing, "loss"));
      return l;
    }
    case Kind::kMeanSquaredError: {
      l.labels = g.Input("labels", DType::kF32, out.shape());
      STRATA_ASSIGN_OR_RETURN(l.value, g.MeanSquaredError(out, l.labels, "loss"));
      return l;
    }
    case Kind::kBinaryCrossentropy: {
      // A two-class softmax cross-entropy over [0, z] for each of the b x K outputs:
      // softmax([0, z])[1] = sigmoid(z), so its loss is -t log(sigmoid(z)) - (1 - t) log(1 - sigmoid(z))
      // for t in {0, 1}, its gradient sigmoid(z) - t, and its mean over b x K is Keras's mean
      // over the outputs, then over the batch.
      STRATA_ASSIGN_OR_RETURN(Value z, SigmoidLogits(g, out, *this));
      const int64_t count = z.shape().num_elements();
      if (out.shape().rank() < 1 || out.shape()[0] != batch)
        return InvalidArgument(name() + ": the model output must be [batch, ...], got " + g.Describe(out));
      STRATA_ASSIGN_OR_RETURN(Value column, g.Reshape(z, {count, 1}, "loss/logits"));  // [b K, 1]
      const Value zeros = g.Constant(0.0f, {count, 1}, "loss/zero_logits");
      STRATA_ASSIGN_OR_RETURN(Value pair, g.Concat({zeros, column}, 1, "loss/pair"));  // [b K, 2]
      l.labels = g.Input("labels", DType::kI32, {count});                              // 0/1 [b K]
      STRATA_ASSIGN_OR_RETURN(l.value, g.SoftmaxCrossEntropy(pair, l.labels, 0, "loss"));
      return l;
    }
  }
  return Unimplemented(name() + " is not trainable in the compiled step");
}

Status Loss::ClassIndices(const Tensor& y, int64_t rows, int64_t k, std::vector<int64_t>* indices) const {
  switch (kind) {
    case Kind::kMeanSquaredError:
      indices->clear();
      return Status::OK();
    case Kind::kBinaryCrossentropy: {
      // 0/1 labels [rows, K] (or [rows] when K = 1) of any numeric dtype, as class indices.
      Tensor yc = y.Contiguous();
      const int64_t n = rows * k;
      if (yc.num_elements() != n || yc.dtype() == DType::kBF16)
        return InvalidArgument("labels: binary_crossentropy expects 0/1 labels [" + std::to_string(rows) + ", " +
                               std::to_string(k) + "] (f32 or integer), got " + yc.DebugString());
      indices->assign(static_cast<size_t>(n), 0);
      for (int64_t i = 0; i < n; ++i) {
        const double v = LabelAt(yc, i);
        if (v != 0 && v != 1)
          return InvalidArgument("labels: binary_crossentropy trains on 0/1 labels; label " + std::to_string(i % k) +
                                 " of example " + std::to_string(i / k) + " is " + std::to_string(v));
        (*indices)[static_cast<size_t>(i)] = v == 1;
      }
      return Status::OK();
    }
    case Kind::kSparseCategoricalCrossentropy: {
      Tensor yc = y.Contiguous();
      if (yc.num_elements() != rows)
        return InvalidArgument("labels: expected " + std::to_string(rows) + " class indices, got " + yc.DebugString());
      indices->assign(static_cast<size_t>(rows), 0);
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t v = yc.dtype() == DType::kI64   ? yc.data<int64_t>()[i]
                          : yc.dtype() == DType::kI32 ? yc.data<int32_t>()[i]
                          : yc.dtype() == DType::kU8  ? yc.data<uint8_t>()[i]
                                                      : static_cast<int64_t>(yc.data<float>()[i]);
        if (v < 0 || v >= k)
          return InvalidArgument("labels: class " + std::to_string(v) + " of example " + std::to_string(i) +
                                 " is outside [0, " + std::to_string(k) + ")");
        (*indices)[static_cast<size_t>(i)] = v;
      }
      return Status::OK();
    }
    case Kind::kCategoricalCrossentropy: {
      // One-hot labels: the fused op takes the class index; smoothing is applied in the op.
      Tensor yc = y.Contiguous();
      if (yc.dtype() != DType::kF32 || yc.num_elements() != rows * k)
        return InvalidArgument("labels: categorical_crossentropy expects f32 one-hot [" + std::to_string(rows) + ", " +
                               std::to_string(k) + "], got " + yc.DebugString());
      indices->assign(static_cast<size_t>(rows), 0);
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = yc.data<float>() + i * k;
        (*indices)[static_cast<size_t>(i)] = std::max_element(row, row + k) - row;
      }
      return Status::OK();
    }
  }
  return Status::OK();
}

MetricBatch Loss::ForMetrics(const float* outputs, int64_t rows, int64_t k, const int64_t* indices) const {
  if (kind == Kind::kBinaryCrossentropy) return {outputs, rows * k, 1, indices, nullptr};
  return {outputs, rows, k, indices, nullptr};
}

Status Loss::Evaluate(const float* outputs, int64_t rows, int64_t k, const std::vector<int64_t>& indices, const Tensor& y,
                      std::vector<float>* per_example, Tensor* scratch, MetricBatch* batch) const {
  const bool sparse = !indices.empty() && sparse_labels();
  if (kind == Kind::kBinaryCrossentropy) {  // the 0/1 labels ClassIndices checked
    *scratch = Tensor(DType::kF32, {rows, k});
    for (int64_t i = 0; i < rows * k; ++i) scratch->data<float>()[i] = static_cast<float>(indices[static_cast<size_t>(i)]);
  } else if (!sparse_labels()) {
    *scratch = y.Contiguous();
    if (scratch->dtype() != DType::kF32 || scratch->num_elements() != rows * k)
      return InvalidArgument("evaluate: " + name() + " expects f32 labels [" + std::to_string(rows) + ", " +
                             std::to_string(k) + "], got " + scratch->DebugString());
  }
  const int64_t* sparse_labels_ptr = sparse ? indices.data() : nullptr;
  const float* dense = sparse ? nullptr : scratch->data<float>();
  per_example->resize(static_cast<size_t>(rows));
  STRATA_RETURN_IF_ERROR(HostLoss(*this, outputs, rows, k, sparse_labels_ptr, dense, per_example->data()));
  *batch = kind == Kind::kBinaryCrossentropy ? MetricBatch{outputs, rows * k, 1, indices.data(), nullptr}
                                             : MetricBatch{outputs, rows, k, sparse_labels_ptr, dense};
  return Status::OK();
}

}  // namespace strata::keras
