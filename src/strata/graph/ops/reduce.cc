// The reduction family: sums and means over axes, and Broadcast, their gradient (a value
// repeated along the reduced axes); BroadcastTo, Keras-style broadcasting, is composed from it.
#include <algorithm>

#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

namespace {

Result<Value> Reduce(Graph* g, OpKind kind, Value x, std::vector<int> axes, const std::string& name) {
  const std::string label = OpLabel(name, kind);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, g));
  if (x.dtype() != DType::kF32) return InvalidArgument(label + "input must be f32");
  STRATA_ASSIGN_OR_RETURN(std::vector<int> ax, NormalizeAxes(label, std::move(axes), x.shape().rank()));
  std::vector<int64_t> dims;
  for (int i = 0; i < x.shape().rank(); ++i)
    if (!std::binary_search(ax.begin(), ax.end(), i)) dims.push_back(x.shape()[i]);
  Node n{kind, name, {x}, {Shape(dims)}, {DType::kF32}, {}, false};
  n.attrs.axes = ax;
  return g->AddNode(std::move(n));
}

}  // namespace

Result<Value> Graph::ReduceSum(Value x, std::vector<int> axes, const std::string& n) {
  return Reduce(this, OpKind::kReduceSum, x, std::move(axes), UniqueName(n, OpKind::kReduceSum));
}
Result<Value> Graph::ReduceMean(Value x, std::vector<int> axes, const std::string& n) {
  return Reduce(this, OpKind::kReduceMean, x, std::move(axes), UniqueName(n, OpKind::kReduceMean));
}

Result<Value> Graph::Broadcast(Value x, Shape shape, std::vector<int> axes, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kBroadcast, name_in, {x}, kAnyInput));
  if (x.dtype() != DType::kF32) return InvalidArgument(op.label + "input must be f32");
  STRATA_ASSIGN_OR_RETURN(std::vector<int> ax, NormalizeAxes(op.label, std::move(axes), shape.rank()));
  std::vector<int64_t> kept;
  for (int i = 0; i < shape.rank(); ++i)
    if (!std::binary_search(ax.begin(), ax.end(), i)) kept.push_back(shape[i]);
  if (Shape(kept) != x.shape())
    return InvalidArgument(op.label + "input " + S(x.shape()) + " is not " + S(shape) + " reduced over the axes (" +
                           S(Shape(kept)) + ")");
  Node n{OpKind::kBroadcast, op.name, {x}, {shape}, {DType::kF32}, {}, false};
  n.attrs.axes = ax;
  return Finish(std::move(n));
}

Result<Value> Graph::BroadcastTo(Value x, Shape shape, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kBroadcast, name_in, {x}, kFloatInput));
  if (x.shape() == shape) return x;
  if (x.shape().rank() != shape.rank())
    return InvalidArgument(op.label + "cannot broadcast " + S(x.shape()) + " to " + S(shape) + " (ranks differ)");
  std::vector<int> axes;
  std::vector<int64_t> kept;
  for (int d = 0; d < shape.rank(); ++d) {
    if (x.shape()[d] == shape[d]) {
      kept.push_back(shape[d]);
    } else if (x.shape()[d] == 1) {
      axes.push_back(d);
    } else {
      return InvalidArgument(op.label + "cannot broadcast " + S(x.shape()) + " to " + S(shape) + " (dimension " +
                             std::to_string(d) + " is neither equal nor 1)");
    }
  }
  const DType dtype = x.dtype();
  if (dtype != DType::kF32) { STRATA_ASSIGN_OR_RETURN(x, Cast(x, DType::kF32, op.name + "/to_f32")); }
  STRATA_ASSIGN_OR_RETURN(Value r, Reshape(x, Shape(kept), op.name + "/squeeze"));
  STRATA_ASSIGN_OR_RETURN(Value y, Broadcast(r, shape, axes, dtype == DType::kF32 ? op.name : op.name + "/f32"));
  if (dtype == DType::kF32) return y;
  return Cast(y, dtype, op.name);
}

namespace ops {
namespace {

Status ReduceGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  const Value x = c.in(0);
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Broadcast(c.dy(), x.shape(), c.n.attrs.axes, c.gname));
  if (c.n.kind == OpKind::kReduceMean) {
    int64_t count = 1;
    for (int a : c.n.attrs.axes) count *= x.shape()[a];
    STRATA_ASSIGN_OR_RETURN(d, c.g.Scale(d, 1.0f / static_cast<float>(count), c.gname + "/mean"));
  }
  return c.Accumulate(x, d);
}

Status BroadcastGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.ReduceSum(c.dy(), c.n.attrs.axes, c.gname));
  return c.Accumulate(c.in(0), d);
}

}  // namespace

void RegisterReduceOps(OpTable& t) {
  Register(t, {.kind = OpKind::kReduceSum, .name = "ReduceSum", .family = "reduce", .gradient = ReduceGradient,
               .matrix_flops = NoFlops, .other_flops = PerInputElement});
  Register(t, {.kind = OpKind::kReduceMean, .name = "ReduceMean", .family = "reduce", .gradient = ReduceGradient,
               .matrix_flops = NoFlops, .other_flops = PerInputElement});
  Register(t, {.kind = OpKind::kBroadcast, .name = "Broadcast", .family = "reduce", .gradient = BroadcastGradient,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
}

}  // namespace ops
}  // namespace strata::graph
