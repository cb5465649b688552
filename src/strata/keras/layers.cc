#include "strata/keras/layers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace strata::keras {

using graph::Value;

Result<Value> BuildContext::Variable(const std::string& layer, const std::string& name, Shape shape,
                                     graph::VariableOptions options, bool trainable, float l2) {
  const std::string full = layer + "/" + name;
  Value existing = graph->FindVariable(full);
  if (existing.valid()) return existing;
  // A frozen layer's weights keep their role (a kernel is still a parameter: Keras's
  // non_trainable_weights, saved and loaded as such) but get no gradient.
  const graph::VariableRole role = trainable ? graph::VariableRole::kParameter : graph::VariableRole::kState;
  options.trainable = trainable && !frozen;
  // Each variable's initializer seed comes from the model seed and its name, so weights do
  // not depend on the order graphs are built in.
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : full) h = (h ^ c) * 1099511628211ull;
  options.seed = h;
  STRATA_ASSIGN_OR_RETURN(Value v, graph->Variable(full, std::move(shape), options, role));
  variables.push_back({layer, v, trainable, l2});
  return v;
}

Result<graph::Init> ParseInitializer(const std::string& name) {
  if (name == "glorot_uniform") return graph::Init::kGlorotUniform;
  if (name == "he_normal") return graph::Init::kHeNormal;
  if (name == "zeros") return graph::Init::kZeros;
  if (name == "ones") return graph::Init::kOnes;
  return InvalidArgument("unknown initializer '" + name +
                         "' (glorot_uniform, he_normal, zeros, ones; for kernels also variance_scaling(scale=S, "
                         "mode=M, distribution=D), he_uniform, lecun_normal, lecun_uniform, glorot_normal)");
}

Result<graph::Activation> ParseActivation(const std::string& name) {
  using graph::Activation;
  if (name.empty() || name == "linear") return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "relu6") return Activation::kRelu6;
  if (name == "gelu") return Activation::kGelu;
  if (name == "swish" || name == "silu") return Activation::kSwish;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  return InvalidArgument("unknown activation '" + name +
                         "' (linear, relu, relu6, gelu, swish, silu, sigmoid, tanh, hard_sigmoid, softmax)");
}

Status Layer::ExpectInputs(const std::vector<Value>& inputs) const {
  const int n = num_inputs();
  if (n >= 0 && static_cast<int>(inputs.size()) != n)
    return InvalidArgument(Label() + ": expects " + std::to_string(n) + " input(s), got " + std::to_string(inputs.size()));
  if (n < 0 && inputs.size() < 2)
    return InvalidArgument(Label() + ": expects at least 2 inputs, got " + std::to_string(inputs.size()));
  return Status::OK();
}

