// graph::Graph: a symbolic graph of typed, shaped values, built once with static shapes.
//
// A model, its loss and gradients (graph/autodiff.h) are traced into one Graph;
// backend::Compile (backend/compile.h) turns it into a Program of kernels with every buffer
// planned ahead. The optimizer update is not a graph op: it runs on the program's flat
// parameter and gradient blocks (backend::Backend::ApplyUpdate). Nothing here computes numbers.
//
// Conventions (Keras's, channels_last):
//   images       [N, H, W, C]
//   conv kernels [KH, KW, C / groups, O]      (depthwise: groups == C, O == C * multiplier)
//   dense kernel [K, M]                       (x [N, K] . w [K, M] -> [N, M])
//   labels       i32 [N]                      (sparse categorical)
//
// Every builder checks shapes and dtypes and returns an error naming the op (its
// user-visible name, e.g. the Keras layer "conv2d_1") with the expected and found shapes:
//   "conv2d_1 (Conv2D): input channels 3 do not match kernel [3, 3, 1, 32] (expects 1 = C / groups)"
//
//   graph::Graph g;
//   auto x = g.Input("images", DType::kF32, {128, 28, 28, 1});
//   auto w = g.Variable("conv1/kernel", {3, 3, 1, 32}, {.init = Init::kGlorotUniform});
//   STRATA_ASSIGN_OR_RETURN(auto y, g.Conv2D(*x, *w, {.padding = Padding::kSame}, "conv1"));
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/shape.h"
#include "strata/core/status.h"

namespace strata::graph {

class Graph;

enum class OpKind : uint8_t {
  // Leaves.
  kInput, kVariable, kConstant,
  // Forward compute.
  kConv2D, kMatMul, kBiasAdd, kBatchNorm, kBatchNormInference, kLayerNorm, kActivation, kSoftmax, kMaskedSoftmax,
  kMaxPool, kAvgPool, kAdd, kSub, kMultiply, kScale, kConcat, kSlice, kReshape, kDropout,
  kCast, kReduceSum, kReduceMean, kBroadcast, kIdentity, kTranspose, kGather,
  kSoftmaxCrossEntropy, kMeanSquaredError,
  // Gradients (emitted by autodiff; usable directly).
  kConv2DBackpropInput, kConv2DBackpropFilter, kBiasAddGrad, kBatchNormGrad, kLayerNormGrad, kActivationGrad,
  kSoftmaxGrad, kMaxPoolGrad, kAvgPoolGrad, kGatherGrad, kSoftmaxCrossEntropyGrad,
  kMeanSquaredErrorGrad,  // the last: kNumOpKinds counts up to it
};
const char* OpKindName(OpKind kind);  // "Conv2D"

// What MaskedSoftmax adds to a score its mask drops (Keras's _large_negative_number for float32).
inline constexpr float kMaskedScore = -1e9f;

// kGelu: x Φ(x) with the normal CDF through erf (Keras's gelu, approximate=False);
// kGeluTanh: its tanh approximation 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) (approximate=True);
// kHardSigmoid: relu6(x + 3) / 6 (MobileNetV3's, Keras 3's hard_sigmoid, torch's Hardsigmoid);
// kHardSwish: x relu6(x + 3) / 6 (Keras 3's hard_swish / hard_silu, torch's Hardswish).
enum class Activation : uint8_t {
  kRelu, kRelu6, kGelu, kGeluTanh, kSwish, kSigmoid, kTanh, kLinear, kHardSigmoid, kHardSwish
};
const char* ActivationName(Activation a);

enum class Padding : uint8_t { kValid, kSame };  // TensorFlow's rules (same: extra pad at the end)

// A typed, shaped handle to one output of one node. Cheap to copy; valid while its Graph lives.
struct Value {
  const Graph* graph = nullptr;
  int32_t node = -1;
  int32_t output = 0;

