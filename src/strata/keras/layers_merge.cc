// The merge layers (Add, Multiply, Concatenate, CustomScaleLayer): each class, its factory (layers.h), how a
// Keras config builds it, and its registry entries.
#include "strata/keras/layers.h"

#include <algorithm>

#include "strata/keras/layer_config.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/layers_internal.h"

namespace strata::keras {
namespace layers {
namespace {

using graph::Value;

class AddLayer final : public Layer {
 public:
  std::string class_name() const override { return "Add"; }
  int num_inputs() const override { return -1; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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

class MultiplyLayer final : public Layer {
 public:
  std::string class_name() const override { return "Multiply"; }
  int num_inputs() const override { return -1; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
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

class ConcatenateLayer final : public Layer {
 public:
  explicit ConcatenateLayer(int axis) : axis_(axis) {}
  std::string class_name() const override { return "Concatenate"; }
  int num_inputs() const override { return -1; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    int axis = axis_ < 0 ? axis_ + in[0].shape().rank() : axis_;
    return ctx.graph->Concat(in, axis, name());
  }

 private:
  int axis_;
};

// InceptionResNetV2's scaled residual, inputs[0] + inputs[1] * scale (keras.applications'
// CustomScaleLayer; tf.keras before 2.13 wrote it as a Lambda of the same expression).
class ScaledResidualLayer final : public Layer {
 public:
  explicit ScaledResidualLayer(float scale) : scale_(scale) {}
  std::string class_name() const override { return "CustomScaleLayer"; }
  int num_inputs() const override { return 2; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    if (in.size() != 2) return InvalidArgument(Label() + ": takes [shortcut, residual], got " + std::to_string(in.size()) + " inputs");
    if (in[0].shape() != in[1].shape())
      return InvalidArgument(Label() + ": the residual's shape " + in[1].shape().ToString() +
                             " differs from the shortcut's " + in[0].shape().ToString());
    STRATA_ASSIGN_OR_RETURN(Value scaled, ctx.graph->Scale(in[1], scale_, name() + "/scale"));
    return ctx.graph->Add(in[0], scaled, name());
  }

 private:
  float scale_;
};

Result<LayerPtr> AddFromConfig(LayerConfig&, const std::string& name) { return Add(name); }

Result<LayerPtr> MultiplyFromConfig(LayerConfig&, const std::string& name) { return Multiply(name); }

Result<LayerPtr> ConcatenateFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(int axis, c.Size("axis", -1));
  return Concatenate(axis, name);
}

Result<LayerPtr> CustomScaleLayerFromConfig(LayerConfig& c, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(double scale, c.Number("scale", 1.0));
  return CustomScaleLayer(static_cast<float>(scale), name);
}

}  // namespace

LayerPtr Add(const std::string& name) { return Named<AddLayer>(name); }
LayerPtr Concatenate(int axis, const std::string& name) { return Named<ConcatenateLayer>(name, axis); }
LayerPtr Multiply(const std::string& name) { return Named<MultiplyLayer>(name); }
LayerPtr CustomScaleLayer(float scale, const std::string& name) { return Named<ScaledResidualLayer>(name, scale); }

}  // namespace layers

std::vector<LayerClass> MergeLayerClasses() {
  using namespace layers;
  return {{"Add", AddFromConfig},
          {"Multiply", MultiplyFromConfig},
          {"Concatenate", ConcatenateFromConfig},
          {"CustomScaleLayer", CustomScaleLayerFromConfig}};
}

}  // namespace strata::keras
