// Reference kernels of the reduce family: ReduceSum and ReduceMean over a set of axes, and
// Broadcast, their gradient, back along those axes.
#include <algorithm>

#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

// Splits a shape at `axes` into (outer-to-inner) strides so reductions can map a full index
// to its reduced index.
int64_t ReducedIndex(const Shape& s, const std::vector<int>& axes, int64_t linear) {
  int64_t r = 0, mul = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    const int64_t idx = linear % s[d];
    linear /= s[d];
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      r += idx * mul;
      mul *= s[d];
    }
  }
  return r;
}

Status Reduce(const KernelContext& c) {  // ReduceSum and ReduceMean
  const Node& n = c.node;
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  const Shape& xs = c.in_shape(0);
  double count = 1;
  for (int a : n.attrs.axes) count *= static_cast<double>(xs[a]);
  for (int64_t e = 0; e < xs.num_elements(); ++e)
    y[ReducedIndex(xs, n.attrs.axes, e)] += x[e] / (n.kind == OpKind::kReduceMean ? count : 1.0);
  return Status::OK();
}

Status Broadcast(const KernelContext& c) {
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  const Shape& ys = c.out_shape(0);
  for (int64_t e = 0; e < ys.num_elements(); ++e) y[e] = x[ReducedIndex(ys, c.node.attrs.axes, e)];
  return Status::OK();
}

}  // namespace

void RegisterReduceOps(KernelTable& t) {
  t.SetAll({{OpKind::kReduceSum, Reduce}, {OpKind::kReduceMean, Reduce}, {OpKind::kBroadcast, Broadcast}});
}

}  // namespace strata::backend::reference