  bool valid() const { return graph != nullptr && node >= 0; }
  const Shape& shape() const;
  DType dtype() const;
  const std::string& name() const;  // the producing node's name, plus ":k" for outputs k > 0
  bool operator==(const Value& o) const { return node == o.node && output == o.output; }
  bool operator!=(const Value& o) const { return !(*this == o); }
};

// kTruncatedNormal: a normal of stddev `value` redrawn outside two standard deviations
// (Keras's TruncatedNormal; VarianceScaling's "truncated_normal" passes its corrected stddev).
enum class Init : uint8_t { kZeros, kOnes, kConstant, kGlorotUniform, kHeNormal, kUniform, kNormal, kTruncatedNormal };

struct VariableOptions {
  Init init = Init::kZeros;
  float value = 0;         // kConstant: the value; kUniform: half-width; k(Truncated)Normal: stddev
  bool trainable = true;   // false: batch-norm moving statistics and other state
  uint64_t seed = 0;       // initializers are deterministic given the seed
  // Non-empty: the exact initial values, one per element in row-major order (any init);
  // Keras layers built with known weights (Normalization's mean and variance).
  std::vector<float> values;
};

// What a variable is for: a parameter (trainable or not) or state (batch norm's moving
// statistics). Both are checkpointed; optimizer slots live outside the graph (keras::OptimizerState).
enum class VariableRole : uint8_t { kParameter, kState };

struct Conv2DOptions {
  int stride_h = 1, stride_w = 1;
  Padding padding = Padding::kValid;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;  // groups == C: depthwise
};

struct PoolOptions {
  int window_h = 2, window_w = 2;
  int stride_h = 0, stride_w = 0;  // 0: the window
  Padding padding = Padding::kValid;
};

struct BatchNormOptions {
  float momentum = 0.99f;  // moving = moving * momentum + batch * (1 - momentum), as Keras
  float epsilon = 1e-3f;
  // Training statistics over the global batch (every replica, every worker) through the
  // program's cross-replica sum (backend::Program::set_cross_replica_sum); false: this
  // replica's shard only, as TPUStrategy.
  bool synchronized = false;
};

struct LayerNormOptions {
  float epsilon = 1e-3f;  // Keras's default
};

// Everything a node may carry; each op reads only its own fields.
struct Attrs {
  Conv2DOptions conv;
  PoolOptions pool;
  BatchNormOptions bn;
  LayerNormOptions ln;
  Activation activation = Activation::kLinear;
  bool transpose_a = false, transpose_b = false;  // MatMul
  int axis = 0;                                  // Concat, Slice
  int64_t begin = 0, end = 0;                    // Slice along `axis`
  std::vector<int> axes;                         // reductions (empty: all); Transpose's permutation
  float scalar = 0;                              // Scale factor, Constant value, Dropout rate
                                                 // (a Constant of several values: var.values)
  float label_smoothing = 0;                     // SoftmaxCrossEntropy
  uint64_t seed = 0;                             // Dropout
  int forward_node = -1;                         // grad ops: the forward node they differentiate
  Shape input_shape;                             // grads that rebuild an input's shape
  DType dtype = DType::kF32;                     // Cast target
  // Variables.
  VariableOptions var;
  VariableRole role = VariableRole::kParameter;
};

struct Node {
  OpKind kind;
  std::string name;           // user-visible (Keras layer name, variable name)
  std::vector<Value> inputs;
  std::vector<Shape> out_shapes;
  std::vector<DType> out_dtypes;
  Attrs attrs;
  // Side-effecting nodes (training batch norm's moving statistics, dropout's mask) run
  // on every step even when nothing consumes their outputs.
  bool has_side_effects = false;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;  // Values point at their Graph
  Graph& operator=(const Graph&) = delete;

  // ---- leaves --------------------------------------------------------------------------
  // A placeholder fed on every step (images, labels).
  Value Input(const std::string& name, DType dtype, Shape shape);
  // f32 state that persists across steps. Names must be unique; a duplicate is an error.
  Result<Value> Variable(const std::string& name, Shape shape, VariableOptions options = {},
                         VariableRole role = VariableRole::kParameter);
  Value Constant(float value, Shape shape, const std::string& name = "");
  // A constant of the given values, one per element in row-major order (Keras's Normalization
  // with a given mean and variance); a count that is not the shape's is an error.
  Result<Value> ConstantValues(std::vector<float> values, Shape shape, const std::string& name = "");

