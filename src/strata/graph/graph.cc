#include "strata/graph/graph.h"

#include <algorithm>
#include <sstream>

#include "strata/graph/op_checks.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kInput: return "Input";
    case OpKind::kVariable: return "Variable";
    case OpKind::kConstant: return "Constant";
    case OpKind::kConv2D: return "Conv2D";
    case OpKind::kMatMul: return "MatMul";
    case OpKind::kBiasAdd: return "BiasAdd";
    case OpKind::kBatchNorm: return "BatchNorm";
    case OpKind::kBatchNormInference: return "BatchNormInference";
    case OpKind::kActivation: return "Activation";
    case OpKind::kSoftmax: return "Softmax";
    case OpKind::kMaxPool: return "MaxPool";
    case OpKind::kAvgPool: return "AvgPool";
    case OpKind::kAdd: return "Add";
    case OpKind::kSub: return "Sub";
    case OpKind::kMultiply: return "Multiply";
    case OpKind::kScale: return "Scale";
    case OpKind::kConcat: return "Concat";
    case OpKind::kSlice: return "Slice";
    case OpKind::kReshape: return "Reshape";
    case OpKind::kDropout: return "Dropout";
    case OpKind::kCast: return "Cast";
    case OpKind::kReduceSum: return "ReduceSum";
    case OpKind::kReduceMean: return "ReduceMean";
    case OpKind::kBroadcast: return "Broadcast";
    case OpKind::kIdentity: return "Identity";
    case OpKind::kSoftmaxCrossEntropy: return "SoftmaxCrossEntropy";
    case OpKind::kMeanSquaredError: return "MeanSquaredError";
    case OpKind::kConv2DBackpropInput: return "Conv2DBackpropInput";
    case OpKind::kConv2DBackpropFilter: return "Conv2DBackpropFilter";
    case OpKind::kBiasAddGrad: return "BiasAddGrad";
    case OpKind::kBatchNormGrad: return "BatchNormGrad";
    case OpKind::kActivationGrad: return "ActivationGrad";
    case OpKind::kSoftmaxGrad: return "SoftmaxGrad";
    case OpKind::kMaxPoolGrad: return "MaxPoolGrad";
    case OpKind::kAvgPoolGrad: return "AvgPoolGrad";
    case OpKind::kSoftmaxCrossEntropyGrad: return "SoftmaxCrossEntropyGrad";
    case OpKind::kMeanSquaredErrorGrad: return "MeanSquaredErrorGrad";
  }
  return "?";
}

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kRelu: return "Relu";
    case Activation::kRelu6: return "Relu6";
    case Activation::kGelu: return "Gelu";
    case Activation::kSwish: return "Swish";
    case Activation::kSigmoid: return "Sigmoid";
    case Activation::kTanh: return "Tanh";
    case Activation::kLinear: return "Linear";
  }
  return "?";
}

const Shape& Value::shape() const { return graph->node(node).out_shapes[output]; }
DType Value::dtype() const { return graph->node(node).out_dtypes[output]; }
const std::string& Value::name() const { return graph->node(node).name; }

std::string OpLabel(const std::string& name, OpKind kind) {
  return name + " (" + OpKindName(kind) + "): ";
}

WindowDim ComputeWindow(int64_t in, int64_t window, int stride, int dilation, Padding padding) {
  WindowDim d;
  const int64_t eff = (window - 1) * dilation + 1;
  if (padding == Padding::kValid) {
    d.out = in >= eff ? (in - eff) / stride + 1 : 0;
  } else {
    d.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((d.out - 1) * stride + eff - in, 0);
    d.pad_before = total / 2;
    d.pad_after = total - d.pad_before;
  }
  return d;
}

Value Graph::AddNode(Node n) {
  nodes_.push_back(std::move(n));
  return Value{this, static_cast<int32_t>(nodes_.size() - 1), 0};
}

