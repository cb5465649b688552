// The normalization layers (BatchNormalization, LayerNormalization, Normalization): each class, its factory
// (layers.h), how a Keras config builds it, and its registry entries.
#include "strata/keras/layers.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "strata/keras/layer_config.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/layers_internal.h"

namespace strata::keras {
namespace layers {
namespace {

using graph::Value;

class BatchNormalizationLayer final : public Layer {
 public:
  explicit BatchNormalizationLayer(BatchNormalizationOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "BatchNormalization"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    Value x = in[0];
    if (x.shape().rank() < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + x.shape().ToString());
    const int64_t c = x.shape()[-1];
    graph::VariableOptions ones, zeros;
    ones.init = graph::Init::kOnes;
    // gamma/beta always exist in the graph (the kernels want them); with scale / center =
    // false they are constants 1 and 0, not weights: Keras's layer has no such variable (its
    // weight files and parameter counts lack them: InceptionV3's batch norms).
    Value gamma, beta;
    if (o_.scale) {
      STRATA_ASSIGN_OR_RETURN(gamma, ctx.Variable(name(), "gamma", {c}, ones));
    } else {
      gamma = ctx.graph->Constant(1.0f, Shape{c}, name() + "/no_gamma");
    }
    if (o_.center) {
      STRATA_ASSIGN_OR_RETURN(beta, ctx.Variable(name(), "beta", {c}, zeros));
    } else {
      beta = ctx.graph->Constant(0.0f, Shape{c}, name() + "/no_beta");
    }
    STRATA_ASSIGN_OR_RETURN(Value mean, ctx.Variable(name(), "moving_mean", {c}, zeros, false));
    STRATA_ASSIGN_OR_RETURN(Value var, ctx.Variable(name(), "moving_variance", {c}, ones, false));
    graph::BatchNormOptions bo;
    bo.momentum = o_.momentum;
    bo.epsilon = o_.epsilon;
    bo.synchronized = o_.synchronized;
    // Frozen: inference mode (moving statistics, not updated), as Keras >= 2.1 does.
    if (ctx.training && !ctx.frozen) return ctx.graph->BatchNorm(x, gamma, beta, mean, var, bo, name());
    if (!ctx.training && ctx.fold_batch_norm) {
      STRATA_ASSIGN_OR_RETURN(std::optional<Value> folded, FoldIntoConvolution(*ctx.graph, x, gamma, beta, mean, var, bo));
      if (folded) return *folded;
    }
    return ctx.graph->BatchNormInference(x, gamma, beta, mean, var, bo, name());
  }

 private:
  // BuildContext::fold_batch_norm: x = conv(in, w) [+ b] becomes conv(in, w') + b' with
  // w' = w * s, b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps) per output channel
  // (the last axis of w, depthwise included). Both are batch-norm inferences of existing
  // kernels: w' with mean 0 and beta 0, b' on b (or zeros) as one row. nullopt: x is no
  // convolution's f32 output, and the batch norm stays.
  Result<std::optional<Value>> FoldIntoConvolution(graph::Graph& g, Value x, Value gamma, Value beta, Value mean,
                                                   Value var, const graph::BatchNormOptions& bo) const {
    const int64_t c = x.shape()[-1];
    Value conv_out = x, bias;
    if (g.node(x.node).kind == graph::OpKind::kBiasAdd) {
      conv_out = g.node(x.node).inputs[0];
      bias = g.node(x.node).inputs[1];
    }
    // Copies, not a reference: adding nodes below may move the graph's node storage.
    const graph::Node conv = g.node(conv_out.node);
    if (conv.kind != graph::OpKind::kConv2D || conv_out.output != 0 || x.dtype() != DType::kF32 ||
        x.shape().rank() != 4)
      return std::optional<Value>();
    const Value in = conv.inputs[0], w = conv.inputs[1];
    if (w.shape().rank() != 4 || w.shape()[3] != c || w.dtype() != DType::kF32) return std::optional<Value>();
    const std::string base = name() + "/folded";
    const Value zeros = g.Constant(0.0f, Shape{c}, base + "/zeros");
    STRATA_ASSIGN_OR_RETURN(Value w_scaled, g.BatchNormInference(w, gamma, zeros, zeros, var, bo, base + "/kernel"));
    Value b_row = g.Constant(0.0f, Shape{1, c}, base + "/no_bias");
    if (bias.valid()) {
      STRATA_ASSIGN_OR_RETURN(b_row, g.Reshape(bias, Shape{1, c}, base + "/bias_row"));
    }
    STRATA_ASSIGN_OR_RETURN(Value b_folded, g.BatchNormInference(b_row, gamma, beta, mean, var, bo, base + "/bias"));
    STRATA_ASSIGN_OR_RETURN(b_folded, g.Reshape(b_folded, Shape{c}, base + "/bias_vector"));
    STRATA_ASSIGN_OR_RETURN(Value y, g.Conv2D(in, w_scaled, conv.attrs.conv, conv.name + "+" + name()));
    STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, b_folded, name()));
    return std::optional<Value>(y);
  }