  // ---- layers --------------------------------------------------------------------------
  Result<Value> Conv2D(Value x, Value kernel, Conv2DOptions o, const std::string& name = "");
  // [M, K] x [K, N], or batched: [..., M, K] x [..., K, N] with the same leading dimensions
  // (attention's [B, H, T, K] x [B, H, K, S]); the transposes swap each operand's last two axes.
  Result<Value> MatMul(Value a, Value b, bool transpose_a = false, bool transpose_b = false,
                       const std::string& name = "");
  Result<Value> BiasAdd(Value x, Value bias, const std::string& name = "");  // bias [C] on the last axis
  // Training mode: normalises with batch statistics over all axes but the last, updates the
  // moving statistics in place (side effect). Outputs: y, batch mean [C], batch variance [C].
  Result<Value> BatchNorm(Value x, Value gamma, Value beta, Value moving_mean, Value moving_var,
                          BatchNormOptions o, const std::string& name = "");
  Result<Value> BatchNormInference(Value x, Value gamma, Value beta, Value moving_mean,
                                   Value moving_var, BatchNormOptions o, const std::string& name = "");
  // Normalises over the last axis, then y = gamma * x̂ + beta (gamma, beta [C], f32).
  // Outputs: y, and the mean and variance of each row (f32, x's shape without its last axis).
  Result<Value> LayerNorm(Value x, Value gamma, Value beta, LayerNormOptions o, const std::string& name = "");
  Result<Value> Act(Activation a, Value x, const std::string& name = "");
  Result<Value> Relu(Value x, const std::string& name = "") { return Act(Activation::kRelu, x, name); }
  Result<Value> Softmax(Value x, const std::string& name = "");  // over the last axis
  // Keras's masked softmax (attention's): softmax(x + (1 - mask) * -1e9) over the last axis, x
  // [B, ..., T, S], mask [B, T, S] (1 keeps, 0 drops; float) shared by the axes between (the
  // heads). The mask takes no gradient.
  Result<Value> MaskedSoftmax(Value x, Value mask, const std::string& name = "");
  Result<Value> MaxPool(Value x, PoolOptions o, const std::string& name = "");
  Result<Value> AvgPool(Value x, PoolOptions o, const std::string& name = "");  // padding excluded
  Result<Value> GlobalAvgPool(Value x, const std::string& name = "");  // [N,H,W,C] -> [N,C]
  Result<Value> GlobalMaxPool(Value x, const std::string& name = "");  // [N,H,W,C] -> [N,C]
  Result<Value> Add(Value a, Value b, const std::string& name = "");       // same shapes
  Result<Value> Sub(Value a, Value b, const std::string& name = "");       // same shapes
  // Same shapes, or the same rank with size-1 dimensions of either broadcast (squeeze-and-
  // excitation's [N, H, W, C] * [N, 1, 1, C]): one node whose second input is the smaller one,
  // broadcast by the kernels (its gradient sums over the broadcast axes). Where both operands
  // need it ([N, 1, W, C] * [N, H, 1, C]) the first is widened by BroadcastTo.
  Result<Value> Multiply(Value a, Value b, const std::string& name = "");
  Result<Value> Scale(Value x, float factor, const std::string& name = "");
  Result<Value> Concat(const std::vector<Value>& xs, int axis, const std::string& name = "");
  Result<Value> Slice(Value x, int axis, int64_t begin, int64_t end, const std::string& name = "");
  Result<Value> Reshape(Value x, Shape shape, const std::string& name = "");  // one -1 allowed
  // y's axis i is x's axis perm[i] (numpy's transpose): [B, T, H, K] -> [B, H, T, K] is {0, 2, 1, 3}.
  Result<Value> Transpose(Value x, std::vector<int> perm, const std::string& name = "");
  // The rows of `table` [V, D] at `ids` (int32, or float holding whole numbers, as Keras's
  // Embedding casts them): ids' shape + [D]. An id outside [0, V) fails the step, naming the op,
  // the id and where it is. The gradient scatters dy's rows back onto the table's (GatherGrad).
  Result<Value> Gather(Value table, Value ids, const std::string& name = "");
  Result<Value> Flatten(Value x, const std::string& name = "");  // [N, ...] -> [N, prod]
  // Inverted dropout: y = x * mask / (1 - rate), a fresh mask every step. Outputs: y, mask.
  Result<Value> Dropout(Value x, float rate, uint64_t seed, const std::string& name = "");
  Result<Value> Cast(Value x, DType to, const std::string& name = "");  // f32 <-> bf16
  Result<Value> ReduceSum(Value x, std::vector<int> axes = {}, const std::string& name = "");
  Result<Value> ReduceMean(Value x, std::vector<int> axes = {}, const std::string& name = "");
  // y = x broadcast from the reduced shape back to `shape` along `axes` (reduction's gradient).
  Result<Value> Broadcast(Value x, Shape shape, std::vector<int> axes, const std::string& name = "");
  Result<Value> Identity(Value x, const std::string& name = "");