namespace layers {
namespace {

Result<graph::Padding> ParsePadding(const std::string& p, const std::string& label) {
  if (p == "valid") return graph::Padding::kValid;
  if (p == "same") return graph::Padding::kSame;
  return InvalidArgument(label + ": padding must be \"valid\" or \"same\", got \"" + p + "\"");
}

// Applies a Keras activation by name ("softmax" and "hard_sigmoid" included).
Result<Value> ApplyActivation(graph::Graph& g, const std::string& activation, Value x, const std::string& name) {
  if (activation == "softmax") return g.Softmax(x, name + "/softmax");
  if (activation == "hard_sigmoid") return g.HardSigmoid(x, name);
  STRATA_ASSIGN_OR_RETURN(graph::Activation a, ParseActivation(activation));
  if (a == graph::Activation::kLinear) return x;
  return g.Act(a, x, name);
}

std::string Trim(std::string t) {
  const size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
}

// Keras's VarianceScaling family, with the fans Keras computes for the kernel (its own kernel
// layout: a depthwise kernel is [k, k, C, multiplier]):
//   "variance_scaling" or "variance_scaling(scale=2.0, mode=fan_out, distribution=truncated_normal)"
//   (defaults scale 1, fan_in, truncated_normal; "normal" means truncated_normal, as tf.keras 2.x),
//   "he_uniform", "lecun_normal", "lecun_uniform", "glorot_normal".
// nullopt: not of the family (the other names go through ParseInitializer).
Result<std::optional<graph::VariableOptions>> VarianceScaling(const std::string& spec, double fan_in, double fan_out) {
  const size_t paren = spec.find('(');
  const std::string name = Trim(spec.substr(0, paren));
  double scale = 1;
  std::string mode = "fan_in", distribution = "truncated_normal";
  if (name == "he_uniform") {
    scale = 2, distribution = "uniform";
  } else if (name == "lecun_uniform") {
    distribution = "uniform";
  } else if (name == "glorot_normal") {
    mode = "fan_avg";
  } else if (name != "lecun_normal" && name != "variance_scaling") {
    return std::optional<graph::VariableOptions>();
  }
  const std::string bad = "initializer '" + spec + "': expected variance_scaling(scale=S, mode=fan_in|fan_out|fan_avg, "
                          "distribution=truncated_normal|untruncated_normal|uniform)";
  if (paren != std::string::npos) {
    if (name != "variance_scaling" || spec.back() != ')') return InvalidArgument(bad);
    std::string args = spec.substr(paren + 1, spec.size() - paren - 2);
    size_t pos = 0;
    while (pos <= args.size()) {
      size_t comma = args.find(',', pos);
      if (comma == std::string::npos) comma = args.size();
      const std::string kv = Trim(args.substr(pos, comma - pos));
      pos = comma + 1;
      if (kv.empty()) continue;
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) return InvalidArgument(bad);
      const std::string k = Trim(kv.substr(0, eq)), v = Trim(kv.substr(eq + 1));
      if (k == "scale") {
        char* end = nullptr;
        scale = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(scale > 0)) return InvalidArgument(bad);
      } else if (k == "mode") {
        mode = v;
      } else if (k == "distribution") {
        distribution = v;
      } else if (k != "seed") {
        return InvalidArgument(bad);
      }
    }
  }
  double n = mode == "fan_in" ? fan_in : mode == "fan_out" ? fan_out : mode == "fan_avg" ? (fan_in + fan_out) / 2 : -1;
  if (n < 0) return InvalidArgument(bad);
  n = std::max(1.0, n);
  graph::VariableOptions o;
  if (distribution == "truncated_normal" || distribution == "normal") {
    o.init = graph::Init::kTruncatedNormal;  // stddev corrected for the truncation, as Keras
    o.value = static_cast<float>(std::sqrt(scale / n) / 0.87962566103423978);
  } else if (distribution == "untruncated_normal") {
    o.init = graph::Init::kNormal;
    o.value = static_cast<float>(std::sqrt(scale / n));
  } else if (distribution == "uniform") {
    o.init = graph::Init::kUniform;
    o.value = static_cast<float>(std::sqrt(3 * scale / n));
  } else {
    return InvalidArgument(bad);
  }
  return std::optional<graph::VariableOptions>(o);
}

// fan_in / fan_out: Keras's, for the variance-scaling initializers.
Result<graph::VariableOptions> InitOptions(const std::string& initializer, double fan_in = 1, double fan_out = 1) {
  STRATA_ASSIGN_OR_RETURN(auto vs, VarianceScaling(initializer, fan_in, fan_out));
  if (vs) return *vs;
  STRATA_ASSIGN_OR_RETURN(graph::Init init, ParseInitializer(initializer));
  graph::VariableOptions o;
  o.init = init;
  return o;
}


class DenseLayer final : public Layer {
 public:
  DenseLayer(int units, DenseOptions o) : units_(units), o_(std::move(o)) {}
  std::string class_name() const override { return "Dense"; }
  std::string default_name() const override { return "dense"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    Value x = in[0];
    if (x.shape().rank() != 2)
      return InvalidArgument(Label() + ": expects a rank-2 input [batch, features], got " + x.shape().ToString() +
                             " (add a Flatten layer before it)");
    if (units_ <= 0) return InvalidArgument(Label() + ": units must be positive");
    STRATA_ASSIGN_OR_RETURN(auto kinit, InitOptions(o_.kernel_initializer, static_cast<double>(x.shape()[1]),
                                                    static_cast<double>(units_)));
    STRATA_ASSIGN_OR_RETURN(Value w, ctx.Variable(name(), "kernel", {x.shape()[1], units_}, kinit, true,
                                                  o_.kernel_regularizer_l2));
    STRATA_ASSIGN_OR_RETURN(Value y, ctx.graph->MatMul(x, w, false, false, name()));
    if (o_.use_bias) {
      STRATA_ASSIGN_OR_RETURN(auto binit, InitOptions(o_.bias_initializer, static_cast<double>(units_),
                                                      static_cast<double>(units_)));
      STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(name(), "bias", {units_}, binit));
      STRATA_ASSIGN_OR_RETURN(y, ctx.graph->BiasAdd(y, b, name() + "/bias_add"));
    }
    return ApplyActivation(*ctx.graph, o_.activation, y, name() + "/" + o_.activation);
  }

 private:
  int64_t units_;
  DenseOptions o_;
};

