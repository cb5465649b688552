// The core layers (Dense, Activation, ReLU, Flatten, Dropout, Rescaling, Reshape, LayerScale, StochasticDepth,
// Embedding): each
// class, its factory (layers.h), how a Keras config builds it, and its registry entries.
#include "strata/keras/layers.h"

#include <nlohmann/json.hpp>

#include "strata/keras/layer_config.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/layers_internal.h"

namespace strata::keras {
namespace layers {
namespace {

using graph::Value;

class DenseLayer final : public Layer {
 public:
  DenseLayer(int units, DenseOptions o) : units_(units), o_(std::move(o)) {}
  std::string class_name() const override { return "Dense"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    graph::Graph& g = *ctx.graph;
    Value x = in[0];
    const Shape xs = x.shape();
    if (xs.rank() < 2)
      return InvalidArgument(Label() + ": expects an input of rank 2 or more [batch, ..., features], got " +
                             xs.ToString());
    if (units_ <= 0) return InvalidArgument(Label() + ": units must be positive");
    const int64_t features = xs[-1];
    STRATA_ASSIGN_OR_RETURN(auto kinit, InitOptions(o_.kernel_initializer, static_cast<double>(features),
                                                    static_cast<double>(units_)));
    STRATA_ASSIGN_OR_RETURN(Value w, ctx.Variable(name(), "kernel", {features, units_}, kinit, true,
                                                  o_.kernel_regularizer_l2));
    // Any rank, as Keras's: the kernel contracts the last axis; the leading axes are rows.
    if (xs.rank() > 2) { STRATA_ASSIGN_OR_RETURN(x, g.Reshape(x, Shape{-1, features}, name() + "/rows")); }
    STRATA_ASSIGN_OR_RETURN(Value y, g.MatMul(x, w, false, false, name()));
    STRATA_ASSIGN_OR_RETURN(y, BiasAndActivation(ctx, name(), y, units_, o_.use_bias, o_.bias_initializer,
                                                 o_.activation));
    if (xs.rank() == 2) return y;
    std::vector<int64_t> out = xs.dims();
    out.back() = units_;
    return g.Reshape(y, Shape(out), name() + "/unrows");
  }

 private:
  int64_t units_;
  DenseOptions o_;
};

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(std::string a, std::string cls) : a_(std::move(a)), cls_(std::move(cls)) {}
  std::string class_name() const override { return cls_; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    // The layer's own name on the node: a softmax or linear one too (ApplyActivation would
    // suffix the one and skip the other).
    if (a_ == "softmax") return ctx.graph->Softmax(in[0], name());
    if (a_.empty() || a_ == "linear") return ctx.graph->Identity(in[0], name());
    return ApplyActivation(*ctx.graph, a_, in[0], name());
  }

