// Reference kernels of the shape family: Concat and Slice along one axis, Transpose, and
// Reshape, Cast and Identity, which copy (a bf16 Cast rounds in the evaluator, as every bf16 output does).
#include <algorithm>
#include <cmath>
#include <string>

#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

Status Concat(const KernelContext& c) {
  const Node& n = c.node;
  Vec& y = c.out(0);
  const Shape& ys = c.out_shape(0);
  const int axis = n.attrs.axis;
  int64_t inner = 1;
  for (int d = axis + 1; d < ys.rank(); ++d) inner *= ys[d];
  int64_t outer = ys.num_elements() / (ys[axis] * inner), offset = 0;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const Vec& x = c.in(static_cast<int>(k));
    const int64_t len = n.inputs[k].shape()[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < len * inner; ++e) y[(o * ys[axis] + offset) * inner + e] = x[o * len * inner + e];
    offset += len;
  }
  return Status::OK();
}

Status Slice(const KernelContext& c) {
  const Node& n = c.node;
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  const Shape& xs = c.in_shape(0);
  const int axis = n.attrs.axis;
  int64_t inner = 1;
  for (int d = axis + 1; d < xs.rank(); ++d) inner *= xs[d];
  const int64_t outer = xs.num_elements() / (xs[axis] * inner), len = n.attrs.end - n.attrs.begin;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t e = 0; e < len * inner; ++e) y[o * len * inner + e] = x[(o * xs[axis] + n.attrs.begin) * inner + e];
  return Status::OK();
}

// y's axis i is x's axis perm[i].
Status Transpose(const KernelContext& c) {
  const std::vector<int>& perm = c.node.attrs.axes;
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  const Shape& xs = c.in_shape(0);
  const Shape& ys = c.out_shape(0);
  const int rank = xs.rank();
  std::vector<int64_t> x_stride(rank, 1), index(rank, 0);
  for (int d = rank - 2; d >= 0; --d) x_stride[d] = x_stride[d + 1] * xs[d + 1];
  for (int64_t e = 0; e < ys.num_elements(); ++e) {
    int64_t at = 0;
    for (int d = 0; d < rank; ++d) at += index[d] * x_stride[perm[d]];
    y[e] = x[at];
    for (int d = rank - 1; d >= 0 && ++index[d] == ys[d]; --d) index[d] = 0;
  }
  return Status::OK();
}

// The row of every id, which must name one of the table's rows.
Status CheckedRow(const KernelContext& c, double id, int64_t rows, int64_t at, int64_t* row) {
  if (!(id >= 0 && id < static_cast<double>(rows)) || id != std::floor(id))
    return InvalidArgument(c.label + "id " + std::to_string(id) + " at element " + std::to_string(at) +
                           " is not a row of the table [0, " + std::to_string(rows) + ")");
  *row = static_cast<int64_t>(id);
  return Status::OK();
}

Status Gather(const KernelContext& c) {  // inputs table [V, D], ids
  const Vec &table = c.in(0), &ids = c.in(1);
  Vec& y = c.out(0);
  const int64_t rows = c.in_shape(0)[0], d = c.in_shape(0)[1];
  for (size_t e = 0; e < ids.size(); ++e) {
    int64_t row = 0;
    STRATA_RETURN_IF_ERROR(CheckedRow(c, std::nearbyint(ids[e]), rows, static_cast<int64_t>(e), &row));
    for (int64_t k = 0; k < d; ++k) y[e * d + k] = table[row * d + k];
  }
  return Status::OK();
}

Status GatherGrad(const KernelContext& c) {  // inputs ids, dy; output d table [V, D]
  const Vec &ids = c.in(0), &dy = c.in(1);
  Vec& dt = c.out(0);
  const int64_t rows = c.out_shape(0)[0], d = c.out_shape(0)[1];
  std::fill(dt.begin(), dt.end(), 0.0);
  for (size_t e = 0; e < ids.size(); ++e) {
    int64_t row = 0;
    STRATA_RETURN_IF_ERROR(CheckedRow(c, std::nearbyint(ids[e]), rows, static_cast<int64_t>(e), &row));
    for (int64_t k = 0; k < d; ++k) dt[row * d + k] += dy[e * d + k];
  }
  return Status::OK();
}

Status Copy(const KernelContext& c) {  // Reshape, Cast, Identity
  c.out(0) = c.in(0);
  return Status::OK();
}

}  // namespace

void RegisterShapeOps(KernelTable& t) {
  t.SetAll({{OpKind::kConcat, Concat}, {OpKind::kSlice, Slice}, {OpKind::kReshape, Copy}, {OpKind::kCast, Copy},
            {OpKind::kIdentity, Copy}, {OpKind::kTranspose, Transpose}, {OpKind::kGather, Gather},
            {OpKind::kGatherGrad, GatherGrad}});
}

}  // namespace strata::backend::reference
