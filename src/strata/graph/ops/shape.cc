// The shape family: ops that move data without arithmetic on it (concat, slice, reshape,
// transpose, gather (an embedding's lookup) and its scatter-add gradient, cast, identity), and
// ZeroPad2D, composed as a concatenation with zeros.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

Result<Value> Graph::ZeroPad2D(Value x, int top, int bottom, int left, int right, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kConcat, name_in, {x}, kFloatInput));
  if (x.shape().rank() != 4) return InvalidArgument(op.label + "expected input [N, H, W, C], found " + S(x.shape()));
  if (top < 0 || bottom < 0 || left < 0 || right < 0)
    return InvalidArgument(op.label + "padding must be >= 0, found ((" + std::to_string(top) + ", " +
                           std::to_string(bottom) + "), (" + std::to_string(left) + ", " + std::to_string(right) +
                           "))");
  auto pad = [&](Value v, int axis, int before, int after, const std::string& n) -> Result<Value> {
    std::vector<Value> parts;
    auto zeros = [&](int extent, const char* where) -> Result<Value> {
      std::vector<int64_t> dims = v.shape().dims();
      dims[axis] = extent;
      Value z = Constant(0.0f, Shape(std::move(dims)), n + "/" + where);
      if (v.dtype() == DType::kF32) return z;
      return Cast(z, v.dtype(), n + "/" + where + "_cast");
    };
    if (before > 0) { STRATA_ASSIGN_OR_RETURN(Value z, zeros(before, "zeros_before")); parts.push_back(z); }
    parts.push_back(v);
    if (after > 0) { STRATA_ASSIGN_OR_RETURN(Value z, zeros(after, "zeros_after")); parts.push_back(z); }
    return Concat(parts, axis, n);
  };
  const bool rows = top > 0 || bottom > 0, cols = left > 0 || right > 0;
  if (!rows && !cols) return Identity(x, op.name);
  Value y = x;
  if (rows) { STRATA_ASSIGN_OR_RETURN(y, pad(y, 1, top, bottom, cols ? op.name + "/rows" : op.name)); }
  if (cols) { STRATA_ASSIGN_OR_RETURN(y, pad(y, 2, left, right, op.name)); }
  return y;
}

Result<Value> Graph::Concat(const std::vector<Value>& xs, int axis, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kConcat, name_in, xs, kAnyInput));
  if (xs.empty()) return InvalidArgument(op.label + "nothing to concatenate");
  const int rank = xs[0].shape().rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return InvalidArgument(op.label + "axis out of range for " + S(xs[0].shape()));
  std::vector<int64_t> dims = xs[0].shape().dims();
  dims[axis] = 0;
  for (const Value& v : xs) {
    STRATA_RETURN_IF_ERROR(CheckSameDType(op.label, xs[0], v));
    bool ok = v.shape().rank() == rank;
    for (int i = 0; ok && i < rank; ++i) ok = i == axis || v.shape()[i] == xs[0].shape()[i];
    if (!ok)
      return InvalidArgument(op.label + "shapes " + S(xs[0].shape()) + " and " + S(v.shape()) + " differ off axis " +
                             std::to_string(axis));
    dims[axis] += v.shape()[axis];
  }
  Node n{OpKind::kConcat, op.name, xs, {Shape(dims)}, {xs[0].dtype()}, {}, false};
  n.attrs.axis = axis;
  return Finish(std::move(n));
}

Result<Value> Graph::Slice(Value x, int axis, int64_t begin, int64_t end, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kSlice, name_in, {x}, kAnyInput));
  const int rank = x.shape().rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return InvalidArgument(op.label + "axis out of range for " + S(x.shape()));
  if (begin < 0 || end > x.shape()[axis] || begin >= end)
    return InvalidArgument(op.label + "range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") outside axis " + std::to_string(axis) + " of " + S(x.shape()));
  std::vector<int64_t> dims = x.shape().dims();
  dims[axis] = end - begin;
  Node n{OpKind::kSlice, op.name, {x}, {Shape(dims)}, {x.dtype()}, {}, false};
  n.attrs.axis = axis;
  n.attrs.begin = begin;
  n.attrs.end = end;
  return Finish(std::move(n));
}

Result<Value> Graph::Reshape(Value x, Shape shape, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kReshape, name_in, {x}, kAnyInput));
  std::vector<int64_t> dims = shape.dims();
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) return InvalidArgument(op.label + "more than one -1 in " + S(shape));
      infer = static_cast<int>(i);
    } else if (dims[i] <= 0) {
      return InvalidArgument(op.label + "non-positive extent in " + S(shape));
    } else {
      known *= dims[i];
    }
  }
  const int64_t total = x.shape().num_elements();
  if (infer >= 0) {
    if (total % known != 0) return InvalidArgument(op.label + "cannot reshape " + S(x.shape()) + " to " + S(shape));
    dims[infer] = total / known;
  }
  if (Shape(dims).num_elements() != total)
    return InvalidArgument(op.label + "cannot reshape " + S(x.shape()) + " (" + std::to_string(total) +
                           " elements) to " + S(Shape(dims)));
  Node n{OpKind::kReshape, op.name, {x}, {Shape(dims)}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::Transpose(Value x, std::vector<int> perm, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kTranspose, name_in, {x}, kAnyInput));
  const int rank = x.shape().rank();
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int>(perm.size()) == rank;
  for (int a : perm) {
    valid = valid && a >= 0 && a < rank && !seen[a];
    if (a >= 0 && a < rank) seen[a] = true;
  }
  if (!valid) {
    std::string p;
    for (int a : perm) p += (p.empty() ? "" : ", ") + std::to_string(a);
    return InvalidArgument(op.label + "perm {" + p + "} is not a permutation of the " + std::to_string(rank) +
                           " axes of " + S(x.shape()));
  }
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) dims[i] = x.shape()[perm[i]];
  Node n{OpKind::kTranspose, op.name, {x}, {Shape(dims)}, {x.dtype()}, {}, false};
  n.attrs.axes = std::move(perm);
  return Finish(std::move(n));
}

