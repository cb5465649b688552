// Reference kernels of the elementwise family: Add, Sub, Multiply (with the second operand
// broadcast), Scale, BiasAdd and its gradient, and Dropout.
#include "strata/backend/dropout_mask.h"
#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

Status Add(const KernelContext& c) {
  const Vec &a = c.in(0), &b = c.in(1);
  Vec& y = c.out(0);
  for (size_t e = 0; e < y.size(); ++e) y[e] = a[e] + b[e];
  return Status::OK();
}

Status Sub(const KernelContext& c) {
  const Vec &a = c.in(0), &b = c.in(1);
  Vec& y = c.out(0);
  for (size_t e = 0; e < y.size(); ++e) y[e] = a[e] - b[e];
  return Status::OK();
}

Status Multiply(const KernelContext& c) {
  const Vec &a = c.in(0), &b = c.in(1);
  Vec& y = c.out(0);
  const Shape& as = c.in_shape(0);
  const Shape& bs = c.in_shape(1);
  if (as == bs) {
    for (size_t e = 0; e < y.size(); ++e) y[e] = a[e] * b[e];
    return Status::OK();
  }
  // The second input broadcast along its size-1 dimensions (Graph::Multiply).
  for (int64_t e = 0; e < as.num_elements(); ++e) {
    int64_t rest = e, be = 0, bstride = 1;
    for (int d = as.rank() - 1; d >= 0; --d) {
      const int64_t i = rest % as[d];
      rest /= as[d];
      if (bs[d] != 1) be += i * bstride;
      bstride *= bs[d];
    }
    y[e] = a[e] * b[be];
  }
  return Status::OK();
}

Status Scale(const KernelContext& c) {
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  for (size_t e = 0; e < y.size(); ++e) y[e] = x[e] * c.node.attrs.scalar;
  return Status::OK();
}

Status BiasAdd(const KernelContext& c) {  // inputs x, bias over the last dimension
  const Vec &x = c.in(0), &bias = c.in(1);
  Vec& y = c.out(0);
  const int64_t C = c.in_shape(0)[-1];
  for (size_t e = 0; e < y.size(); ++e) y[e] = x[e] + bias[e % C];
  return Status::OK();
}

Status BiasAddGrad(const KernelContext& c) {  // input dy
  const Vec& dy = c.in(0);
  Vec& db = c.out(0);
  const int64_t C = c.out_shape(0)[0];
  for (size_t e = 0; e < dy.size(); ++e) db[e % C] += dy[e];
  return Status::OK();
}

Status Dropout(const KernelContext& c) {  // outputs y, mask (kept elements scaled by 1 / (1 - rate))
  const Node& n = c.node;
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  Vec& mask = c.out(1);
  const double rate = n.attrs.scalar;
  for (size_t e = 0; e < y.size(); ++e) {
    mask[e] = DropoutUniform(n.attrs.seed, c.step, e) < rate ? 0.0 : 1.0 / (1.0 - rate);
    y[e] = x[e] * mask[e];
  }
  return Status::OK();
}

}  // namespace

void RegisterElementwiseOps(KernelTable& t) {
  t.SetAll({{OpKind::kAdd, Add}, {OpKind::kSub, Sub}, {OpKind::kMultiply, Multiply}, {OpKind::kScale, Scale},
            {OpKind::kBiasAdd, BiasAdd}, {OpKind::kBiasAddGrad, BiasAddGrad}, {OpKind::kDropout, Dropout}});
}

}  // namespace strata::backend::reference
