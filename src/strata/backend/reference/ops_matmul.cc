// Reference kernel of the matmul family: a 2-D MatMul, or a batch of them, with either operand
// transposed.
#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

Status MatMul(const KernelContext& c) {
  const Node& n = c.node;
  const Vec &a = c.in(0), &b = c.in(1);
  Vec& y = c.out(0);
  const Shape& as = c.in_shape(0);
  const Shape& bs = c.in_shape(1);
  const bool ta = n.attrs.transpose_a, tb = n.attrs.transpose_b;
  const Shape& ys = n.out_shapes[0];
  const int64_t batch = ys.num_elements() / (ys[-2] * ys[-1]);
  const int64_t M = ys[-2], Nn = ys[-1], K = ta ? as[-2] : as[-1];
  const int64_t ac = as[-1], bc = bs[-1];  // row lengths
  const int64_t a_size = as[-2] * ac, b_size = bs[-2] * bc;
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < Nn; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a[i * a_size + (ta ? k * ac + m : m * ac + k)] * b[i * b_size + (tb ? j * bc + k : k * bc + j)];
        y[(i * M + m) * Nn + j] = s;
      }
  return Status::OK();
}

}  // namespace

void RegisterMatMulOps(KernelTable& t) { t.Set(OpKind::kMatMul, MatMul); }

}  // namespace strata::backend::reference