std::string Graph::UniqueName(const std::string& name, OpKind kind) {
  if (!name.empty()) return name;
  std::string base = OpKindName(kind);
  std::transform(base.begin(), base.end(), base.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  return base + "_" + std::to_string(unnamed_++);
}

Result<Value> Graph::Finish(Node n) { return AddNode(std::move(n)); }

Value Graph::Input(const std::string& name, DType dtype, Shape shape) {
  Node n{OpKind::kInput, UniqueName(name, OpKind::kInput), {}, {shape}, {dtype}, {}, false};
  return AddNode(std::move(n));
}

Result<Value> Graph::Variable(const std::string& name, Shape shape, VariableOptions options, VariableRole role) {
  if (name.empty()) return InvalidArgument("Variable: a variable needs a name");
  if (FindVariable(name).valid()) return InvalidArgument(OpLabel(name, OpKind::kVariable) + "duplicate variable name");
  for (int64_t d : shape.dims())
    if (d <= 0) return InvalidArgument(OpLabel(name, OpKind::kVariable) + "non-positive extent in " + S(shape));
  if (!options.values.empty() && static_cast<int64_t>(options.values.size()) != shape.num_elements())
    return InvalidArgument(OpLabel(name, OpKind::kVariable) + std::to_string(options.values.size()) +
                           " initial values for " + S(shape) + " (" + std::to_string(shape.num_elements()) +
                           " elements)");
  Node n{OpKind::kVariable, name, {}, {shape}, {DType::kF32}, {}, false};
  n.attrs.var = options;
  n.attrs.role = role;
  if (role != VariableRole::kParameter) n.attrs.var.trainable = false;
  Value v = AddNode(std::move(n));
  variables_.push_back(v.node);
  return v;
}

Value Graph::Constant(float value, Shape shape, const std::string& name) {
  Node n{OpKind::kConstant, UniqueName(name, OpKind::kConstant), {}, {shape}, {DType::kF32}, {}, false};
  n.attrs.scalar = value;
  return AddNode(std::move(n));
}

Value Graph::FindVariable(const std::string& name) const {
  for (int i : variables_)
    if (nodes_[i].name == name) return Value{this, i, 0};
  return Value{};
}

void Graph::SetGradientOf(Value grad, Value var) { grad_of_.push_back({grad, var.node}); }

int Graph::GradientOf(Value v) const {
  for (const auto& [g, var] : grad_of_)
    if (g == v) return var;
  return -1;
}

Result<Value> Graph::Conv2D(Value x, Value k, Conv2DOptions o, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kConv2D);
  const std::string label = OpLabel(name, OpKind::kConv2D);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x, k}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  STRATA_RETURN_IF_ERROR(CheckSameDType(label, x, k));
  const Shape& xs = x.shape();
  const Shape& ks = k.shape();
  if (xs.rank() != 4) return InvalidArgument(label + "expected input [N, H, W, C], found " + S(xs));
  if (ks.rank() != 4) return InvalidArgument(label + "expected kernel [KH, KW, C / groups, O], found " + S(ks));
  if (o.groups < 1 || o.stride_h < 1 || o.stride_w < 1 || o.dilation_h < 1 || o.dilation_w < 1)
    return InvalidArgument(label + "groups, strides and dilations must be >= 1");
  if (xs[3] % o.groups != 0 || ks[3] % o.groups != 0)
    return InvalidArgument(label + "groups " + std::to_string(o.groups) + " must divide input channels " +
                           std::to_string(xs[3]) + " and filters " + std::to_string(ks[3]));
  if (ks[2] != xs[3] / o.groups)
    return InvalidArgument(label + "input channels " + std::to_string(xs[3]) + " do not match kernel " + S(ks) +
                           " (expects " + std::to_string(ks[2]) + " = C / groups)");
  WindowDim h = ComputeWindow(xs[1], ks[0], o.stride_h, o.dilation_h, o.padding);
  WindowDim w = ComputeWindow(xs[2], ks[1], o.stride_w, o.dilation_w, o.padding);
  if (h.out <= 0 || w.out <= 0)
    return InvalidArgument(label + "kernel " + S(ks) + " larger than input " + S(xs) + " with valid padding");
  Node n{OpKind::kConv2D, name, {x, k}, {Shape{xs[0], h.out, w.out, ks[3]}}, {x.dtype()}, {}, false};
  n.attrs.conv = o;
  return Finish(std::move(n));
}