class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(int filters, int k, Conv2DOptions o) : filters_(filters), k_(k), o_(std::move(o)) {}
  std::string class_name() const override { return "Conv2D"; }
  std::string default_name() const override { return "conv2d"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    Value x = in[0];
    if (x.shape().rank() != 4)
      return InvalidArgument(Label() + ": expects [batch, height, width, channels], got " + x.shape().ToString());
    if (o_.groups <= 0 || x.shape()[3] % o_.groups || filters_ % o_.groups)
      return InvalidArgument(Label() + ": groups " + std::to_string(o_.groups) + " must divide input channels " +
                             std::to_string(x.shape()[3]) + " and filters " + std::to_string(filters_));
    STRATA_ASSIGN_OR_RETURN(auto pad, ParsePadding(o_.padding, Label()));
    const double receptive = static_cast<double>(k_ * k_);
    STRATA_ASSIGN_OR_RETURN(auto kinit, InitOptions(o_.kernel_initializer,
                                                    receptive * static_cast<double>(x.shape()[3] / o_.groups),
                                                    receptive * static_cast<double>(filters_)));
    STRATA_ASSIGN_OR_RETURN(Value w, ctx.Variable(name(), "kernel", {k_, k_, x.shape()[3] / o_.groups, filters_},
                                                  kinit, true, o_.kernel_regularizer_l2));
    graph::Conv2DOptions co;
    co.stride_h = co.stride_w = o_.strides;
    co.padding = pad;
    co.dilation_h = co.dilation_w = o_.dilation_rate;
    co.groups = o_.groups;
    STRATA_ASSIGN_OR_RETURN(Value y, ctx.graph->Conv2D(x, w, co, name()));
    if (o_.use_bias) {
      STRATA_ASSIGN_OR_RETURN(auto binit, InitOptions(o_.bias_initializer, static_cast<double>(filters_),
                                                      static_cast<double>(filters_)));
      STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(name(), "bias", {filters_}, binit));
      STRATA_ASSIGN_OR_RETURN(y, ctx.graph->BiasAdd(y, b, name() + "/bias_add"));
    }
    return ApplyActivation(*ctx.graph, o_.activation, y, name() + "/" + o_.activation);
  }

 private:
  int64_t filters_, k_;
  Conv2DOptions o_;
};

// Depthwise convolution as a grouped convolution with groups == channels.
Result<Value> Depthwise(BuildContext& ctx, const std::string& layer, const std::string& label, Value x, int64_t k,
                        int strides, const std::string& padding, int multiplier, int dilation,
                        const std::string& initializer, float l2) {
  if (x.shape().rank() != 4)
    return InvalidArgument(label + ": expects [batch, height, width, channels], got " + x.shape().ToString());
  STRATA_ASSIGN_OR_RETURN(auto pad, ParsePadding(padding, label));
  const int64_t c = x.shape()[3];
  // Keras's depthwise kernel is [k, k, C, multiplier]: fan_in k*k*C, fan_out k*k*multiplier.
  STRATA_ASSIGN_OR_RETURN(auto init, InitOptions(initializer, static_cast<double>(k * k * c),
                                                 static_cast<double>(k * k * multiplier)));
  STRATA_ASSIGN_OR_RETURN(Value w, ctx.Variable(layer, "depthwise_kernel", {k, k, 1, c * multiplier}, init, true, l2));
  graph::Conv2DOptions co;
  co.stride_h = co.stride_w = strides;
  co.padding = pad;
  co.dilation_h = co.dilation_w = dilation;
  co.groups = static_cast<int>(c);
  return ctx.graph->Conv2D(x, w, co, layer + "/depthwise");
}