 private:
  std::string a_, cls_;
};

class ReLULayer final : public Layer {
 public:
  explicit ReLULayer(ReLUOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "ReLU"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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

class FlattenLayer final : public Layer {
 public:
  std::string class_name() const override { return "Flatten"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    return ctx.graph->Flatten(in[0], name());
  }
};

class DropoutLayer final : public Layer {
 public:
  explicit DropoutLayer(float rate) : rate_(rate) {}
  std::string class_name() const override { return "Dropout"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    if (rate_ < 0 || rate_ >= 1) return InvalidArgument(Label() + ": rate must be in [0, 1), got " + std::to_string(rate_));
    if (!ctx.training || rate_ == 0) return ctx.graph->Identity(in[0], name());
    uint64_t seed = (ctx.seed + static_cast<uint64_t>(ctx.replica) * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
    for (unsigned char c : name()) seed = (seed ^ c) * 1099511628211ull;
    return ctx.graph->Dropout(in[0], rate_, seed, name());
  }

 private:
  float rate_;
};

class NoiseShapeDropoutLayer final : public Layer {
 public:
  NoiseShapeDropoutLayer(float rate, DropoutOptions o) : rate_(rate), o_(std::move(o)) {}
  std::string class_name() const override { return "Dropout"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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

class RescalingLayer final : public Layer {
 public:
  RescalingLayer(float scale, float offset) : scale_(scale), offset_(offset) {}
  std::string class_name() const override { return "Rescaling"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    STRATA_ASSIGN_OR_RETURN(Value y, ctx.graph->Scale(in[0], scale_, name()));
    if (offset_ == 0) return y;
    Value c = ctx.graph->Constant(offset_, y.shape(), name() + "/offset");
    return ctx.graph->Add(y, c, name() + "/add");
  }

 private:
  float scale_, offset_;
};

class LayerScaleLayer final : public Layer {
 public:
  LayerScaleLayer(float init_values, int projection_dim) : init_(init_values), dim_(projection_dim) {}
  std::string class_name() const override { return "LayerScale"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    graph::Graph& g = *ctx.graph;
    const Value x = in[0];
    const Shape& xs = x.shape();
    if (xs.rank() < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + xs.ToString());
    if (xs[-1] != dim_)
      return InvalidArgument(Label() + ": projection_dim " + std::to_string(dim_) + " does not match the input " +
                             xs.ToString() + " (its last axis)");
    STRATA_ASSIGN_OR_RETURN(Value gamma, ctx.Variable(name(), "gamma", {dim_},
                                                      {.init = graph::Init::kConstant, .value = init_}));
    // x * gamma along the last axis: a broadcasting Multiply, whose gradient sums dy * x over
    // the other axes for gamma.
    std::vector<int64_t> ones(static_cast<size_t>(xs.rank()), 1);
    ones.back() = dim_;
    STRATA_ASSIGN_OR_RETURN(Value row, g.Reshape(gamma, Shape(ones), name() + "/gamma_row"));
    return g.Multiply(x, row, name());
  }

 private:
  float init_;
  int64_t dim_;
};

class EmbeddingLayer final : public Layer {
 public:
  explicit EmbeddingLayer(EmbeddingOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "Embedding"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    if (o_.input_dim < 1 || o_.output_dim < 1)
      return InvalidArgument(Label() + ": input_dim and output_dim must be positive");
    STRATA_ASSIGN_OR_RETURN(auto init, InitOptions(o_.embeddings_initializer, static_cast<double>(o_.input_dim),
                                                    static_cast<double>(o_.output_dim)));
    STRATA_ASSIGN_OR_RETURN(Value table, ctx.Variable(name(), "embeddings", {o_.input_dim, o_.output_dim}, init));
    return ctx.graph->Gather(table, in[0], name());
  }

 private:
  EmbeddingOptions o_;
};

class StochasticDepthLayer final : public Layer {
 public:
  explicit StochasticDepthLayer(float rate) : rate_(rate) {}
  std::string class_name() const override { return "StochasticDepth"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    const Value x = in[0];
    if (!(rate_ >= 0 && rate_ < 1))
      return InvalidArgument(Label() + ": drop_path_rate must be in [0, 1), got " + std::to_string(rate_));
    if (x.shape().rank() < 2) return InvalidArgument(Label() + ": expects a rank >= 2 input, got " + x.shape().ToString());
    if (!ctx.training || rate_ == 0) return ctx.graph->Identity(x, name());
    // One draw per example: the residual branch kept whole (scaled by 1 / keep) or dropped.
    std::vector<int64_t> mask(static_cast<size_t>(x.shape().rank()), 1);
    mask[0] = x.shape()[0];
    return ctx.graph->Dropout(x, rate_, DropoutSeed(ctx, name(), 0), Shape(mask), name());
  }

 private:
  float rate_;
};

class ReshapeLayer final : public Layer {
 public:
  explicit ReshapeLayer(std::vector<int64_t> target) : target_(std::move(target)) {}
  std::string class_name() const override { return "Reshape"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    std::vector<int64_t> dims = {in[0].shape()[0]};
    dims.insert(dims.end(), target_.begin(), target_.end());
    return ctx.graph->Reshape(in[0], Shape(std::move(dims)), name());
  }

 private:
  std::vector<int64_t> target_;
};

Result<LayerPtr> DenseFromConfig(LayerConfig& c, const std::string& name) {
  DenseOptions o;
  STRATA_ASSIGN_OR_RETURN(int units, c.Size("units", 0));
  STRATA_RETURN_IF_ERROR(ReadKernelArgs(c, &o));
  o.name = name;
  return Dense(units, o);
}

Result<LayerPtr> ActivationFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(std::string a, c.String("activation", "linear"));
  return Activation(a, name);
}

Result<LayerPtr> ReLUFromConfig(LayerConfig& c, const std::string& name) {
  ReLUOptions o;
  STRATA_ASSIGN_OR_RETURN(double max_value, c.Number("max_value", -1));
  STRATA_ASSIGN_OR_RETURN(double slope, c.Number("negative_slope", 0));
  STRATA_ASSIGN_OR_RETURN(double threshold, c.Number("threshold", 0));
  o.max_value = static_cast<float>(max_value);
  o.negative_slope = static_cast<float>(slope);
  o.threshold = static_cast<float>(threshold);
  o.name = name;
  return ReLU(o);
}

Result<LayerPtr> FlattenFromConfig(LayerConfig&, const std::string& name) { return Flatten(name); }

Result<LayerPtr> DropoutFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(double rate, c.Number("rate", 0.5));
  DropoutOptions o;
  o.name = name;
  STRATA_ASSIGN_OR_RETURN(double seed, c.Number("seed", 0));
  if (seed < 0) return InvalidArgument(c.label() + ": seed must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  if (const nlohmann::json* ns = c.Raw("noise_shape")) {
    if (!ns->is_array())
      return InvalidArgument(c.label() + ": noise_shape must be a list of integers or nulls, got " + ns->dump());
    for (const nlohmann::json& d : *ns) {
      if (d.is_null()) o.noise_shape.push_back(0);
      else if (d.is_number_integer() && d.get<int64_t>() > 0) o.noise_shape.push_back(d.get<int64_t>());
      else return InvalidArgument(c.label() + ": noise_shape must be a list of positive integers or nulls, got " +
                                  ns->dump());
    }
  }
  return Dropout(static_cast<float>(rate), o);
}

Result<LayerPtr> RescalingFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(double scale, c.Number("scale", 1));
  STRATA_ASSIGN_OR_RETURN(double offset, c.Number("offset", 0));
  return Rescaling(static_cast<float>(scale), static_cast<float>(offset), name);
}

Result<LayerPtr> LayerScaleFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(double init, c.Number("init_values", 1e-6));
  STRATA_ASSIGN_OR_RETURN(int dim, c.Size("projection_dim", 0));
  if (dim < 1) return InvalidArgument(c.label() + ": needs projection_dim >= 1");
  return LayerScale(static_cast<float>(init), dim, name);
}

Result<LayerPtr> EmbeddingFromConfig(LayerConfig& c, const std::string& name) {
  EmbeddingOptions o;
  o.name = name;
  STRATA_ASSIGN_OR_RETURN(o.input_dim, c.Size("input_dim", 0));
  STRATA_ASSIGN_OR_RETURN(o.output_dim, c.Size("output_dim", 0));
  STRATA_ASSIGN_OR_RETURN(o.embeddings_initializer, c.String("embeddings_initializer", "uniform"));
  STRATA_ASSIGN_OR_RETURN(bool mask_zero, c.Bool("mask_zero", false));
  if (mask_zero) return InvalidArgument(c.label() + ": mask_zero is not supported (Strata's layers take no masks)");
  if (o.input_dim < 1 || o.output_dim < 1) return InvalidArgument(c.label() + ": needs input_dim and output_dim >= 1");
  return Embedding(o);
}

Result<LayerPtr> StochasticDepthFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(double rate, c.Number("drop_path_rate", 0));
  return StochasticDepth(static_cast<float>(rate), name);
}

Result<LayerPtr> ReshapeFromConfig(LayerConfig& c, const std::string& name) {
  const nlohmann::json* t = c.Raw("target_shape");
  if (t == nullptr || !t->is_array()) return InvalidArgument(c.label() + ": needs target_shape");
  return Reshape(t->get<std::vector<int64_t>>(), name);
}

}  // namespace

LayerPtr Dense(int units, DenseOptions o) { std::string n = o.name; return Named<DenseLayer>(n, units, std::move(o)); }
LayerPtr Activation(const std::string& a, const std::string& name) { return Named<ActivationLayer>(name, a, "Activation"); }
LayerPtr ReLU(const std::string& name) { return Named<ActivationLayer>(name, "relu", "ReLU"); }
LayerPtr Flatten(const std::string& name) { return Named<FlattenLayer>(name); }
LayerPtr Dropout(float rate, const std::string& name) { return Named<DropoutLayer>(name, rate); }
LayerPtr Rescaling(float scale, float offset, const std::string& name) { return Named<RescalingLayer>(name, scale, offset); }
LayerPtr Reshape(std::vector<int64_t> target, const std::string& name) { return Named<ReshapeLayer>(name, std::move(target)); }
LayerPtr LayerScale(float init_values, int projection_dim, const std::string& name) {
  return Named<LayerScaleLayer>(name, init_values, projection_dim);
}
LayerPtr Embedding(EmbeddingOptions o) { std::string n = o.name; return Named<EmbeddingLayer>(n, std::move(o)); }
LayerPtr StochasticDepth(float drop_path_rate, const std::string& name) {
  return Named<StochasticDepthLayer>(name, drop_path_rate);
}
LayerPtr ReLU(ReLUOptions o) { std::string n = o.name; return Named<ReLULayer>(n, std::move(o)); }
LayerPtr Dropout(float rate, DropoutOptions o) { std::string n = o.name; return Named<NoiseShapeDropoutLayer>(n, rate, std::move(o)); }

}  // namespace layers

std::vector<LayerClass> CoreLayerClasses() {
  using namespace layers;
  return {{"Dense", DenseFromConfig},
          {"Activation", ActivationFromConfig},
          {"ReLU", ReLUFromConfig},
          {"Flatten", FlattenFromConfig},
          {"Dropout", DropoutFromConfig},
          {"Rescaling", RescalingFromConfig},
          {"Reshape", ReshapeFromConfig},
          {"LayerScale", LayerScaleFromConfig},
          {"StochasticDepth", StochasticDepthFromConfig},
          {"Embedding", EmbeddingFromConfig}};
}

}  // namespace strata::keras