Result<Value> Graph::Gather(Value table, Value ids, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kGather, name_in, {table, ids}, kFloatInput));
  if (table.shape().rank() != 2)
    return InvalidArgument(op.label + "expected a table [rows, features], found " + S(table.shape()));
  if (ids.dtype() != DType::kI32 && ids.dtype() != DType::kF32)
    return InvalidArgument(op.label + "ids must be int32 or float32");
  std::vector<int64_t> dims = ids.shape().dims();
  dims.push_back(table.shape()[1]);
  Node n{OpKind::kGather, op.name, {table, ids}, {Shape(dims)}, {table.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::Flatten(Value x, const std::string& name) {
  if (!x.valid() || x.shape().rank() < 1)
    return InvalidArgument(OpLabel(name.empty() ? "flatten" : name, OpKind::kReshape) + "expected [N, ...]");
  return Reshape(x, Shape{x.shape()[0], -1}, name);
}

Result<Value> Graph::Cast(Value x, DType to, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kCast, name_in, {x}, kFloatInput));
  if (!IsFloat(to)) return InvalidArgument(op.label + "only f32 <-> bf16 casts are supported");
  Node n{OpKind::kCast, op.name, {x}, {x.shape()}, {to}, {}, false};
  n.attrs.dtype = to;
  return Finish(std::move(n));
}

Result<Value> Graph::Identity(Value x, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kIdentity, name_in, {x}, kAnyInput));
  Node n{OpKind::kIdentity, op.name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

namespace ops {
namespace {

Status ConcatGradient(GradientContext& c) {
  const int axis = c.n.attrs.axis;
  int64_t begin = 0;
  for (size_t k = 0; k < c.n.inputs.size(); ++k) {
    const int64_t len = c.n.inputs[k].shape()[axis];
    if (c.need(static_cast<int>(k))) {
      STRATA_ASSIGN_OR_RETURN(Value d, c.g.Slice(c.dy(), axis, begin, begin + len, c.gname + "/" + std::to_string(k)));
      STRATA_RETURN_IF_ERROR(c.Accumulate(c.n.inputs[k], d));
    }
    begin += len;
  }
  return Status::OK();
}

// dx = [zeros, dy, zeros] along the axis.
Status SliceGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  const Value x = c.in(0);
  const int axis = c.n.attrs.axis;
  std::vector<Value> parts;
  std::vector<int64_t> dims = x.shape().dims();
  if (c.n.attrs.begin > 0) {
    dims[axis] = c.n.attrs.begin;
    parts.push_back(c.g.Constant(0, Shape(dims), c.gname + "/zeros_before"));
  }
  parts.push_back(c.dy());
  if (c.n.attrs.end < x.shape()[axis]) {
    dims[axis] = x.shape()[axis] - c.n.attrs.end;
    parts.push_back(c.g.Constant(0, Shape(dims), c.gname + "/zeros_after"));
  }
  if (parts.size() == 1) return c.Accumulate(x, c.dy());
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Concat(parts, axis, c.gname));
  return c.Accumulate(x, d);
}

Status ReshapeGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Reshape(c.dy(), c.in(0).shape(), c.gname));
  return c.Accumulate(c.in(0), d);
}

// dx is dy transposed back: the inverse permutation.
Status TransposeGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  const std::vector<int>& perm = c.n.attrs.axes;
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Transpose(c.dy(), inverse, c.gname));
  return c.Accumulate(c.in(0), d);
}

// d table: dy's rows added onto the rows their ids name (GatherGrad); the ids have none.
Status GatherGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  const Value table = c.in(0);
  return c.Accumulate(table, c.Emit(OpKind::kGatherGrad, c.gname, {c.in(1), c.dy()}, {table.shape()}, {DType::kF32},
                                    c.BackwardAttrs()));
}

Status CastGradient(GradientContext& c) {
  if (!c.need(0)) return Status::OK();
  STRATA_ASSIGN_OR_RETURN(Value d, c.g.Cast(c.dy(), c.in(0).dtype(), c.gname));
  return c.Accumulate(c.in(0), d);
}

Status IdentityGradient(GradientContext& c) { return c.need(0) ? c.Accumulate(c.in(0), c.dy()) : Status::OK(); }

}  // namespace

void RegisterShapeOps(OpTable& t) {
  const char* f = "shape";
  Register(t, {.kind = OpKind::kConcat, .name = "Concat", .family = f, .gradient = ConcatGradient,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kSlice, .name = "Slice", .family = f, .gradient = SliceGradient,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kReshape, .name = "Reshape", .family = f, .gradient = ReshapeGradient,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kTranspose, .name = "Transpose", .family = f, .gradient = TransposeGradient,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kGather, .name = "Gather", .family = f, .gradient = GatherGradient,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kGatherGrad, .name = "GatherGrad", .family = f, .no_gradient = kSecondOrder,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kCast, .name = "Cast", .family = f, .gradient = CastGradient, .matrix_flops = NoFlops,
               .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kIdentity, .name = "Identity", .family = f, .gradient = IdentityGradient,
               .matrix_flops = NoFlops, .other_flops = NoFlops});
}

}  // namespace ops
}  // namespace strata::graph
