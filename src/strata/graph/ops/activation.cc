// The activation family: elementwise activations (and Keras's clipped ReLU and tf.keras 2's
// hard sigmoid, composed from them), softmax over the last axis, and their gradient ops.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kRelu: return "Relu";
    case Activation::kRelu6: return "Relu6";
    case Activation::kGelu: return "Gelu";
    case Activation::kGeluTanh: return "GeluTanh";
    case Activation::kSwish: return "Swish";
    case Activation::kSigmoid: return "Sigmoid";
    case Activation::kTanh: return "Tanh";
    case Activation::kLinear: return "Linear";
    case Activation::kHardSigmoid: return "HardSigmoid";
    case Activation::kHardSwish: return "HardSwish";
  }
  return "?";
}

Result<Value> Graph::Act(Activation a, Value x, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kActivation, name_in, {x}, kFloatInput));
  Node n{OpKind::kActivation, op.name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  n.attrs.activation = a;
  return Finish(std::move(n));
}

Result<Value> Graph::Softmax(Value x, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kSoftmax, name_in, {x}, kFloatInput));
  if (x.shape().rank() < 1) return InvalidArgument(op.label + "expected rank >= 1, found a scalar");
  Node n{OpKind::kSoftmax, op.name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::MaskedSoftmax(Value x, Value mask, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kMaskedSoftmax, name_in, {x, mask}, kFloatInput));
  const Shape &xs = x.shape(), &ms = mask.shape();
  if (xs.rank() < 3 || ms.rank() != 3 || ms[0] != xs[0] || ms[1] != xs[-2] || ms[2] != xs[-1])
    return InvalidArgument(op.label + "the mask must be [batch, rows, columns] = [" + std::to_string(xs.rank() ? xs[0] : 0) +
                           ", " + std::to_string(xs.rank() >= 2 ? xs[-2] : 0) + ", " +
                           std::to_string(xs.rank() >= 1 ? xs[-1] : 0) + "] of x " + xs.ToString() + ", got " +
                           ms.ToString());
  Node n{OpKind::kMaskedSoftmax, op.name, {x, mask}, {xs}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::ClippedRelu(Value x, float max_value, float slope, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kActivation, name_in, {x}, kFloatInput));
  if (!(slope >= 0)) return InvalidArgument(op.label + "negative_slope must be >= 0");
  if (x.shape().rank() < 1) return InvalidArgument(op.label + "expected rank >= 1, found a scalar");
  const bool has_max = max_value >= 0;
  if (slope == 0 && !has_max) return Act(Activation::kRelu, x, op.name);
  if (slope == 0 && max_value == 6) return Act(Activation::kRelu6, x, op.name);
  STRATA_ASSIGN_OR_RETURN(Value y, Act(Activation::kRelu, x, op.name + "/relu"));
  if (has_max) {
    Value m = Constant(-max_value, Shape{x.shape()[-1]}, op.name + "/minus_max");
    if (x.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(m, Cast(m, x.dtype(), op.name + "/minus_max_cast")); }
    STRATA_ASSIGN_OR_RETURN(Value shifted, BiasAdd(x, m, op.name + "/shifted"));
    STRATA_ASSIGN_OR_RETURN(Value over, Act(Activation::kRelu, shifted, op.name + "/over_max"));
    STRATA_ASSIGN_OR_RETURN(y, Sub(y, over, slope == 0 ? op.name : op.name + "/clipped"));
  }
  if (slope > 0) {
    STRATA_ASSIGN_OR_RETURN(Value neg, Scale(x, -1.0f, op.name + "/negate"));
    STRATA_ASSIGN_OR_RETURN(Value below, Act(Activation::kRelu, neg, op.name + "/below"));
    STRATA_ASSIGN_OR_RETURN(Value leak, Scale(below, slope, op.name + "/leak"));
    STRATA_ASSIGN_OR_RETURN(y, Sub(y, leak, op.name));
  }
  return y;
}

Result<Value> Graph::HardSigmoid(Value x, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kActivation, name_in, {x}, kFloatInput));
  if (x.shape().rank() < 1) return InvalidArgument(op.label + "hard_sigmoid expects rank >= 1, found a scalar");
  STRATA_ASSIGN_OR_RETURN(Value a, Scale(x, 1.2f, op.name + "/scale"));
  return Act(Activation::kHardSigmoid, a, op.name);
}

namespace ops {
namespace {

// Where the derivative is a function of the output, the gradient reads y (and x's buffer may
// be reused); the others read x. The reference and cpu kernels of ActivationGrad follow this.
bool ActivationGradUsesOutput(Activation a) {
  return a == Activation::kRelu || a == Activation::kRelu6 || a == Activation::kSigmoid || a == Activation::kTanh ||
         a == Activation::kHardSigmoid;
}

Status ActivationGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  Attrs a = c.BackwardAttrs();
  a.activation = c.n.attrs.activation;
  const Value x = c.in(0);
  const Value src = ActivationGradUsesOutput(c.n.attrs.activation) ? c.g.output(c.node, 0) : x;
  return c.Accumulate(x, c.Emit(OpKind::kActivationGrad, c.gname, {src, c.dy()}, {x.shape()}, {x.dtype()}, a));
}

Status SoftmaxGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  const Value x = c.in(0);
  return c.Accumulate(x, c.Emit(OpKind::kSoftmaxGrad, c.gname, {c.g.output(c.node, 0), c.dy()}, {x.shape()},
                                {x.dtype()}, c.BackwardAttrs()));
}

// The mask takes none: Keras's is a boolean cast to float.
Status MaskedSoftmaxGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  const Value x = c.in(0);
  return c.Accumulate(x, c.Emit(OpKind::kSoftmaxGrad, c.gname, {c.g.output(c.node, 0), c.dy()}, {x.shape()},
                                {x.dtype()}, c.BackwardAttrs()));
}

// Per element of a row: subtract the maximum, exponentiate, sum, divide.
int64_t SoftmaxFlops(const Node& n) { return 4 * n.inputs[0].shape().num_elements(); }
// And the mask's 1 - m, times -1e9, plus x.
int64_t MaskedSoftmaxFlops(const Node& n) { return 7 * n.inputs[0].shape().num_elements(); }

}  // namespace

void RegisterActivationOps(OpTable& t) {
  Register(t, {.kind = OpKind::kActivation, .name = "Activation", .family = "activation",
               .gradient = ActivationGradient, .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kActivationGrad, .name = "ActivationGrad", .family = "activation",
               .no_gradient = kSecondOrder, .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kSoftmax, .name = "Softmax", .family = "activation", .gradient = SoftmaxGradient,
               .matrix_flops = NoFlops, .other_flops = SoftmaxFlops});
  Register(t, {.kind = OpKind::kMaskedSoftmax, .name = "MaskedSoftmax", .family = "activation",
               .gradient = MaskedSoftmaxGradient, .matrix_flops = NoFlops, .other_flops = MaskedSoftmaxFlops});
  Register(t, {.kind = OpKind::kSoftmaxGrad, .name = "SoftmaxGrad", .family = "activation",
               .no_gradient = kSecondOrder, .matrix_flops = NoFlops, .other_flops = PerOutputElement});
}

}  // namespace ops
}  // namespace strata::graph
