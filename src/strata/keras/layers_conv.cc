// The convolution and pooling layers (Conv2D, DepthwiseConv2D, SeparableConv2D,
// ZeroPadding2D, Cropping2D, the pooling layers): each class, its factory (layers.h), how a Keras config
// builds it, and its registry entries.
#include "strata/keras/layers.h"

#include <nlohmann/json.hpp>

#include "strata/keras/layer_config.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/layers_internal.h"

namespace strata::keras {
namespace layers {
namespace {

using graph::Value;

class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(int filters, KernelSize k, Conv2DOptions o) : filters_(filters), kh_(k.h), kw_(k.w), o_(std::move(o)) {}
  std::string class_name() const override { return "Conv2D"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    Value x = in[0];
    if (x.shape().rank() != 4)
      return InvalidArgument(Label() + ": expects [batch, height, width, channels], got " + x.shape().ToString());
    if (o_.groups <= 0 || x.shape()[3] % o_.groups || filters_ % o_.groups)
      return InvalidArgument(Label() + ": groups " + std::to_string(o_.groups) + " must divide input channels " +
                             std::to_string(x.shape()[3]) + " and filters " + std::to_string(filters_));
    if (kh_ <= 0 || kw_ <= 0)
      return InvalidArgument(Label() + ": kernel_size must be positive, got (" + std::to_string(kh_) + ", " +
                             std::to_string(kw_) + ")");
    STRATA_ASSIGN_OR_RETURN(auto pad, ParsePadding(o_.padding, Label()));
    const double receptive = static_cast<double>(kh_ * kw_);
    STRATA_ASSIGN_OR_RETURN(auto kinit, InitOptions(o_.kernel_initializer,
                                                    receptive * static_cast<double>(x.shape()[3] / o_.groups),
                                                    receptive * static_cast<double>(filters_)));
    STRATA_ASSIGN_OR_RETURN(Value w, ctx.Variable(name(), "kernel", {kh_, kw_, x.shape()[3] / o_.groups, filters_},
                                                  kinit, true, o_.kernel_regularizer_l2));
    graph::Conv2DOptions co;
    co.stride_h = co.stride_w = o_.strides;
    co.padding = pad;
    co.dilation_h = co.dilation_w = o_.dilation_rate;
    co.groups = o_.groups;
    STRATA_ASSIGN_OR_RETURN(Value y, ctx.graph->Conv2D(x, w, co, name()));
    return BiasAndActivation(ctx, name(), y, filters_, o_.use_bias, o_.bias_initializer, o_.activation);
  }