  // ---- composites: emitted as the ops above (their kernels and gradient rules), no OpKind ----
  // x broadcast along its size-1 dimensions to `shape` (same rank; each extent equal or 1):
  // Reshape + Broadcast (+ Casts around it for bf16, Broadcast being f32); x when equal.
  Result<Value> BroadcastTo(Value x, Shape shape, const std::string& name = "");
  // Zeros around the rows and columns of x [N, H, W, C] (Keras's ZeroPadding2D), as a
  // concatenation with zero constants along H, then W: the gradient is the concat's slices.
  Result<Value> ZeroPad2D(Value x, int top, int bottom, int left, int right, const std::string& name = "");
  // Keras's ReLU(max_value, negative_slope) with threshold 0: min(relu(x), max) - slope * relu(-x),
  // composed as relu(x) - relu(x - max) - slope * relu(-x); max_value < 0: no upper bound.
  // (0, 0) is one Relu node and (6, 0) one Relu6 node.
  Result<Value> ClippedRelu(Value x, float max_value, float negative_slope, const std::string& name = "");
  // tf.keras 2.x's hard_sigmoid: clip(0.2 x + 0.5, 0, 1) = relu6(1.2 x + 3) / 6, the
  // kHardSigmoid activation of 1.2 x.
  Result<Value> HardSigmoid(Value x, const std::string& name = "");
  // Dropout with one draw per element of `noise_shape` (Keras's noise_shape, resolved: each
  // extent the input's or 1), the mask shared along its size-1 dimensions: a Dropout of ones
  // of that shape, multiplied in by a broadcasting Multiply. noise_shape == x's shape: Dropout(x).
  Result<Value> Dropout(Value x, float rate, uint64_t seed, Shape noise_shape, const std::string& name = "");

  // ---- losses (scalar f32 mean over the batch) ------------------------------------------
  // logits [N, K] f32, labels i32 [N] in [0, K). Outputs: loss [], probabilities [N, K].
  Result<Value> SoftmaxCrossEntropy(Value logits, Value labels, float label_smoothing = 0,
                                    const std::string& name = "");
  Result<Value> MeanSquaredError(Value prediction, Value target, const std::string& name = "");

  // ---- introspection ---------------------------------------------------------------------
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int i) const { return nodes_[i]; }
  Node& mutable_node(int i) { return nodes_[i]; }
  Value output(int node, int index = 0) const { return Value{this, node, index}; }
  // Variables in creation order.
  const std::vector<int>& variable_nodes() const { return variables_; }
  // The Value of the variable `name`, or an invalid Value.
  Value FindVariable(const std::string& name) const;
  // Marks `grad` as the gradient of variable `var` (autodiff does; the compiler places
  // such values in the program's contiguous gradient block).
  void SetGradientOf(Value grad, Value var);
  // The variable node whose gradient `v` is, or -1.
  int GradientOf(Value v) const;
  // Matrix FLOPs (conv, matmul: 2 per multiply-add) and other FLOPs of one execution of node i.
  int64_t MatrixFlops(int node) const;
  int64_t OtherFlops(int node) const;
  // "conv2d_1 (Conv2D) f32[128, 28, 28, 32]"
  std::string Describe(Value v) const;

  // Adds a node after checking nothing (autodiff and tests); prefer the builders.
  Value AddNode(Node n);

 private:
  Result<Value> Finish(Node n);
  std::string UniqueName(const std::string& name, OpKind kind);
  // What every builder (graph/ops/*.cc) starts with: the node's name (given, or made unique),
  // the label its errors start with ("conv2d_1 (Conv2D): "), after checking that `inputs` are
  // values of this graph and, with kFloatInput, that the first is f32 or bf16.
  struct NewOp {
    std::string name, label;
  };
  enum InputCheck { kAnyInput, kFloatInput };
  Result<NewOp> Begin(OpKind kind, const std::string& name, const std::vector<Value>& inputs, InputCheck check);

  std::vector<Node> nodes_;
  std::vector<int> variables_;
  std::vector<std::pair<Value, int>> grad_of_;  // gradient value -> variable node
  int unnamed_ = 0;
};

// Output extent and padding of a sliding window along one dimension (TensorFlow's rules:
// "same" puts the odd padding element at the end).
struct WindowDim {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};
WindowDim ComputeWindow(int64_t in, int64_t window, int stride, int dilation, Padding padding);

// Element i of a kConstant node: its one value (attrs.scalar), or its values (attrs.var.values).
float ConstantAt(const Node& n, int64_t i);

// "conv2d_1 (Conv2D): " : the prefix every shape error starts with.
std::string OpLabel(const std::string& name, OpKind kind);

}  // namespace strata::graph

#pragma GCC visibility pop
