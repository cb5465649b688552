// keras::Layer: the small base class every Keras layer derives from.
//
// A layer is a description (its config) that emits graph ops when called on symbolic
// values. The same layer object is called once per graph it appears in (the training graph,
// the evaluation graph, the summary probe); its variables are named "<layer>/<var>" so every
// graph of a model addresses the same weights in one VariableStore.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/graph/graph.h"

namespace strata::keras {

// What a layer sees while it emits ops into a graph.
struct BuildContext {
  graph::Graph* graph = nullptr;
  bool training = false;   // dropout active, batch norm uses batch statistics
  uint64_t seed = 0;       // the model's seed: initializers and dropout derive from it
  int replica = 0;         // dropout masks differ between replicas (each sees other examples)
  // The layer being called is frozen (Layer::trainable false): its variables are created
  // non-trainable (no gradient, no optimizer slots) and a BatchNormalization runs in inference
  // mode, as in Keras >= 2.1. Model::BuildForward sets it around each layer's call.
  bool frozen = false;
  // Inference programs only (predict / evaluate): a BatchNormalization whose input is a
  // convolution's output (with or without its bias) folds into that convolution, which is
  // re-emitted with kernel w * gamma / sqrt(var + eps) and bias (b - mean) * gamma /
  // sqrt(var + eps) + beta, computed from the variables at every run (so always current);
  // the original convolution is then read by nothing and not scheduled. Saves one pass over
  // the activation per folded batch norm, and lets a following ReLU fuse into the convolution.
  // Off for training graphs and for the graph exporters read (BuildInferenceGraph).
  bool fold_batch_norm = false;
  // Variables created so far in this build, with their layer, for summary() and L2 losses.
  struct VariableUse {
    std::string layer;
    graph::Value value;
    bool trainable;  // as the layer asks, were it not frozen (summary() counts frozen layers' as non-trainable)
    float l2 = 0;  // > 0: the layer asks for an L2 penalty on this variable
  };
  std::vector<VariableUse> variables;

  // Creates "<layer>/<name>" (or returns it if this graph already has it).
  Result<graph::Value> Variable(const std::string& layer, const std::string& name, Shape shape,
                                graph::VariableOptions options, bool trainable = true, float l2 = 0);
};

// Keras initializer names: "glorot_uniform" (default for kernels), "he_normal", "zeros", "ones".
Result<graph::Init> ParseInitializer(const std::string& name);
// Keras activation names: "linear"/"" , "relu", "relu6", "gelu" (the erf form), "gelu_approximate"
// (the tanh form: keras.activations.gelu(approximate=True)), "swish"/"silu", "sigmoid", "tanh".
// "softmax" (not element-wise) and "hard_sigmoid" (tf.keras 2.x: clip(0.2 x + 0.5, 0, 1),
// composed from relu6) are handled by the layers (Activation, Dense, Conv2D...), not here.
Result<graph::Activation> ParseActivation(const std::string& name);

class Layer {
 public:
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // Keras's class name: "Conv2D", "Dense".
  virtual std::string class_name() const = 0;
  // Keras's default name prefix: its class name in snake case, by Keras's rule ("conv2d",
  // "batch_normalization", "re_lu"); a layer whose prefix differs says its own.
  virtual std::string default_name() const;
  // Emits the layer's ops on `inputs`, after checking there are num_inputs() of them.
  Result<graph::Value> Call(BuildContext& ctx, const std::vector<graph::Value>& inputs);
  virtual int num_inputs() const { return 1; }  // -1: any number >= 2 (Add, Concatenate)
  // The shape Keras gives the weight `weight` ("depthwise_kernel") whose Strata shape is
  // `strata_shape`, where the two differ: a depthwise kernel is [k, k, 1, C * M] here (a grouped
  // convolution) and [k, k, C, M] in Keras, the same values in the same order. Weight files use it.
  virtual Shape KerasWeightShape(const std::string& weight, const Shape& strata_shape) const { return strata_shape; }
  // A weight file's value of `weight` ("position_embedding/embeddings") in another shape than
  // the model's: true where the layer resamples it into `to` (`out`, to's element count), as a
  // ViT's position embedding to another input size; false: the shapes mismatch. With out null,
  // only whether it would.
  virtual bool ResampleWeight(const std::string& weight, const Shape& from, const std::vector<float>& in,
                              const Shape& to, std::vector<float>* out) const {
    return false;
  }

  // Keras's layer.trainable. false freezes the layer: its weights stay as they are (no
  // gradient is computed for them and the optimizer keeps no slots for them) and a
  // BatchNormalization normalizes with its moving statistics, which it no longer updates.
  // A change takes effect at the model's next compile(), as in Keras; fit() on a model whose
  // layers changed since compile() fails and says so.
  bool trainable = true;

 protected:
  // "conv2d_1 (Conv2D)": prefixes errors.
  std::string Label() const { return name_ + " (" + class_name() + ")"; }
  // What Call does once the inputs are checked: the layer's own ops.
  virtual Result<graph::Value> Build(BuildContext& ctx, const std::vector<graph::Value>& inputs) = 0;

 private:
  std::string name_;
};

using LayerPtr = std::shared_ptr<Layer>;

}  // namespace strata::keras

#pragma GCC visibility pop
