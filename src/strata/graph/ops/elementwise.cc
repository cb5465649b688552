// The elementwise family: sums, differences and products (the second operand broadcast along
// its size-1 dimensions), scaling by a constant, the bias add and its gradient, and dropout.
#include <algorithm>

#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

namespace {

Result<Value> Binary(Graph* g, OpKind kind, Value a, Value b, const std::string& name) {
  const std::string label = OpLabel(name, kind);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {a, b}, g));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", a));
  STRATA_RETURN_IF_ERROR(CheckSameDType(label, a, b));
  if (a.shape() != b.shape())
    return InvalidArgument(label + "shapes differ: " + S(a.shape()) + " and " + S(b.shape()));
  Node n{kind, name, {a, b}, {a.shape()}, {a.dtype()}, {}, false};
  return g->AddNode(std::move(n));
}

}  // namespace

Result<Value> Graph::Add(Value a, Value b, const std::string& n) { return Binary(this, OpKind::kAdd, a, b, UniqueName(n, OpKind::kAdd)); }
Result<Value> Graph::Sub(Value a, Value b, const std::string& n) { return Binary(this, OpKind::kSub, a, b, UniqueName(n, OpKind::kSub)); }

Result<Value> Graph::Multiply(Value a, Value b, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kMultiply, name_in, {a, b}, kAnyInput));
  if (a.shape() == b.shape() || a.shape().rank() != b.shape().rank())
    return Binary(this, OpKind::kMultiply, a, b, op.name);
  STRATA_RETURN_IF_ERROR(CheckFloat(op.label, "input", a));
  STRATA_RETURN_IF_ERROR(CheckSameDType(op.label, a, b));
  std::vector<int64_t> out = a.shape().dims();
  for (int d = 0; d < a.shape().rank(); ++d) {
    const int64_t x = a.shape()[d], y = b.shape()[d];
    if (x != y && x != 1 && y != 1)
      return InvalidArgument(op.label + "shapes " + S(a.shape()) + " and " + S(b.shape()) +
                             " do not broadcast (dimension " + std::to_string(d) + ": " + std::to_string(x) + " vs " +
                             std::to_string(y) + "; each must match or be 1)");
    out[d] = std::max(x, y);
  }
  // One Multiply node whose second input has size-1 dimensions (the kernels broadcast it:
  // oneDNN's binary, no full-size copy); the product commutes, so the full operand goes first.
  if (a.shape() != Shape(out)) std::swap(a, b);
  if (a.shape() != Shape(out)) {  // both broadcast ([N, 1, W, C] * [N, H, 1, C]): widen one
    STRATA_ASSIGN_OR_RETURN(a, BroadcastTo(a, Shape(out), op.name + "/broadcast"));
  }
  Node n{OpKind::kMultiply, op.name, {a, b}, {a.shape()}, {a.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::Scale(Value x, float factor, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kScale, name_in, {x}, kFloatInput));
  Node n{OpKind::kScale, op.name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  n.attrs.scalar = factor;
  return Finish(std::move(n));
}

Result<Value> Graph::BiasAdd(Value x, Value bias, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kBiasAdd, name_in, {x, bias}, kFloatInput));
  if (bias.shape().rank() != 1 || x.shape().rank() < 1 || bias.shape()[0] != x.shape()[-1])
    return InvalidArgument(op.label + "expected bias [" + std::to_string(x.shape().rank() ? x.shape()[-1] : 0) +
                           "] for input " + S(x.shape()) + ", found " + S(bias.shape()));
  Node n{OpKind::kBiasAdd, op.name, {x, bias}, {x.shape()}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::Dropout(Value x, float rate, uint64_t seed, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kDropout, name_in, {x}, kAnyInput));
  if (x.dtype() != DType::kF32) return InvalidArgument(op.label + "input must be f32");
  if (!(rate >= 0 && rate < 1))
    return InvalidArgument(op.label + "rate must be in [0, 1), found " + std::to_string(rate));
  Node n{OpKind::kDropout, op.name, {x}, {x.shape(), x.shape()}, {x.dtype(), DType::kF32}, {}, true};
  n.attrs.scalar = rate;
  n.attrs.seed = seed;
  return Finish(std::move(n));
}