  BatchNormalizationOptions o_;
};

class LayerNormalizationLayer final : public Layer {
 public:
  explicit LayerNormalizationLayer(LayerNormalizationOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "LayerNormalization"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    graph::Graph& g = *ctx.graph;
    const Value x = in[0];
    const int rank = x.shape().rank();
    if (rank < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + x.shape().ToString());
    if (o_.axis != -1 && o_.axis != rank - 1)
      return Unimplemented(Label() + ": only the last axis is supported, got axis " + std::to_string(o_.axis) +
                           " of input " + x.shape().ToString());
    const int64_t c = x.shape()[-1];
    graph::VariableOptions ones;
    ones.init = graph::Init::kOnes;
    // Off: a constant, not a weight (Keras creates none, so the weight files and counts agree).
    Value gamma = g.Constant(1.0f, Shape{c}, name() + "/no_gamma");
    Value beta = g.Constant(0.0f, Shape{c}, name() + "/no_beta");
    if (o_.scale) { STRATA_ASSIGN_OR_RETURN(gamma, ctx.Variable(name(), "gamma", {c}, ones)); }
    if (o_.center) { STRATA_ASSIGN_OR_RETURN(beta, ctx.Variable(name(), "beta", {c}, {})); }
    return g.LayerNorm(x, gamma, beta, {.epsilon = o_.epsilon}, name());
  }

 private:
  LayerNormalizationOptions o_;
};

class NormalizationLayer final : public Layer {
 public:
  explicit NormalizationLayer(NormalizationOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "Normalization"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    graph::Graph& g = *ctx.graph;
    Value x = in[0];
    const int rank = x.shape().rank();
    if (rank < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + x.shape().ToString());
    if (o_.axis != -1 && o_.axis != rank - 1)
      return InvalidArgument(Label() + ": only axis -1 (the channels) is supported, got " + std::to_string(o_.axis));
    const int64_t c = x.shape()[-1];
    // Keras: mean and variance given together, or neither (adapt()'s state instead).
    if (o_.mean.empty() != o_.variance.empty())
      return InvalidArgument(Label() + ": mean and variance must both be given, or neither (got " +
                             (o_.mean.empty() ? "variance" : "mean") + " only)");
    for (const auto* v : {&o_.mean, &o_.variance})
      if (!v->empty() && static_cast<int64_t>(v->size()) != c)
        return InvalidArgument(Label() + ": " + (v == &o_.mean ? "mean" : "variance") + " has " +
                               std::to_string(v->size()) + " values, the input " + x.shape().ToString() + " has " +
                               std::to_string(c) + " channels");
    for (float v : o_.variance)
      if (!(v >= 0)) return InvalidArgument(Label() + ": variance values must be >= 0");
    Value mean, var;
    if (o_.mean.empty()) {
      // Un-adapted: Keras's adapt() state, mean 0 and variance 1, and its "count" (saved and
      // counted: 2C + 1 non-trainable weights, unused by the forward pass).
      STRATA_ASSIGN_OR_RETURN(mean, ctx.Variable(name(), "mean", {c}, {.init = graph::Init::kZeros}, false));
      STRATA_ASSIGN_OR_RETURN(var, ctx.Variable(name(), "variance", {c}, {.init = graph::Init::kOnes}, false));
      STRATA_ASSIGN_OR_RETURN(Value count, ctx.Variable(name(), "count", Shape{}, {}, false));
      (void)count;
    } else {
      // Given mean and variance: constants, no weights (Keras builds none in this case).
      STRATA_ASSIGN_OR_RETURN(mean, g.ConstantValues(o_.mean, Shape{c}, name() + "/mean"));
      STRATA_ASSIGN_OR_RETURN(var, g.ConstantValues(o_.variance, Shape{c}, name() + "/variance"));
    }
    // (x - mean) / sqrt(variance + 1e-14): Keras's max(sqrt(variance), 1e-7) wherever the
    // variance is 0 or above 1e-12, as a batch-norm inference with gamma 1 and beta 0.
    Value gamma = g.Constant(1.0f, Shape{c}, name() + "/gamma");
    Value beta = g.Constant(0.0f, Shape{c}, name() + "/beta");
    graph::BatchNormOptions bo;
    bo.epsilon = 1e-14f;
    return g.BatchNormInference(x, gamma, beta, mean, var, bo, name());
  }

