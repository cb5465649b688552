// The normalization family: batch normalization in training (batch statistics, moving
// statistics updated in place) and inference (moving statistics), layer normalization over the
// last axis, and their gradient ops.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

namespace {

Status CheckChannelParams(const std::string& label, const Graph* g, Value x, const std::vector<Value>& ps) {
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

}  // namespace

Result<Value> Graph::BatchNorm(Value x, Value gamma, Value beta, Value mm, Value mv, BatchNormOptions o,
                               const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kBatchNorm, name_in, {x}, kAnyInput));
  STRATA_RETURN_IF_ERROR(CheckChannelParams(op.label, this, x, {gamma, beta, mm, mv}));
  if (nodes_[mm.node].kind != OpKind::kVariable || nodes_[mv.node].kind != OpKind::kVariable)
    return InvalidArgument(op.label + "moving statistics must be variables (they are updated in place)");
  const Shape c{x.shape()[-1]};
  Node n{OpKind::kBatchNorm, op.name, {x, gamma, beta, mm, mv}, {x.shape(), c, c},
         {x.dtype(), DType::kF32, DType::kF32}, {}, true};
  n.attrs.bn = o;
  return Finish(std::move(n));
}

Result<Value> Graph::BatchNormInference(Value x, Value gamma, Value beta, Value mm, Value mv, BatchNormOptions o,
                                        const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kBatchNormInference, name_in, {x}, kAnyInput));
  STRATA_RETURN_IF_ERROR(CheckChannelParams(op.label, this, x, {gamma, beta, mm, mv}));
  Node n{OpKind::kBatchNormInference, op.name, {x, gamma, beta, mm, mv}, {x.shape()}, {x.dtype()}, {}, false};
  n.attrs.bn = o;
  return Finish(std::move(n));
}

Result<Value> Graph::LayerNorm(Value x, Value gamma, Value beta, LayerNormOptions o, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kLayerNorm, name_in, {x}, kAnyInput));
  STRATA_RETURN_IF_ERROR(CheckChannelParams(op.label, this, x, {gamma, beta}));
  if (!(o.epsilon > 0)) return InvalidArgument(op.label + "epsilon must be > 0, found " + std::to_string(o.epsilon));
  std::vector<int64_t> rows = x.shape().dims();
  rows.pop_back();
  Node n{OpKind::kLayerNorm, op.name, {x, gamma, beta}, {x.shape(), Shape(rows), Shape(rows)},
         {x.dtype(), DType::kF32, DType::kF32}, {}, false};
  n.attrs.ln = o;
  return Finish(std::move(n));
}

namespace ops {
namespace {

// One grad node (`grad`: BatchNormGrad, LayerNormGrad) gives dx, dgamma and dbeta from x,
// gamma, the forward node's two statistics outputs (the batch's, or each row's, mean and
// variance) and dy; gradients flowing into those statistics outputs are not supported.
Status NormGradient(GradientContext& c, OpKind grad, const char* statistics) {
  if (c.dys[1].valid() || c.dys[2].valid())
    return Unimplemented(c.label + "gradients through the " + statistics + " outputs are not supported");
  const Value x = c.in(0);
  Attrs a = c.BackwardAttrs();
  a.bn = c.n.attrs.bn;
  a.ln = c.n.attrs.ln;
  const Shape ch{x.shape()[-1]};
  Value r = c.Emit(grad, c.gname, {x, c.in(1), c.g.output(c.node, 1), c.g.output(c.node, 2), c.dy()},
                   {x.shape(), ch, ch}, {x.dtype(), DType::kF32, DType::kF32}, a);
  if (c.need(0)) STRATA_RETURN_IF_ERROR(c.Accumulate(x, r));
  if (c.need(1)) STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(1), c.g.output(r.node, 1)));
  if (c.need(2)) STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(2), c.g.output(r.node, 2)));
  return Status::OK();
}
Status BatchNormGradient(GradientContext& c) { return NormGradient(c, OpKind::kBatchNormGrad, "batch statistics"); }
Status LayerNormGradient(GradientContext& c) { return NormGradient(c, OpKind::kLayerNormGrad, "mean and variance"); }

// Per element: subtract, multiply, multiply, add (the statistics' cost folded in).
int64_t ForwardFlops(const Node& n) { return 4 * n.inputs[0].shape().num_elements(); }
int64_t GradFlops(const Node& n) { return 6 * n.inputs[0].shape().num_elements(); }
// Layer norm's statistics are a pass of their own over each row (sum; difference, square,
// sum): 4 per element more than batch norm's count, both ways.
int64_t LayerNormFlops(const Node& n) { return 8 * n.inputs[0].shape().num_elements(); }
int64_t LayerNormGradFlops(const Node& n) { return 10 * n.inputs[0].shape().num_elements(); }

}  // namespace

void RegisterNormOps(OpTable& t) {
  Register(t, {.kind = OpKind::kBatchNorm, .name = "BatchNorm", .family = "norm", .gradient = BatchNormGradient,
               .matrix_flops = NoFlops, .other_flops = ForwardFlops});
  Register(t, {.kind = OpKind::kBatchNormInference, .name = "BatchNormInference", .family = "norm",
               .no_gradient = "inference only: a trained model's batch norm is BatchNorm",
               .matrix_flops = NoFlops, .other_flops = ForwardFlops});
  Register(t, {.kind = OpKind::kBatchNormGrad, .name = "BatchNormGrad", .family = "norm", .no_gradient = kSecondOrder,
               .matrix_flops = NoFlops, .other_flops = GradFlops});
  Register(t, {.kind = OpKind::kLayerNorm, .name = "LayerNorm", .family = "norm", .gradient = LayerNormGradient,
               .matrix_flops = NoFlops, .other_flops = LayerNormFlops});
  Register(t, {.kind = OpKind::kLayerNormGrad, .name = "LayerNormGrad", .family = "norm", .no_gradient = kSecondOrder,
               .matrix_flops = NoFlops, .other_flops = LayerNormGradFlops});
}

}  // namespace ops
}  // namespace strata::graph