// Keras's [k, k, C, M] for Strata's depthwise [k, k, 1, C * M] (Layer::KerasWeightShape).
Shape DepthwiseKerasShape(const std::string& weight, const Shape& s, int multiplier) {
  if (weight != "depthwise_kernel" || s.rank() != 4 || s[2] != 1 || multiplier < 1 || s[3] % multiplier != 0) return s;
  return Shape({s[0], s[1], s[3] / multiplier, multiplier});
}

class DepthwiseConv2DLayer final : public Layer {
 public:
  DepthwiseConv2DLayer(int k, DepthwiseConv2DOptions o) : k_(k), o_(std::move(o)) {}
  std::string class_name() const override { return "DepthwiseConv2D"; }
  std::string default_name() const override { return "depthwise_conv2d"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    STRATA_ASSIGN_OR_RETURN(Value y, Depthwise(ctx, name(), Label(), in[0], k_, o_.strides, o_.padding,
                                               o_.depth_multiplier, o_.dilation_rate, o_.depthwise_initializer,
                                               o_.depthwise_regularizer_l2));
    if (o_.use_bias) {
      STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(name(), "bias", {y.shape()[3]}, {}));
      STRATA_ASSIGN_OR_RETURN(y, ctx.graph->BiasAdd(y, b, name() + "/bias_add"));
    }
    return ApplyActivation(*ctx.graph, o_.activation, y, name() + "/" + o_.activation);
  }

  Shape KerasWeightShape(const std::string& weight, const Shape& s) const override {
    return DepthwiseKerasShape(weight, s, o_.depth_multiplier);
  }

 private:
  int64_t k_;
  DepthwiseConv2DOptions o_;
};

class SeparableConv2DLayer final : public Layer {
 public:
  SeparableConv2DLayer(int filters, int k, SeparableConv2DOptions o) : filters_(filters), k_(k), o_(std::move(o)) {}
  std::string class_name() const override { return "SeparableConv2D"; }
  std::string default_name() const override { return "separable_conv2d"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    STRATA_ASSIGN_OR_RETURN(Value d, Depthwise(ctx, name(), Label(), in[0], k_, o_.strides, o_.padding,
                                               o_.depth_multiplier, 1, o_.depthwise_initializer, 0));
    STRATA_ASSIGN_OR_RETURN(auto pinit, InitOptions(o_.pointwise_initializer, static_cast<double>(d.shape()[3]),
                                                    static_cast<double>(filters_)));
    STRATA_ASSIGN_OR_RETURN(Value pw, ctx.Variable(name(), "pointwise_kernel", {1, 1, d.shape()[3], filters_}, pinit));
    STRATA_ASSIGN_OR_RETURN(Value y, ctx.graph->Conv2D(d, pw, {}, name() + "/pointwise"));
    if (o_.use_bias) {
      STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(name(), "bias", {filters_}, {}));
      STRATA_ASSIGN_OR_RETURN(y, ctx.graph->BiasAdd(y, b, name() + "/bias_add"));
    }
    return ApplyActivation(*ctx.graph, o_.activation, y, name() + "/" + o_.activation);
  }

  Shape KerasWeightShape(const std::string& weight, const Shape& s) const override {
    return DepthwiseKerasShape(weight, s, o_.depth_multiplier);
  }

 private:
  int64_t filters_, k_;
  SeparableConv2DOptions o_;
};