 private:
  NormalizationOptions o_;
};

Result<LayerPtr> BatchNormalizationFromConfig(LayerConfig& c, const std::string& name) {
  BatchNormalizationOptions o;
  STRATA_ASSIGN_OR_RETURN(double m, c.Number("momentum", 0.99));
  STRATA_ASSIGN_OR_RETURN(double e, c.Number("epsilon", 1e-3));
  STRATA_ASSIGN_OR_RETURN(o.center, c.Bool("center", true));
  STRATA_ASSIGN_OR_RETURN(o.scale, c.Bool("scale", true));
  STRATA_ASSIGN_OR_RETURN(o.synchronized, c.Bool("synchronized", false));
  STRATA_ASSIGN_OR_RETURN(int axis, c.Size("axis", -1));
  if (axis != -1 && axis != 3) return Unimplemented(c.label() + ": only the last axis (channels_last) is supported");
  o.momentum = static_cast<float>(m);
  o.epsilon = static_cast<float>(e);
  o.name = name;
  return BatchNormalization(o);
}

Result<LayerPtr> LayerNormalizationFromConfig(LayerConfig& c, const std::string& name) {
  LayerNormalizationOptions o;
  o.name = name;
  // Keras writes the axis as an int or a one-element list.
  if (const nlohmann::json* axis = c.Raw("axis")) {
    const nlohmann::json& a = axis->is_array() && axis->size() == 1 ? (*axis)[0] : *axis;
    if (!a.is_number_integer())
      return Unimplemented(c.label() + ": only one axis, the last, is supported, got " + axis->dump());
    o.axis = a.get<int>();
  }
  STRATA_ASSIGN_OR_RETURN(double e, c.Number("epsilon", 1e-3));
  o.epsilon = static_cast<float>(e);
  STRATA_ASSIGN_OR_RETURN(o.center, c.Bool("center", true));
  STRATA_ASSIGN_OR_RETURN(o.scale, c.Bool("scale", true));
  STRATA_ASSIGN_OR_RETURN(bool rms, c.Bool("rms_scaling", false));
  if (rms) return Unimplemented(c.label() + ": rms_scaling=true is not supported");
  if (!(o.epsilon > 0)) return InvalidArgument(c.label() + ": epsilon must be > 0, got " + std::to_string(e));
  return LayerNormalization(o);
}

Result<LayerPtr> NormalizationFromConfig(LayerConfig& c, const std::string& name) {
  NormalizationOptions o;
  o.name = name;
  const nlohmann::json* axis = c.Raw("axis");
  if (axis != nullptr && !(axis->is_number_integer() && axis->get<int>() == -1) &&
      !(axis->is_array() && axis->size() == 1 && (*axis)[0].is_number_integer() && (*axis)[0].get<int>() == -1))
    return Unimplemented(c.label() + ": only axis -1 (the channels) is supported, got " + axis->dump());
  for (const char* key : {"mean", "variance"}) {
    const nlohmann::json* v = c.Raw(key);
    if (v == nullptr) continue;
    if (!v->is_array()) return InvalidArgument(c.label() + ": " + key + " must be a list of numbers, got " + v->dump());
    std::vector<float>& out = std::string(key) == "mean" ? o.mean : o.variance;
    for (const nlohmann::json& x : *v) {
      if (!x.is_number()) return InvalidArgument(c.label() + ": " + key + " must be a list of numbers, got " + v->dump());
      out.push_back(x.get<float>());
    }
  }
  STRATA_ASSIGN_OR_RETURN(bool invert, c.Bool("invert", false));
  if (invert) return Unimplemented(c.label() + ": invert=true is not supported");
  return Normalization(o);
}

}  // namespace

LayerPtr BatchNormalization(BatchNormalizationOptions o) { std::string n = o.name; return Named<BatchNormalizationLayer>(n, std::move(o)); }
LayerPtr LayerNormalization(LayerNormalizationOptions o) { std::string n = o.name; return Named<LayerNormalizationLayer>(n, std::move(o)); }
LayerPtr Normalization(NormalizationOptions o) { std::string n = o.name; return Named<NormalizationLayer>(n, std::move(o)); }

}  // namespace layers

std::vector<LayerClass> NormalizationLayerClasses() {
  using namespace layers;
  return {{"BatchNormalization", BatchNormalizationFromConfig},
          {"LayerNormalization", LayerNormalizationFromConfig},
          {"Normalization", NormalizationFromConfig}};
}

}  // namespace strata::keras
