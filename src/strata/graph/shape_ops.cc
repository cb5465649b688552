// The ops that move or reshape data without arithmetic on it (broadcast, pad, concat, slice,
// reshape, cast, reductions, identity): shape inference and argument checks, as graph.cc does
// for the compute ops.
#include <algorithm>

#include "strata/graph/graph.h"
#include "strata/graph/op_checks.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks

Result<Value> Graph::BroadcastTo(Value x, Shape shape, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kBroadcast);
  const std::string label = OpLabel(name, OpKind::kBroadcast);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (x.shape() == shape) return x;
  if (x.shape().rank() != shape.rank())
    return InvalidArgument(label + "cannot broadcast " + S(x.shape()) + " to " + S(shape) + " (ranks differ)");
  std::vector<int> axes;
  std::vector<int64_t> kept;
  for (int d = 0; d < shape.rank(); ++d) {
    if (x.shape()[d] == shape[d]) {
      kept.push_back(shape[d]);
    } else if (x.shape()[d] == 1) {
      axes.push_back(d);
    } else {
      return InvalidArgument(label + "cannot broadcast " + S(x.shape()) + " to " + S(shape) + " (dimension " +
                             std::to_string(d) + " is neither equal nor 1)");
    }
  }
  const DType dtype = x.dtype();
  if (dtype != DType::kF32) { STRATA_ASSIGN_OR_RETURN(x, Cast(x, DType::kF32, name + "/to_f32")); }
  STRATA_ASSIGN_OR_RETURN(Value r, Reshape(x, Shape(kept), name + "/squeeze"));
  STRATA_ASSIGN_OR_RETURN(Value y, Broadcast(r, shape, axes, dtype == DType::kF32 ? name : name + "/f32"));
  if (dtype == DType::kF32) return y;
  return Cast(y, dtype, name);
}

Result<Value> Graph::ZeroPad2D(Value x, int top, int bottom, int left, int right, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kConcat);
  const std::string label = OpLabel(name, OpKind::kConcat);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (x.shape().rank() != 4) return InvalidArgument(label + "expected input [N, H, W, C], found " + S(x.shape()));
  if (top < 0 || bottom < 0 || left < 0 || right < 0)
    return InvalidArgument(label + "padding must be >= 0, found ((" + std::to_string(top) + ", " +
                           std::to_string(bottom) + "), (" + std::to_string(left) + ", " + std::to_string(right) + "))");
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
  if (!rows && !cols) return Identity(x, name);
  Value y = x;
  if (rows) { STRATA_ASSIGN_OR_RETURN(y, pad(y, 1, top, bottom, cols ? name + "/rows" : name)); }
  if (cols) { STRATA_ASSIGN_OR_RETURN(y, pad(y, 2, left, right, name)); }
  return y;
}

Result<Value> Graph::Concat(const std::vector<Value>& xs, int axis, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kConcat);
  const std::string label = OpLabel(name, OpKind::kConcat);
  if (xs.empty()) return InvalidArgument(label + "nothing to concatenate");
  STRATA_RETURN_IF_ERROR(CheckValid(label, xs, this));
  const int rank = xs[0].shape().rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return InvalidArgument(label + "axis out of range for " + S(xs[0].shape()));
  std::vector<int64_t> dims = xs[0].shape().dims();
  dims[axis] = 0;
  for (const Value& v : xs) {
    STRATA_RETURN_IF_ERROR(CheckSameDType(label, xs[0], v));
    bool ok = v.shape().rank() == rank;
    for (int i = 0; ok && i < rank; ++i) ok = i == axis || v.shape()[i] == xs[0].shape()[i];
    if (!ok)
      return InvalidArgument(label + "shapes " + S(xs[0].shape()) + " and " + S(v.shape()) + " differ off axis " +
                             std::to_string(axis));
    dims[axis] += v.shape()[axis];
  }
  Node n{OpKind::kConcat, name, xs, {Shape(dims)}, {xs[0].dtype()}, {}, false};
  n.attrs.axis = axis;
  return Finish(std::move(n));
}