Result<Value> Graph::MatMul(Value a, Value b, bool ta, bool tb, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kMatMul);
  const std::string label = OpLabel(name, OpKind::kMatMul);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {a, b}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", a));
  STRATA_RETURN_IF_ERROR(CheckSameDType(label, a, b));
  if (a.shape().rank() != 2 || b.shape().rank() != 2)
    return InvalidArgument(label + "expected 2-D operands, found " + S(a.shape()) + " and " + S(b.shape()));
  const int64_t m = ta ? a.shape()[1] : a.shape()[0];
  const int64_t ka = ta ? a.shape()[0] : a.shape()[1];
  const int64_t kb = tb ? b.shape()[1] : b.shape()[0];
  const int64_t nn = tb ? b.shape()[0] : b.shape()[1];
  if (ka != kb)
    return InvalidArgument(label + "inner dimensions differ: input " + S(a.shape()) + " has " + std::to_string(ka) +
                           ", kernel " + S(b.shape()) + " expects " + std::to_string(kb));
  Node n{OpKind::kMatMul, name, {a, b}, {Shape{m, nn}}, {a.dtype()}, {}, false};
  n.attrs.transpose_a = ta;
  n.attrs.transpose_b = tb;
  return Finish(std::move(n));
}

Result<Value> Graph::BiasAdd(Value x, Value bias, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kBiasAdd);
  const std::string label = OpLabel(name, OpKind::kBiasAdd);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x, bias}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (bias.shape().rank() != 1 || x.shape().rank() < 1 || bias.shape()[0] != x.shape()[-1])
    return InvalidArgument(label + "expected bias [" + std::to_string(x.shape().rank() ? x.shape()[-1] : 0) +
                           "] for input " + S(x.shape()) + ", found " + S(bias.shape()));
  Node n{OpKind::kBiasAdd, name, {x, bias}, {x.shape()}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

static Status CheckBnParams(const std::string& label, const Graph* g, Value x, const std::vector<Value>& ps) {
  STRATA_RETURN_IF_ERROR(CheckValid(label, ps, g));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (x.shape().rank() < 2) return InvalidArgument(label + "expected input of rank >= 2, found " + S(x.shape()));
  const int64_t c = x.shape()[-1];
  static const char* kNames[] = {"gamma", "beta", "moving_mean", "moving_variance"};
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].shape() != Shape{c})
      return InvalidArgument(label + kNames[i] + " expected [" + std::to_string(c) + "], found " + S(ps[i].shape()));
    if (ps[i].dtype() != DType::kF32) return InvalidArgument(label + kNames[i] + " must be f32");
  }
  return Status::OK();
}

Result<Value> Graph::BatchNorm(Value x, Value gamma, Value beta, Value mm, Value mv, BatchNormOptions o,
                               const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kBatchNorm);
  const std::string label = OpLabel(name, OpKind::kBatchNorm);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckBnParams(label, this, x, {gamma, beta, mm, mv}));
  if (nodes_[mm.node].kind != OpKind::kVariable || nodes_[mv.node].kind != OpKind::kVariable)
    return InvalidArgument(label + "moving statistics must be variables (they are updated in place)");
  const Shape c{x.shape()[-1]};
  Node n{OpKind::kBatchNorm, name, {x, gamma, beta, mm, mv}, {x.shape(), c, c}, {x.dtype(), DType::kF32, DType::kF32},
         {}, true};
  n.attrs.bn = o;
  return Finish(std::move(n));
}

Result<Value> Graph::BatchNormInference(Value x, Value gamma, Value beta, Value mm, Value mv, BatchNormOptions o,
                                        const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kBatchNormInference);
  const std::string label = OpLabel(name, OpKind::kBatchNormInference);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckBnParams(label, this, x, {gamma, beta, mm, mv}));
  Node n{OpKind::kBatchNormInference, name, {x, gamma, beta, mm, mv}, {x.shape()}, {x.dtype()}, {}, false};
  n.attrs.bn = o;
  return Finish(std::move(n));
}

