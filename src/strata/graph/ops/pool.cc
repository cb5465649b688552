// The pooling family: max and average pooling over [N, H, W, C] windows (and the global
// poolings composed from them), and their gradient ops.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

namespace {

Result<Shape> PoolShape(const std::string& label, Value x, PoolOptions& o) {
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

}  // namespace

Result<Value> Graph::MaxPool(Value x, PoolOptions o, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kMaxPool, name_in, {x}, kFloatInput));
  STRATA_ASSIGN_OR_RETURN(Shape out, PoolShape(op.label, x, o));
  Node n{OpKind::kMaxPool, op.name, {x}, {out}, {x.dtype()}, {}, false};
  n.attrs.pool = o;
  return Finish(std::move(n));
}

Result<Value> Graph::AvgPool(Value x, PoolOptions o, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kAvgPool, name_in, {x}, kFloatInput));
  STRATA_ASSIGN_OR_RETURN(Shape out, PoolShape(op.label, x, o));
  Node n{OpKind::kAvgPool, op.name, {x}, {out}, {x.dtype()}, {}, false};
  n.attrs.pool = o;
  return Finish(std::move(n));
}

namespace {

// Keras's global poolings: the window is the whole image, the output [N, C].
Result<Value> GlobalPool(Graph* g, OpKind kind, Value x, const std::string& name, const char* keras_name) {
  if (!x.valid() || x.shape().rank() != 4)
    return InvalidArgument(OpLabel(name.empty() ? keras_name : name, kind) + "expected input [N, H, W, C], found " +
                           (x.valid() ? S(x.shape()) : "nothing"));
  const Shape& s = x.shape();
  const PoolOptions whole{.window_h = static_cast<int>(s[1]), .window_w = static_cast<int>(s[2])};
  STRATA_ASSIGN_OR_RETURN(Value p, kind == OpKind::kMaxPool ? g->MaxPool(x, whole, name) : g->AvgPool(x, whole, name));
  return g->Reshape(p, Shape{s[0], s[3]}, name.empty() ? "" : name + "/flatten");
}

}  // namespace

Result<Value> Graph::GlobalAvgPool(Value x, const std::string& name) {
  return GlobalPool(this, OpKind::kAvgPool, x, name, "global_average_pooling");
}

Result<Value> Graph::GlobalMaxPool(Value x, const std::string& name) {
  return GlobalPool(this, OpKind::kMaxPool, x, name, "global_max_pooling");
}

namespace ops {
namespace {

// MaxPoolGrad reads x (where the maximum was); AvgPoolGrad only the input's shape.
Status MaxPoolGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  Attrs a = c.BackwardAttrs();
  a.pool = c.n.attrs.pool;
  const Value x = c.in(0);
  return c.Accumulate(x, c.Emit(OpKind::kMaxPoolGrad, c.gname, {x, c.dy()}, {x.shape()}, {x.dtype()}, a));
}

Status AvgPoolGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  Attrs a = c.BackwardAttrs();
  a.pool = c.n.attrs.pool;
  const Value x = c.in(0);
  a.input_shape = x.shape();
  return c.Accumulate(x, c.Emit(OpKind::kAvgPoolGrad, c.gname, {c.dy()}, {x.shape()}, {x.dtype()}, a));
}

int64_t WindowFlops(const Node& n) {
  return n.out_shapes[0].num_elements() * n.attrs.pool.window_h * n.attrs.pool.window_w;
}

}  // namespace

void RegisterPoolOps(OpTable& t) {
  Register(t, {.kind = OpKind::kMaxPool, .name = "MaxPool", .family = "pool", .gradient = MaxPoolGradient,
               .matrix_flops = NoFlops, .other_flops = WindowFlops});
  Register(t, {.kind = OpKind::kAvgPool, .name = "AvgPool", .family = "pool", .gradient = AvgPoolGradient,
               .matrix_flops = NoFlops, .other_flops = WindowFlops});
  Register(t, {.kind = OpKind::kMaxPoolGrad, .name = "MaxPoolGrad", .family = "pool", .no_gradient = kSecondOrder,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
  Register(t, {.kind = OpKind::kAvgPoolGrad, .name = "AvgPoolGrad", .family = "pool", .no_gradient = kSecondOrder,
               .matrix_flops = NoFlops, .other_flops = PerOutputElement});
}

}  // namespace ops
}  // namespace strata::graph