class BatchNormalizationLayer final : public Layer {
 public:
  explicit BatchNormalizationLayer(BatchNormalizationOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "BatchNormalization"; }
  std::string default_name() const override { return "batch_normalization"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    Value x = in[0];
    if (x.shape().rank() < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + x.shape().ToString());
    const int64_t c = x.shape()[-1];
    graph::VariableOptions ones, zeros;
    ones.init = graph::Init::kOnes;
    // gamma/beta always exist in the graph (the kernels want them); center/scale = false
    // makes them non-trainable constants 1 and 0, as Keras's behaviour implies.
    STRATA_ASSIGN_OR_RETURN(Value gamma, ctx.Variable(name(), "gamma", {c}, ones, o_.scale));
    STRATA_ASSIGN_OR_RETURN(Value beta, ctx.Variable(name(), "beta", {c}, zeros, o_.center));
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

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(std::string a, std::string cls, std::string prefix)
      : a_(std::move(a)), cls_(std::move(cls)), prefix_(std::move(prefix)) {}
  std::string class_name() const override { return cls_; }
  std::string default_name() const override { return prefix_; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    if (a_ == "softmax") return ctx.graph->Softmax(in[0], name());
    if (a_ == "hard_sigmoid") return ctx.graph->HardSigmoid(in[0], name());
    STRATA_ASSIGN_OR_RETURN(graph::Activation a, ParseActivation(a_));
    if (a == graph::Activation::kLinear) return ctx.graph->Identity(in[0], name());
    return ctx.graph->Act(a, in[0], name());
  }

 private:
  std::string a_, cls_, prefix_;
};

class Pool2DLayer final : public Layer {
 public:
  Pool2DLayer(bool max, Pool2DOptions o) : max_(max), o_(std::move(o)) {}
  std::string class_name() const override { return max_ ? "MaxPooling2D" : "AveragePooling2D"; }
  std::string default_name() const override { return max_ ? "max_pooling2d" : "average_pooling2d"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    STRATA_ASSIGN_OR_RETURN(auto pad, ParsePadding(o_.padding, Label()));
    graph::PoolOptions po;
    po.window_h = po.window_w = o_.pool_size;
    po.stride_h = po.stride_w = o_.strides > 0 ? o_.strides : o_.pool_size;
    po.padding = pad;
    return max_ ? ctx.graph->MaxPool(in[0], po, name()) : ctx.graph->AvgPool(in[0], po, name());
  }

 private:
  bool max_;
  Pool2DOptions o_;
};

class GlobalPoolLayer final : public Layer {
 public:
  explicit GlobalPoolLayer(bool max) : max_(max) {}
  std::string class_name() const override { return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D"; }
  std::string default_name() const override { return max_ ? "global_max_pooling2d" : "global_average_pooling2d"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    return max_ ? ctx.graph->GlobalMaxPool(in[0], name()) : ctx.graph->GlobalAvgPool(in[0], name());
  }

 private:
  bool max_;
};

class FlattenLayer final : public Layer {
 public:
  std::string class_name() const override { return "Flatten"; }
  std::string default_name() const override { return "flatten"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    return ctx.graph->Flatten(in[0], name());
  }
};

class DropoutLayer final : public Layer {
 public:
  explicit DropoutLayer(float rate) : rate_(rate) {}
  std::string class_name() const override { return "Dropout"; }
  std::string default_name() const override { return "dropout"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    if (rate_ < 0 || rate_ >= 1) return InvalidArgument(Label() + ": rate must be in [0, 1), got " + std::to_string(rate_));
    if (!ctx.training || rate_ == 0) return ctx.graph->Identity(in[0], name());
    uint64_t seed = (ctx.seed + static_cast<uint64_t>(ctx.replica) * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
    for (unsigned char c : name()) seed = (seed ^ c) * 1099511628211ull;
    return ctx.graph->Dropout(in[0], rate_, seed, name());
  }

 private:
  float rate_;
};

class AddLayer final : public Layer {
 public:
  std::string class_name() const override { return "Add"; }
  std::string default_name() const override { return "add"; }
  int num_inputs() const override { return -1; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    Value y = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      if (in[i].shape() != y.shape())
        return InvalidArgument(Label() + ": input " + std::to_string(i) + " has shape " + in[i].shape().ToString() +
                               ", expected " + y.shape().ToString());
      STRATA_ASSIGN_OR_RETURN(y, ctx.graph->Add(y, in[i], in.size() == 2 ? name() : name() + "/" + std::to_string(i)));
    }
    return y;
  }
};

class ConcatenateLayer final : public Layer {
 public:
  explicit ConcatenateLayer(int axis) : axis_(axis) {}
  std::string class_name() const override { return "Concatenate"; }
  std::string default_name() const override { return "concatenate"; }
  int num_inputs() const override { return -1; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    int axis = axis_ < 0 ? axis_ + in[0].shape().rank() : axis_;
    return ctx.graph->Concat(in, axis, name());
  }