Result<Value> Graph::Act(Activation a, Value x, const std::string& name_in) {
  const std::string name = UniqueName(name_in.empty() ? std::string() : name_in, OpKind::kActivation);
  const std::string label = OpLabel(name, OpKind::kActivation);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  Node n{OpKind::kActivation, name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  n.attrs.activation = a;
  return Finish(std::move(n));
}

Result<Value> Graph::Softmax(Value x, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kSoftmax);
  const std::string label = OpLabel(name, OpKind::kSoftmax);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (x.shape().rank() < 1) return InvalidArgument(label + "expected rank >= 1, found a scalar");
  Node n{OpKind::kSoftmax, name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

static Result<Shape> PoolShape(const std::string& label, Value x, PoolOptions& o) {
  const Shape& xs = x.shape();
  if (xs.rank() != 4) return InvalidArgument(label + "expected input [N, H, W, C], found " + S(xs));
  if (o.stride_h == 0) o.stride_h = o.window_h;
  if (o.stride_w == 0) o.stride_w = o.window_w;
  if (o.window_h < 1 || o.window_w < 1 || o.stride_h < 1 || o.stride_w < 1)
    return InvalidArgument(label + "window and strides must be >= 1");
  WindowDim h = ComputeWindow(xs[1], o.window_h, o.stride_h, 1, o.padding);
  WindowDim w = ComputeWindow(xs[2], o.window_w, o.stride_w, 1, o.padding);
  if (h.out <= 0 || w.out <= 0)
    return InvalidArgument(label + "window " + std::to_string(o.window_h) + "x" + std::to_string(o.window_w) +
                           " larger than input " + S(xs));
  return Shape{xs[0], h.out, w.out, xs[3]};
}

Result<Value> Graph::MaxPool(Value x, PoolOptions o, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kMaxPool);
  const std::string label = OpLabel(name, OpKind::kMaxPool);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  STRATA_ASSIGN_OR_RETURN(Shape out, PoolShape(label, x, o));
  Node n{OpKind::kMaxPool, name, {x}, {out}, {x.dtype()}, {}, false};
  n.attrs.pool = o;
  return Finish(std::move(n));
}

Result<Value> Graph::AvgPool(Value x, PoolOptions o, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kAvgPool);
  const std::string label = OpLabel(name, OpKind::kAvgPool);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  STRATA_ASSIGN_OR_RETURN(Shape out, PoolShape(label, x, o));
  Node n{OpKind::kAvgPool, name, {x}, {out}, {x.dtype()}, {}, false};
  n.attrs.pool = o;
  return Finish(std::move(n));
}

Result<Value> Graph::GlobalAvgPool(Value x, const std::string& name) {
  if (!x.valid() || x.shape().rank() != 4)
    return InvalidArgument(OpLabel(name.empty() ? "global_average_pooling" : name, OpKind::kAvgPool) +
                           "expected input [N, H, W, C], found " + (x.valid() ? S(x.shape()) : "nothing"));
  const Shape& s = x.shape();
  STRATA_ASSIGN_OR_RETURN(Value p, AvgPool(x, {.window_h = static_cast<int>(s[1]), .window_w = static_cast<int>(s[2])},
                                           name));
  return Reshape(p, Shape{s[0], s[3]}, name.empty() ? "" : name + "/flatten");
}

Result<Value> Graph::GlobalMaxPool(Value x, const std::string& name) {
  if (!x.valid() || x.shape().rank() != 4)
    return InvalidArgument(OpLabel(name.empty() ? "global_max_pooling" : name, OpKind::kMaxPool) +
                           "expected input [N, H, W, C], found " + (x.valid() ? S(x.shape()) : "nothing"));
  const Shape& s = x.shape();
  STRATA_ASSIGN_OR_RETURN(Value p, MaxPool(x, {.window_h = static_cast<int>(s[1]), .window_w = static_cast<int>(s[2])},
                                           name));
  return Reshape(p, Shape{s[0], s[3]}, name.empty() ? "" : name + "/flatten");
}

