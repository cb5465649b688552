// The loss family: softmax cross-entropy over sparse labels (with label smoothing) and mean
// squared error, each a scalar mean over the batch, and their gradient ops.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

Result<Value> Graph::SoftmaxCrossEntropy(Value logits, Value labels, float smoothing, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kSoftmaxCrossEntropy, name_in, {logits, labels}, kAnyInput));
  if (logits.dtype() != DType::kF32)
    return InvalidArgument(op.label + "logits must be f32 (cast a bf16 model output first), found " +
                           std::string(DTypeName(logits.dtype())));
  if (logits.shape().rank() != 2)
    return InvalidArgument(op.label + "expected logits [N, K], found " + S(logits.shape()));
  if (labels.dtype() != DType::kI32) return InvalidArgument(op.label + "labels must be i32");
  if (labels.shape() != Shape{logits.shape()[0]})
    return InvalidArgument(op.label + "expected labels [" + std::to_string(logits.shape()[0]) + "], found " +
                           S(labels.shape()));
  if (!(smoothing >= 0 && smoothing < 1)) return InvalidArgument(op.label + "label smoothing must be in [0, 1)");
  Node n{OpKind::kSoftmaxCrossEntropy, op.name, {logits, labels}, {Shape{}, logits.shape()}, {DType::kF32, DType::kF32},
         {}, false};
  n.attrs.label_smoothing = smoothing;
  return Finish(std::move(n));
}

Result<Value> Graph::MeanSquaredError(Value p, Value t, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kMeanSquaredError, name_in, {p, t}, kAnyInput));
  if (p.dtype() != DType::kF32 || t.dtype() != DType::kF32) return InvalidArgument(op.label + "inputs must be f32");
  if (p.shape() != t.shape())
    return InvalidArgument(op.label + "prediction " + S(p.shape()) + " and target " + S(t.shape()) + " differ");
  Node n{OpKind::kMeanSquaredError, op.name, {p, t}, {Shape{}}, {DType::kF32}, {}, false};
  return Finish(std::move(n));
}

namespace ops {
namespace {

// d loss / d logits = (probabilities - smoothed one-hot) * dloss / N, from the forward op's
// probabilities (output 1).
Status SoftmaxCrossEntropyGradient(GradientContext& c) {
  if (c.need(1)) return InvalidArgument(c.label + "labels are integers and have no gradient");
  if (c.dys[1].valid()) return Unimplemented(c.label + "gradient through the probabilities output");
  if (!c.need(0)) return Status::OK();
  Attrs a = c.BackwardAttrs();
  a.label_smoothing = c.n.attrs.label_smoothing;
  const Value x = c.in(0);
  return c.Accumulate(x, c.Emit(OpKind::kSoftmaxCrossEntropyGrad, c.gname, {c.g.output(c.node, 1), c.in(1), c.dy()},
                                {x.shape()}, {DType::kF32}, a));
}

// One MeanSquaredErrorGrad(a, b, dloss) per differentiated operand: d/da mean((a - b)^2).
Status MeanSquaredErrorGradient(GradientContext& c) {
  const Attrs a = c.BackwardAttrs();
  const Value p = c.in(0), t = c.in(1);
  if (c.need(0)) {
    Value d = c.Emit(OpKind::kMeanSquaredErrorGrad, c.gname + "/prediction", {p, t, c.dy()}, {p.shape()},
                     {DType::kF32}, a);
    STRATA_RETURN_IF_ERROR(c.Accumulate(p, d));
  }
  if (c.need(1)) {
    Value d = c.Emit(OpKind::kMeanSquaredErrorGrad, c.gname + "/target", {t, p, c.dy()}, {p.shape()}, {DType::kF32}, a);
    STRATA_RETURN_IF_ERROR(c.Accumulate(t, d));
  }
  return Status::OK();
}

// Per logit: the four of Softmax, the log-likelihood folded in.
int64_t CrossEntropyFlops(const Node& n) { return 4 * n.inputs[0].shape().num_elements(); }
// Per element: the difference, its square and the sum.
int64_t SquaredErrorFlops(const Node& n) { return 3 * n.inputs[0].shape().num_elements(); }

}  // namespace

void RegisterLossOps(OpTable& t) {
  const char* f = "loss";
  Register(t, {.kind = OpKind::kSoftmaxCrossEntropy, .name = "SoftmaxCrossEntropy", .family = f,
               .gradient = SoftmaxCrossEntropyGradient, .matrix_flops = NoFlops, .other_flops = CrossEntropyFlops});
  Register(t, {.kind = OpKind::kSoftmaxCrossEntropyGrad, .name = "SoftmaxCrossEntropyGrad", .family = f,
               .no_gradient = kSecondOrder, .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kMeanSquaredError, .name = "MeanSquaredError", .family = f,
               .gradient = MeanSquaredErrorGradient, .matrix_flops = NoFlops, .other_flops = SquaredErrorFlops});
  Register(t, {.kind = OpKind::kMeanSquaredErrorGrad, .name = "MeanSquaredErrorGrad", .family = f,
               .no_gradient = kSecondOrder, .matrix_flops = NoFlops, .other_flops = PerOutputElement});
}

}  // namespace ops
}  // namespace strata::graph