Result<Value> Graph::Dropout(Value x, float rate, uint64_t seed, Shape noise_shape, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kDropout, name_in, {x}, kAnyInput));
  if (noise_shape == x.shape()) return Dropout(x, rate, seed, op.name);
  if (x.dtype() != DType::kF32) return InvalidArgument(op.label + "input must be f32");
  if (!(rate >= 0 && rate < 1))
    return InvalidArgument(op.label + "rate must be in [0, 1), found " + std::to_string(rate));
  bool ok = noise_shape.rank() == x.shape().rank();
  for (int d = 0; ok && d < noise_shape.rank(); ++d) ok = noise_shape[d] == 1 || noise_shape[d] == x.shape()[d];
  if (!ok)
    return InvalidArgument(op.label + "noise shape " + S(noise_shape) + " does not fit input " + S(x.shape()) +
                           " (each extent the input's or 1)");
  Value ones = Constant(1.0f, noise_shape, op.name + "/ones");
  STRATA_ASSIGN_OR_RETURN(Value mask, Dropout(ones, rate, seed, op.name + "/mask"));
  return Multiply(x, mask, op.name);  // the mask broadcast by the kernel
}

namespace ops {
namespace {

Status AddGradient(GradientContext& c) {
  if (c.need(0)) STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(0), c.dy()));
  if (c.need(1)) STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(1), c.dy()));
  return Status::OK();
}

Status SubGradient(GradientContext& c) {
  if (c.need(0)) STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(0), c.dy()));
  if (c.need(1)) {
    STRATA_ASSIGN_OR_RETURN(Value neg, c.g.Scale(c.dy(), -1.0f, c.gname + "/neg"));
    STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(1), neg));
  }
  return Status::OK();
}

Status MultiplyGradient(GradientContext& c) {
  Graph& g = c.g;
  const std::string& gname = c.gname;
  if (c.need(0)) {
    STRATA_ASSIGN_OR_RETURN(Value d, g.Multiply(c.dy(), c.in(1), gname + "/a"));
    STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(0), d));
  }
  if (c.need(1)) {
    STRATA_ASSIGN_OR_RETURN(Value d, g.Multiply(c.dy(), c.in(0), gname + "/b"));
    const Value b = c.in(1);
    const Shape& xs = c.in(0).shape();
    if (b.shape() != xs) {  // b broadcast along its size-1 dimensions: sum over them
      std::vector<int> axes;
      for (int k = 0; k < xs.rank(); ++k)
        if (b.shape()[k] != xs[k]) axes.push_back(k);
      if (d.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(d, g.Cast(d, DType::kF32, gname + "/b_f32")); }
      STRATA_ASSIGN_OR_RETURN(d, g.ReduceSum(d, axes, gname + "/b_sum"));
      STRATA_ASSIGN_OR_RETURN(d, g.Reshape(d, b.shape(), gname + "/b_shape"));
      if (b.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(d, g.Cast(d, b.dtype(), gname + "/b_cast")); }
    }
    STRATA_RETURN_IF_ERROR(c.Accumulate(b, d));
  }
  return Status::OK();
}

Status ScaleGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Scale(c.dy(), c.n.attrs.scalar, c.gname));
  return c.Accumulate(c.in(0), d);
}

Status BiasAddGradient(GradientContext& c) {
  if (c.need(0)) STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(0), c.dy()));
  if (c.need(1)) {
    Value db = c.Emit(OpKind::kBiasAddGrad, c.gname + "/bias", {c.dy()}, {c.in(1).shape()}, {DType::kF32},
                      c.BackwardAttrs());
    STRATA_RETURN_IF_ERROR(c.Accumulate(c.in(1), db));
  }
  return Status::OK();
}

// The mask (output 1) is the step's random draw: no gradient flows into it.
Status DropoutGradient(GradientContext& c) {
  if (!c.dy().valid() || !c.need(0)) return Status::OK();
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Multiply(c.dy(), c.g.output(c.node, 1), c.gname));
  return c.Accumulate(c.in(0), d);
}

}  // namespace

void RegisterElementwiseOps(OpTable& t) {
  const char* f = "elementwise";
  Register(t, {.kind = OpKind::kAdd, .name = "Add", .family = f, .gradient = AddGradient, .matrix_flops = NoFlops,
               .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kSub, .name = "Sub", .family = f, .gradient = SubGradient, .matrix_flops = NoFlops,
               .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kMultiply, .name = "Multiply", .family = f, .gradient = MultiplyGradient,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kScale, .name = "Scale", .family = f, .gradient = ScaleGradient,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kBiasAdd, .name = "BiasAdd", .family = f, .gradient = BiasAddGradient,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kBiasAddGrad, .name = "BiasAddGrad", .family = f, .no_gradient = kSecondOrder,
               .matrix_flops = NoFlops, .other_flops = PerInputElement});
  Register(t, {.kind = OpKind::kDropout, .name = "Dropout", .family = f, .gradient = DropoutGradient,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
}

}  // namespace ops
}  // namespace strata::graph