static Result<Value> Binary(Graph* g, OpKind kind, Value a, Value b, const std::string& name) {
  const std::string label = OpLabel(name, kind);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {a, b}, g));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", a));
  STRATA_RETURN_IF_ERROR(CheckSameDType(label, a, b));
  if (a.shape() != b.shape())
    return InvalidArgument(label + "shapes differ: " + S(a.shape()) + " and " + S(b.shape()));
  Node n{kind, name, {a, b}, {a.shape()}, {a.dtype()}, {}, false};
  return g->AddNode(std::move(n));
}

Result<Value> Graph::Add(Value a, Value b, const std::string& n) { return Binary(this, OpKind::kAdd, a, b, UniqueName(n, OpKind::kAdd)); }
Result<Value> Graph::Sub(Value a, Value b, const std::string& n) { return Binary(this, OpKind::kSub, a, b, UniqueName(n, OpKind::kSub)); }
Result<Value> Graph::Multiply(Value a, Value b, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kMultiply);
  const std::string label = OpLabel(name, OpKind::kMultiply);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {a, b}, this));
  if (a.shape() == b.shape() || a.shape().rank() != b.shape().rank())
    return Binary(this, OpKind::kMultiply, a, b, name);
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", a));
  STRATA_RETURN_IF_ERROR(CheckSameDType(label, a, b));
  std::vector<int64_t> out = a.shape().dims();
  for (int d = 0; d < a.shape().rank(); ++d) {
    const int64_t x = a.shape()[d], y = b.shape()[d];
    if (x != y && x != 1 && y != 1)
      return InvalidArgument(label + "shapes " + S(a.shape()) + " and " + S(b.shape()) + " do not broadcast (dimension " +
                             std::to_string(d) + ": " + std::to_string(x) + " vs " + std::to_string(y) +
                             "; each must match or be 1)");
    out[d] = std::max(x, y);
  }
  // One Multiply node whose second input has size-1 dimensions (the kernels broadcast it:
  // oneDNN's binary, no full-size copy); the product commutes, so the full operand goes first.
  if (a.shape() != Shape(out)) std::swap(a, b);
  if (a.shape() != Shape(out)) {  // both broadcast ([N, 1, W, C] * [N, H, 1, C]): widen one
    STRATA_ASSIGN_OR_RETURN(a, BroadcastTo(a, Shape(out), name + "/broadcast"));
  }
  Node n{OpKind::kMultiply, name, {a, b}, {a.shape()}, {a.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::ClippedRelu(Value x, float max_value, float slope, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kActivation);
  const std::string label = OpLabel(name, OpKind::kActivation);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (!(slope >= 0)) return InvalidArgument(label + "negative_slope must be >= 0");
  if (x.shape().rank() < 1) return InvalidArgument(label + "expected rank >= 1, found a scalar");
  const bool has_max = max_value >= 0;
  if (slope == 0 && !has_max) return Act(Activation::kRelu, x, name);
  if (slope == 0 && max_value == 6) return Act(Activation::kRelu6, x, name);
  STRATA_ASSIGN_OR_RETURN(Value y, Act(Activation::kRelu, x, name + "/relu"));
  if (has_max) {
    Value m = Constant(-max_value, Shape{x.shape()[-1]}, name + "/minus_max");
    if (x.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(m, Cast(m, x.dtype(), name + "/minus_max_cast")); }
    STRATA_ASSIGN_OR_RETURN(Value shifted, BiasAdd(x, m, name + "/shifted"));
    STRATA_ASSIGN_OR_RETURN(Value over, Act(Activation::kRelu, shifted, name + "/over_max"));
    STRATA_ASSIGN_OR_RETURN(y, Sub(y, over, slope == 0 ? name : name + "/clipped"));
  }
  if (slope > 0) {
    STRATA_ASSIGN_OR_RETURN(Value neg, Scale(x, -1.0f, name + "/negate"));
    STRATA_ASSIGN_OR_RETURN(Value below, Act(Activation::kRelu, neg, name + "/below"));
    STRATA_ASSIGN_OR_RETURN(Value leak, Scale(below, slope, name + "/leak"));
    STRATA_ASSIGN_OR_RETURN(y, Sub(y, leak, name));
  }
  return y;
}

Result<Value> Graph::HardSigmoid(Value x, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kActivation);
  const std::string label = OpLabel(name, OpKind::kActivation);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (x.shape().rank() < 1) return InvalidArgument(label + "hard_sigmoid expects rank >= 1, found a scalar");
  STRATA_ASSIGN_OR_RETURN(Value a, Scale(x, 1.2f, name + "/scale"));
  Value three = Constant(3.0f, Shape{x.shape()[-1]}, name + "/three");
  if (x.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(three, Cast(three, x.dtype(), name + "/three_cast")); }
  STRATA_ASSIGN_OR_RETURN(Value b, BiasAdd(a, three, name + "/shift"));
  STRATA_ASSIGN_OR_RETURN(Value c, Act(Activation::kRelu6, b, name + "/relu6"));
  return Scale(c, 1.0f / 6.0f, name);
}