 private:
  int64_t filters_, kh_, kw_;
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
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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

class ZeroPadding2DLayer final : public Layer {
 public:
  explicit ZeroPadding2DLayer(ZeroPadding2DOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "ZeroPadding2D"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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

// Keras's Cropping2D: rows [top, H - bottom) and columns [left, W - right) of every image.
class Cropping2DLayer final : public Layer {
 public:
  explicit Cropping2DLayer(Cropping2DOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "Cropping2D"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    Value x = in[0];
    if (x.shape().rank() != 4)
      return InvalidArgument(Label() + ": expects [batch, height, width, channels], got " + x.shape().ToString());
    const int64_t h = x.shape()[1], w = x.shape()[2];
    if (o_.top < 0 || o_.bottom < 0 || o_.left < 0 || o_.right < 0 || o_.top + o_.bottom >= h ||
        o_.left + o_.right >= w)
      return InvalidArgument(Label() + ": cropping ((" + std::to_string(o_.top) + ", " + std::to_string(o_.bottom) +
                             "), (" + std::to_string(o_.left) + ", " + std::to_string(o_.right) +
                             ")) must be >= 0 and leave rows and columns of input " + x.shape().ToString());
    STRATA_ASSIGN_OR_RETURN(Value rows, ctx.graph->Slice(x, 1, o_.top, h - o_.bottom, name() + "/rows"));
    return ctx.graph->Slice(rows, 2, o_.left, w - o_.right, name());
  }

 private:
  Cropping2DOptions o_;
};

class Pool2DLayer final : public Layer {
 public:
  Pool2DLayer(bool max, Pool2DOptions o) : max_(max), o_(std::move(o)) {}
  std::string class_name() const override { return max_ ? "MaxPooling2D" : "AveragePooling2D"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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
  GlobalPoolLayer(bool max, bool keepdims) : max_(max), keepdims_(keepdims) {}
  std::string class_name() const override { return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    if (!keepdims_) return max_ ? ctx.graph->GlobalMaxPool(in[0], name()) : ctx.graph->GlobalAvgPool(in[0], name());
    // Keras's keepdims: [N, 1, 1, C] (MobileNet's top convolves it).
    STRATA_ASSIGN_OR_RETURN(Value pooled, max_ ? ctx.graph->GlobalMaxPool(in[0], name() + "/pool")
                                               : ctx.graph->GlobalAvgPool(in[0], name() + "/pool"));
    const Shape& s = pooled.shape();
    return ctx.graph->Reshape(pooled, Shape{s[0], 1, 1, s[1]}, name());
  }

 private:
  bool max_, keepdims_;
};

Result<LayerPtr> Conv2DFromConfig(LayerConfig& c, const std::string& name) {
  Conv2DOptions o;
  STRATA_ASSIGN_OR_RETURN(int filters, c.Size("filters", 0));
  STRATA_ASSIGN_OR_RETURN(auto k, c.Size2("kernel_size", 3));
  STRATA_ASSIGN_OR_RETURN(o.strides, c.Size("strides", 1));
  STRATA_ASSIGN_OR_RETURN(o.padding, c.String("padding", "valid"));
  STRATA_ASSIGN_OR_RETURN(o.dilation_rate, c.Size("dilation_rate", 1));
  STRATA_ASSIGN_OR_RETURN(o.groups, c.Size("groups", 1));
  STRATA_RETURN_IF_ERROR(ReadKernelArgs(c, &o));
  o.name = name;
  return Conv2D(filters, {k.first, k.second}, o);
}

Result<LayerPtr> DepthwiseConv2DFromConfig(LayerConfig& c, const std::string& name) {
  DepthwiseConv2DOptions o;
  STRATA_ASSIGN_OR_RETURN(int k, c.Size("kernel_size", 3));
  STRATA_ASSIGN_OR_RETURN(o.strides, c.Size("strides", 1));
  STRATA_ASSIGN_OR_RETURN(o.padding, c.String("padding", "valid"));
  STRATA_ASSIGN_OR_RETURN(o.depth_multiplier, c.Size("depth_multiplier", 1));
  STRATA_ASSIGN_OR_RETURN(o.dilation_rate, c.Size("dilation_rate", 1));
  STRATA_ASSIGN_OR_RETURN(o.activation, c.String("activation", "linear"));
  STRATA_ASSIGN_OR_RETURN(o.use_bias, c.Bool("use_bias", true));
  STRATA_ASSIGN_OR_RETURN(o.depthwise_initializer, c.String("depthwise_initializer", "glorot_uniform"));
  STRATA_ASSIGN_OR_RETURN(o.depthwise_regularizer_l2, c.L2("depthwise_regularizer"));
  (void)c.String("bias_initializer", "zeros");
  o.name = name;
  return DepthwiseConv2D(k, o);
}

Result<LayerPtr> SeparableConv2DFromConfig(LayerConfig& c, const std::string& name) {
  SeparableConv2DOptions o;
  STRATA_ASSIGN_OR_RETURN(int filters, c.Size("filters", 0));
  STRATA_ASSIGN_OR_RETURN(int k, c.Size("kernel_size", 3));
  STRATA_ASSIGN_OR_RETURN(o.strides, c.Size("strides", 1));
  STRATA_ASSIGN_OR_RETURN(o.padding, c.String("padding", "valid"));
  STRATA_ASSIGN_OR_RETURN(o.depth_multiplier, c.Size("depth_multiplier", 1));
  STRATA_ASSIGN_OR_RETURN(o.activation, c.String("activation", "linear"));
  STRATA_ASSIGN_OR_RETURN(o.use_bias, c.Bool("use_bias", true));
  STRATA_ASSIGN_OR_RETURN(o.depthwise_initializer, c.String("depthwise_initializer", "glorot_uniform"));
  STRATA_ASSIGN_OR_RETURN(o.pointwise_initializer, c.String("pointwise_initializer", "glorot_uniform"));
  (void)c.String("bias_initializer", "zeros");
  (void)c.Size("dilation_rate", 1);
  o.name = name;
  return SeparableConv2D(filters, k, o);
}

// padding: int, [a, b] (rows a, columns b, both sides) or [[top, bottom], [left, right]].
// Keras's four-sided sizes (ZeroPadding2D's padding, Cropping2D's cropping): an int, [rows, cols]
// (both sides of each) or [[top, bottom], [left, right]], each a non-negative integer.
Status ReadSides(LayerConfig& c, const std::string& key, int* top, int* bottom, int* left, int* right) {
  const nlohmann::json* p = c.Raw(key);
  auto is_int = [](const nlohmann::json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (1 << 30);
  };
  if (p == nullptr) {
  } else if (is_int(*p)) {
    *top = *bottom = *left = *right = p->get<int>();
  } else if (p->is_array() && p->size() == 2 && is_int((*p)[0]) && is_int((*p)[1])) {
    *top = *bottom = (*p)[0].get<int>();
    *left = *right = (*p)[1].get<int>();
  } else if (p->is_array() && p->size() == 2 && (*p)[0].is_array() && (*p)[1].is_array() && (*p)[0].size() == 2 &&
             (*p)[1].size() == 2 && is_int((*p)[0][0]) && is_int((*p)[0][1]) && is_int((*p)[1][0]) &&
             is_int((*p)[1][1])) {
    *top = (*p)[0][0].get<int>();
    *bottom = (*p)[0][1].get<int>();
    *left = (*p)[1][0].get<int>();
    *right = (*p)[1][1].get<int>();
  } else {
    return InvalidArgument(c.label() + ": " + key + " must be an integer, [rows, cols] or [[top, bottom], [left, right]]"
                           " of non-negative integers, got " + p->dump());
  }
  return Status::OK();
}

Result<LayerPtr> ZeroPadding2DFromConfig(LayerConfig& c, const std::string& name) {
  ZeroPadding2DOptions o;
  o.name = name;
  STRATA_RETURN_IF_ERROR(ReadSides(c, "padding", &o.top, &o.bottom, &o.left, &o.right));
  return ZeroPadding2D(o);
}

Result<LayerPtr> Cropping2DFromConfig(LayerConfig& c, const std::string& name) {
  Cropping2DOptions o;
  o.name = name;
  STRATA_RETURN_IF_ERROR(ReadSides(c, "cropping", &o.top, &o.bottom, &o.left, &o.right));
  return Cropping2D(o);
}

Result<Pool2DOptions> Pool2DFromConfig(LayerConfig& c, const std::string& name) {
  Pool2DOptions o;
  STRATA_ASSIGN_OR_RETURN(o.pool_size, c.Size("pool_size", 2));
  STRATA_ASSIGN_OR_RETURN(o.strides, c.Size("strides", 0));
  STRATA_ASSIGN_OR_RETURN(o.padding, c.String("padding", "valid"));
  o.name = name;
  return o;
}

Result<LayerPtr> MaxPooling2DFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(Pool2DOptions o, Pool2DFromConfig(c, name));
  return MaxPooling2D(o);
}

Result<LayerPtr> AveragePooling2DFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(Pool2DOptions o, Pool2DFromConfig(c, name));
  return AveragePooling2D(o);
}

Result<LayerPtr> GlobalAveragePooling2DFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(bool keepdims, c.Bool("keepdims", false));
  return GlobalAveragePooling2D(GlobalPool2DOptions{.keepdims = keepdims, .name = name});
}

Result<LayerPtr> GlobalMaxPooling2DFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(bool keepdims, c.Bool("keepdims", false));
  return GlobalMaxPooling2D(GlobalPool2DOptions{.keepdims = keepdims, .name = name});
}

}  // namespace

LayerPtr Conv2D(int filters, KernelSize k, Conv2DOptions o) { std::string n = o.name; return Named<Conv2DLayer>(n, filters, k, std::move(o)); }
LayerPtr DepthwiseConv2D(int k, DepthwiseConv2DOptions o) { std::string n = o.name; return Named<DepthwiseConv2DLayer>(n, k, std::move(o)); }
LayerPtr SeparableConv2D(int filters, int k, SeparableConv2DOptions o) { std::string n = o.name; return Named<SeparableConv2DLayer>(n, filters, k, std::move(o)); }
LayerPtr Cropping2D(Cropping2DOptions o) { std::string n = o.name; return Named<Cropping2DLayer>(n, std::move(o)); }
LayerPtr MaxPooling2D(Pool2DOptions o) { std::string n = o.name; return Named<Pool2DLayer>(n, true, std::move(o)); }
LayerPtr AveragePooling2D(Pool2DOptions o) { std::string n = o.name; return Named<Pool2DLayer>(n, false, std::move(o)); }
LayerPtr GlobalAveragePooling2D(GlobalPool2DOptions o) { return Named<GlobalPoolLayer>(o.name, false, o.keepdims); }
LayerPtr GlobalMaxPooling2D(GlobalPool2DOptions o) { return Named<GlobalPoolLayer>(o.name, true, o.keepdims); }
LayerPtr GlobalAveragePooling2D(const std::string& name) { return GlobalAveragePooling2D(GlobalPool2DOptions{.name = name}); }
LayerPtr GlobalMaxPooling2D(const std::string& name) { return GlobalMaxPooling2D(GlobalPool2DOptions{.name = name}); }
LayerPtr ZeroPadding2D(ZeroPadding2DOptions o) { std::string n = o.name; return Named<ZeroPadding2DLayer>(n, std::move(o)); }
LayerPtr ZeroPadding2D(int padding, const std::string& name) {
  return ZeroPadding2D({.top = padding, .bottom = padding, .left = padding, .right = padding, .name = name});
}

}  // namespace layers

std::vector<LayerClass> ConvLayerClasses() {
  using namespace layers;
  return {{"Conv2D", Conv2DFromConfig},
          {"DepthwiseConv2D", DepthwiseConv2DFromConfig},
          {"SeparableConv2D", SeparableConv2DFromConfig},
          {"ZeroPadding2D", ZeroPadding2DFromConfig},
          {"Cropping2D", Cropping2DFromConfig},
          {"MaxPooling2D", MaxPooling2DFromConfig},
          {"MaxPool2D", MaxPooling2DFromConfig},
          {"AveragePooling2D", AveragePooling2DFromConfig},
          {"AvgPool2D", AveragePooling2DFromConfig},
          {"GlobalAveragePooling2D", GlobalAveragePooling2DFromConfig},
          {"GlobalMaxPooling2D", GlobalMaxPooling2DFromConfig}};
}

}  // namespace strata::keras