Result<Value> Graph::Slice(Value x, int axis, int64_t begin, int64_t end, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kSlice);
  const std::string label = OpLabel(name, OpKind::kSlice);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  const int rank = x.shape().rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return InvalidArgument(label + "axis out of range for " + S(x.shape()));
  if (begin < 0 || end > x.shape()[axis] || begin >= end)
    return InvalidArgument(label + "range [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") outside axis " + std::to_string(axis) + " of " + S(x.shape()));
  std::vector<int64_t> dims = x.shape().dims();
  dims[axis] = end - begin;
  Node n{OpKind::kSlice, name, {x}, {Shape(dims)}, {x.dtype()}, {}, false};
  n.attrs.axis = axis;
  n.attrs.begin = begin;
  n.attrs.end = end;
  return Finish(std::move(n));
}

Result<Value> Graph::Reshape(Value x, Shape shape, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kReshape);
  const std::string label = OpLabel(name, OpKind::kReshape);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  std::vector<int64_t> dims = shape.dims();
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) return InvalidArgument(label + "more than one -1 in " + S(shape));
      infer = static_cast<int>(i);
    } else if (dims[i] <= 0) {
      return InvalidArgument(label + "non-positive extent in " + S(shape));
    } else {
      known *= dims[i];
    }
  }
  const int64_t total = x.shape().num_elements();
  if (infer >= 0) {
    if (total % known != 0) return InvalidArgument(label + "cannot reshape " + S(x.shape()) + " to " + S(shape));
    dims[infer] = total / known;
  }
  if (Shape(dims).num_elements() != total)
    return InvalidArgument(label + "cannot reshape " + S(x.shape()) + " (" + std::to_string(total) +
                           " elements) to " + S(Shape(dims)));
  Node n{OpKind::kReshape, name, {x}, {Shape(dims)}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

Result<Value> Graph::Flatten(Value x, const std::string& name) {
  if (!x.valid() || x.shape().rank() < 1)
    return InvalidArgument(OpLabel(name.empty() ? "flatten" : name, OpKind::kReshape) + "expected [N, ...]");
  return Reshape(x, Shape{x.shape()[0], -1}, name);
}

Result<Value> Graph::Cast(Value x, DType to, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kCast);
  const std::string label = OpLabel(name, OpKind::kCast);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  STRATA_RETURN_IF_ERROR(CheckFloat(label, "input", x));
  if (!IsFloat(to)) return InvalidArgument(label + "only f32 <-> bf16 casts are supported");
  Node n{OpKind::kCast, name, {x}, {x.shape()}, {to}, {}, false};
  n.attrs.dtype = to;
  return Finish(std::move(n));
}

static Result<Value> Reduce(Graph* g, OpKind kind, Value x, std::vector<int> axes, const std::string& name) {

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

Result<Value> Graph::ReduceSum(Value x, std::vector<int> axes, const std::string& n) {
  return Reduce(this, OpKind::kReduceSum, x, std::move(axes), UniqueName(n, OpKind::kReduceSum));
}
Result<Value> Graph::ReduceMean(Value x, std::vector<int> axes, const std::string& n) {
  return Reduce(this, OpKind::kReduceMean, x, std::move(axes), UniqueName(n, OpKind::kReduceMean));
}

Result<Value> Graph::Broadcast(Value x, Shape shape, std::vector<int> axes, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kBroadcast);
  const std::string label = OpLabel(name, OpKind::kBroadcast);
  STRATA_RETURN_IF_ERROR(CheckValid(label, {x}, this));
  if (x.dtype() != DType::kF32) return InvalidArgument(label + "input must be f32");
  STRATA_ASSIGN_OR_RETURN(std::vector<int> ax, NormalizeAxes(label, std::move(axes), shape.rank()));
  std::vector<int64_t> kept;
  for (int i = 0; i < shape.rank(); ++i)
    if (!std::binary_search(ax.begin(), ax.end(), i)) kept.push_back(shape[i]);
  if (Shape(kept) != x.shape())
    return InvalidArgument(label + "input " + S(x.shape()) + " is not " + S(shape) + " reduced over the axes (" +
                           S(Shape(kept)) + ")");
  Node n{OpKind::kBroadcast, name, {x}, {shape}, {DType::kF32}, {}, false};
  n.attrs.axes = ax;
  return Finish(std::move(n));
}

Result<Value> Graph::Identity(Value x, const std::string& name_in) {
  const std::string name = UniqueName(name_in, OpKind::kIdentity);
  STRATA_RETURN_IF_ERROR(CheckValid(OpLabel(name, OpKind::kIdentity), {x}, this));
  Node n{OpKind::kIdentity, name, {x}, {x.shape()}, {x.dtype()}, {}, false};
  return Finish(std::move(n));
}

}  // namespace strata::graph