Result<Value> Graph::Scale(Value x, float factor, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kScale);
  const std::string label = OpLabel(name, OpKind::kScale);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  Node n{OpKind::kScale, name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  n.attrs.scalar = factor;
  return Finish(std::move(n));
}

Result<Value> Graph::Dropout(Value x, float rate, uint64_t seed, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kDropout);
  const std::string label = OpLabel(name, OpKind::kDropout);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  if (x.dtype() != DType::kF32) return InvalidArgument(label + "input must be f32");
  if (!(rate >= 0 && rate < 1)) return InvalidArgument(label + "rate must be in [0, 1), found " + std::to_string(rate));
  Node n{OpKind::kDropout, name, {x}, {x.shape(), x.shape()}, {x.dtype(), DType::kF32}, {}, true};
  n.attrs.scalar = rate;
  n.attrs.seed = seed;
  return Finish(std::move(n));
}

Result<Value> Graph::Dropout(Value x, float rate, uint64_t seed, Shape noise_shape, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kDropout);
  const std::string label = OpLabel(name, OpKind::kDropout);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  if (noise_shape == x.shape()) return Dropout(x, rate, seed, name);
  if (x.dtype() != DType::kF32) return InvalidArgument(label + "input must be f32");
  if (!(rate >= 0 && rate < 1)) return InvalidArgument(label + "rate must be in [0, 1), found " + std::to_string(rate));
  bool ok = noise_shape.rank() == x.shape().rank();
  for (int d = 0; ok && d < noise_shape.rank(); ++d) ok = noise_shape[d] == 1 || noise_shape[d] == x.shape()[d];
  if (!ok)
    return InvalidArgument(label + "noise shape " + S(noise_shape) + " does not fit input " + S(x.shape()) +
                           " (each extent the input's or 1)");
  Value ones = Constant(1.0f, noise_shape, name + "/ones");
  STRATA_ASSIGN_OR_RETURN(Value mask, Dropout(ones, rate, seed, name + "/mask"));
  return Multiply(x, mask, name);  // the mask broadcast by the kernel
}

Result<Value> Graph::SoftmaxCrossEntropy(Value logits, Value labels, float smoothing, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kSoftmaxCrossEntropy);
  const std::string label = OpLabel(name, OpKind::kSoftmaxCrossEntropy);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {logits, labels}, this));
  if (logits.dtype() != DType::kF32)
    return InvalidArgument(label + "logits must be f32 (cast a bf16 model output first), found " +
                           std::string(DTypeName(logits.dtype())));
  if (logits.shape().rank() != 2) return InvalidArgument(label + "expected logits [N, K], found " + S(logits.shape()));
  if (labels.dtype() != DType::kI32) return InvalidArgument(label + "labels must be i32");
  if (labels.shape() != Shape{logits.shape()[0]})
    return InvalidArgument(label + "expected labels [" + std::to_string(logits.shape()[0]) + "], found " +
                           S(labels.shape()));
  if (!(smoothing >= 0 && smoothing < 1)) return InvalidArgument(label + "label smoothing must be in [0, 1)");
  Node n{OpKind::kSoftmaxCrossEntropy, name, {logits, labels}, {Shape{}, logits.shape()}, {DType::kF32, DType::kF32},
         {}, false};
  n.attrs.label_smoothing = smoothing;
  return Finish(std::move(n));
}