 private:
  int axis_;
};

class RescalingLayer final : public Layer {
 public:
  RescalingLayer(float scale, float offset) : scale_(scale), offset_(offset) {}
  std::string class_name() const override { return "Rescaling"; }
  std::string default_name() const override { return "rescaling"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    STRATA_ASSIGN_OR_RETURN(Value y, ctx.graph->Scale(in[0], scale_, name()));
    if (offset_ == 0) return y;
    Value c = ctx.graph->Constant(offset_, y.shape(), name() + "/offset");
    return ctx.graph->Add(y, c, name() + "/add");
  }

 private:
  float scale_, offset_;
};

class ReshapeLayer final : public Layer {
 public:
  explicit ReshapeLayer(std::vector<int64_t> target) : target_(std::move(target)) {}
  std::string class_name() const override { return "Reshape"; }
  std::string default_name() const override { return "reshape"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    std::vector<int64_t> dims = {in[0].shape()[0]};
    dims.insert(dims.end(), target_.begin(), target_.end());
    return ctx.graph->Reshape(in[0], Shape(std::move(dims)), name());
  }

 private:
  std::vector<int64_t> target_;
};

// ---- layers the Keras applications need (issue 18), composed from graph ops ----------------

class ZeroPadding2DLayer final : public Layer {
 public:
  explicit ZeroPadding2DLayer(ZeroPadding2DOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "ZeroPadding2D"; }
  std::string default_name() const override { return "zero_padding2d"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    Value x = in[0];
    if (x.shape().rank() != 4)
      return InvalidArgument(Label() + ": expects [batch, height, width, channels], got " + x.shape().ToString());
    if (o_.top < 0 || o_.bottom < 0 || o_.left < 0 || o_.right < 0)
      return InvalidArgument(Label() + ": padding must be >= 0, got ((" + std::to_string(o_.top) + ", " +
                             std::to_string(o_.bottom) + "), (" + std::to_string(o_.left) + ", " +
                             std::to_string(o_.right) + "))");
    return ctx.graph->ZeroPad2D(x, o_.top, o_.bottom, o_.left, o_.right, name());
  }

 private:
  ZeroPadding2DOptions o_;
};

class ReLULayer final : public Layer {
 public:
  explicit ReLULayer(ReLUOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "ReLU"; }
  std::string default_name() const override { return "re_lu"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    graph::Graph& g = *ctx.graph;
    Value x = in[0];
    const bool has_max = o_.max_value >= 0;
    if (o_.negative_slope < 0) return InvalidArgument(Label() + ": negative_slope must be >= 0");
    if (o_.threshold != 0)
      return InvalidArgument(Label() + ": threshold " + std::to_string(o_.threshold) +
                             " is not supported (only threshold 0)");
    if (x.shape().rank() < 1) return InvalidArgument(Label() + ": expects a tensor of rank >= 1, got a scalar");
    return g.ClippedRelu(x, has_max ? o_.max_value : -1.0f, o_.negative_slope, name());
  }