Result<Value> Graph::MeanSquaredError(Value p, Value t, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kMeanSquaredError);
  const std::string label = OpLabel(name, OpKind::kMeanSquaredError);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {p, t}, this));
  if (p.dtype() != DType::kF32 || t.dtype() != DType::kF32) return InvalidArgument(label + "inputs must be f32");
  if (p.shape() != t.shape())
    return InvalidArgument(label + "prediction " + S(p.shape()) + " and target " + S(t.shape()) + " differ");
  Node n{OpKind::kMeanSquaredError, name, {p, t}, {Shape{}}, {DType::kF32}, {}, false};
  return Finish(std::move(n));
}

int64_t Graph::MatrixFlops(int i) const {
  const Node& n = nodes_[i];
  switch (n.kind) {
    case OpKind::kConv2D: {
      const Shape& y = n.out_shapes[0];
      const Shape& k = n.inputs[1].shape();
      return 2 * y.num_elements() * k[0] * k[1] * k[2];
    }
    case OpKind::kConv2DBackpropInput: {  // inputs: dy, kernel
      const Shape& dy = n.inputs[0].shape();
      const Shape& k = n.inputs[1].shape();
      return 2 * dy.num_elements() * k[0] * k[1] * k[2];
    }
    case OpKind::kConv2DBackpropFilter: {  // inputs: x, dy; output: kernel shape
      const Shape& dy = n.inputs[1].shape();
      const Shape& k = n.out_shapes[0];
      return 2 * dy.num_elements() * k[0] * k[1] * k[2];
    }
    case OpKind::kMatMul: {
      const Shape& a = n.inputs[0].shape();
      const int64_t kk = n.attrs.transpose_a ? a[0] : a[1];
      return 2 * n.out_shapes[0].num_elements() * kk;
    }
    default: return 0;
  }
}

int64_t Graph::OtherFlops(int i) const {
  const Node& n = nodes_[i];
  if (MatrixFlops(i) > 0) return 0;
  switch (n.kind) {
    case OpKind::kInput: case OpKind::kVariable: case OpKind::kConstant: case OpKind::kReshape:
    case OpKind::kIdentity: case OpKind::kCast: case OpKind::kConcat: case OpKind::kSlice:
      return 0;
    case OpKind::kBatchNorm: case OpKind::kBatchNormInference: return 4 * n.inputs[0].shape().num_elements();
    case OpKind::kBatchNormGrad: return 6 * n.inputs[0].shape().num_elements();
    case OpKind::kMaxPool: case OpKind::kAvgPool:
      return n.out_shapes[0].num_elements() * n.attrs.pool.window_h * n.attrs.pool.window_w;
    case OpKind::kMaxPoolGrad: case OpKind::kAvgPoolGrad: return n.out_shapes[0].num_elements();
    case OpKind::kBiasAddGrad: case OpKind::kReduceSum: case OpKind::kReduceMean:
      return n.inputs[0].shape().num_elements();
    case OpKind::kSoftmaxCrossEntropy: case OpKind::kSoftmax: return 4 * n.inputs[0].shape().num_elements();
    default:
      return n.out_shapes.empty() ? 0 : n.out_shapes[0].num_elements();
  }
}

std::string Graph::Describe(Value v) const {
  const Node& n = nodes_[v.node];
  std::ostringstream os;
  os << n.name << " (" << OpKindName(n.kind) << ")";
  if (v.output < static_cast<int>(n.out_shapes.size()))
    os << " " << DTypeName(n.out_dtypes[v.output]) << n.out_shapes[v.output].ToString();
  return os.str();
}

}  // namespace strata::graph