 private:
  ReLUOptions o_;
};

class MultiplyLayer final : public Layer {
 public:
  std::string class_name() const override { return "Multiply"; }
  std::string default_name() const override { return "multiply"; }
  int num_inputs() const override { return -1; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    graph::Graph& g = *ctx.graph;
    // The output shape: per dimension the largest extent; every input has it or 1.
    const int rank = in[0].shape().rank();
    std::vector<int64_t> out = in[0].shape().dims();
    for (size_t i = 1; i < in.size(); ++i) {
      if (in[i].shape().rank() != rank)
        return InvalidArgument(Label() + ": input " + std::to_string(i) + " has shape " + in[i].shape().ToString() +
                               ", rank differs from " + in[0].shape().ToString());
      for (int d = 0; d < rank; ++d) out[d] = std::max(out[d], in[i].shape()[d]);
    }
    for (size_t i = 0; i < in.size(); ++i)
      for (int d = 0; d < rank; ++d)
        if (in[i].shape()[d] != out[d] && in[i].shape()[d] != 1)
          return InvalidArgument(Label() + ": input " + std::to_string(i) + " has shape " +
                                 in[i].shape().ToString() + ", which does not broadcast to " +
                                 Shape(out).ToString() + " (each dimension must match or be 1)");
    // Graph::Multiply broadcasts a size-1 operand in the kernel (no full-size copy).
    Value y = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(y, g.Multiply(y, in[i], i + 1 == in.size() ? name() : name() + "/" + std::to_string(i)));
    }
    return y;
  }
};

uint64_t DropoutSeed(const BuildContext& ctx, const std::string& name, uint64_t seed) {
  if (seed == 0) seed = ctx.seed;
  seed = (seed + static_cast<uint64_t>(ctx.replica) * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
  for (unsigned char c : name) seed = (seed ^ c) * 1099511628211ull;
  return seed;
}

class NoiseShapeDropoutLayer final : public Layer {
 public:
  NoiseShapeDropoutLayer(float rate, DropoutOptions o) : rate_(rate), o_(std::move(o)) {}
  std::string class_name() const override { return "Dropout"; }
  std::string default_name() const override { return "dropout"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    graph::Graph& g = *ctx.graph;
    Value x = in[0];
    if (!(rate_ >= 0 && rate_ < 1)) return InvalidArgument(Label() + ": rate must be in [0, 1), got " + std::to_string(rate_));
    const Shape& xs = x.shape();
    std::vector<int64_t> mask = xs.dims();
    if (!o_.noise_shape.empty()) {
      if (static_cast<int>(o_.noise_shape.size()) != xs.rank())
        return InvalidArgument(Label() + ": noise_shape has " + std::to_string(o_.noise_shape.size()) +
                               " entries, the input " + xs.ToString() + " has rank " + std::to_string(xs.rank()));
      for (int d = 0; d < xs.rank(); ++d) {
        const int64_t s = o_.noise_shape[d];
        if (s != 0 && s != 1 && s != xs[d])
          return InvalidArgument(Label() + ": noise_shape entry " + std::to_string(d) + " is " + std::to_string(s) +
                                 "; expected 0 (None), 1 or the input's extent " + std::to_string(xs[d]));
        if (s != 0) mask[d] = s;
      }
    }
    if (!ctx.training || rate_ == 0) return g.Identity(x, name());
    const uint64_t seed = DropoutSeed(ctx, name(), o_.seed);
    return g.Dropout(x, rate_, seed, Shape(mask), name());
  }

 private:
  float rate_;
  DropoutOptions o_;
};

class NormalizationLayer final : public Layer {
 public:
  explicit NormalizationLayer(NormalizationOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "Normalization"; }
  std::string default_name() const override { return "normalization"; }
  Result<Value> Call(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_RETURN_IF_ERROR(ExpectInputs(in));
    graph::Graph& g = *ctx.graph;
    Value x = in[0];
    const int rank = x.shape().rank();
    if (rank < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + x.shape().ToString());
    if (o_.axis != -1 && o_.axis != rank - 1)
      return InvalidArgument(Label() + ": only axis -1 (the channels) is supported, got " + std::to_string(o_.axis));
    const int64_t c = x.shape()[-1];
    auto init = [&](const std::vector<float>& v, float dflt, const char* what) -> Result<graph::VariableOptions> {
      graph::VariableOptions o;
      if (v.empty()) {
        o.init = graph::Init::kConstant;
        o.value = dflt;
      } else if (static_cast<int64_t>(v.size()) != c) {
        return InvalidArgument(Label() + ": " + what + " has " + std::to_string(v.size()) + " values, the input " +
                               x.shape().ToString() + " has " + std::to_string(c) + " channels");
      } else {
        o.init = graph::Init::kConstant;
        o.values = v;
      }
      return o;
    };
    STRATA_ASSIGN_OR_RETURN(auto mean_init, init(o_.mean, 0.0f, "mean"));
    STRATA_ASSIGN_OR_RETURN(auto var_init, init(o_.variance, 1.0f, "variance"));
    for (float v : o_.variance)
      if (!(v >= 0)) return InvalidArgument(Label() + ": variance values must be >= 0");
    STRATA_ASSIGN_OR_RETURN(Value mean, ctx.Variable(name(), "mean", {c}, mean_init, false));
    STRATA_ASSIGN_OR_RETURN(Value var, ctx.Variable(name(), "variance", {c}, var_init, false));
    STRATA_ASSIGN_OR_RETURN(Value count, ctx.Variable(name(), "count", Shape{}, {}, false));
    (void)count;  // Keras's adapt() state: saved and counted, unused by the forward pass
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

template <typename T, typename... Args>
LayerPtr Named(const std::string& name, Args&&... args) {
  auto l = std::make_shared<T>(std::forward<Args>(args)...);
  l->set_name(name);
  return l;
}

}  // namespace

LayerPtr Dense(int units, DenseOptions o) { std::string n = o.name; return Named<DenseLayer>(n, units, std::move(o)); }
LayerPtr Conv2D(int filters, int k, Conv2DOptions o) { std::string n = o.name; return Named<Conv2DLayer>(n, filters, k, std::move(o)); }
LayerPtr DepthwiseConv2D(int k, DepthwiseConv2DOptions o) { std::string n = o.name; return Named<DepthwiseConv2DLayer>(n, k, std::move(o)); }
LayerPtr SeparableConv2D(int filters, int k, SeparableConv2DOptions o) { std::string n = o.name; return Named<SeparableConv2DLayer>(n, filters, k, std::move(o)); }
LayerPtr BatchNormalization(BatchNormalizationOptions o) { std::string n = o.name; return Named<BatchNormalizationLayer>(n, std::move(o)); }
LayerPtr Activation(const std::string& a, const std::string& name) { return Named<ActivationLayer>(name, a, "Activation", "activation"); }
LayerPtr ReLU(const std::string& name) { return Named<ActivationLayer>(name, "relu", "ReLU", "re_lu"); }
LayerPtr MaxPooling2D(Pool2DOptions o) { std::string n = o.name; return Named<Pool2DLayer>(n, true, std::move(o)); }
LayerPtr AveragePooling2D(Pool2DOptions o) { std::string n = o.name; return Named<Pool2DLayer>(n, false, std::move(o)); }
LayerPtr GlobalAveragePooling2D(const std::string& name) { return Named<GlobalPoolLayer>(name, false); }
LayerPtr GlobalMaxPooling2D(const std::string& name) { return Named<GlobalPoolLayer>(name, true); }
LayerPtr Flatten(const std::string& name) { return Named<FlattenLayer>(name); }
LayerPtr Dropout(float rate, const std::string& name) { return Named<DropoutLayer>(name, rate); }
LayerPtr Add(const std::string& name) { return Named<AddLayer>(name); }
LayerPtr Concatenate(int axis, const std::string& name) { return Named<ConcatenateLayer>(name, axis); }
LayerPtr Rescaling(float scale, float offset, const std::string& name) { return Named<RescalingLayer>(name, scale, offset); }
LayerPtr Reshape(std::vector<int64_t> target, const std::string& name) { return Named<ReshapeLayer>(name, std::move(target)); }
LayerPtr ZeroPadding2D(ZeroPadding2DOptions o) { std::string n = o.name; return Named<ZeroPadding2DLayer>(n, std::move(o)); }
LayerPtr ZeroPadding2D(int padding, const std::string& name) {
  return ZeroPadding2D({.top = padding, .bottom = padding, .left = padding, .right = padding, .name = name});
}
LayerPtr ReLU(ReLUOptions o) { std::string n = o.name; return Named<ReLULayer>(n, std::move(o)); }
LayerPtr Multiply(const std::string& name) { return Named<MultiplyLayer>(name); }
LayerPtr Dropout(float rate, DropoutOptions o) { std::string n = o.name; return Named<NoiseShapeDropoutLayer>(n, rate, std::move(o)); }
LayerPtr Normalization(NormalizationOptions o) { std::string n = o.name; return Named<NormalizationLayer>(n, std::move(o)); }

}  // namespace layers
}  // namespace strata::keras
