// Reference kernel of the matmul family: a 2-D MatMul with either operand transposed.
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
  const int64_t M = n.out_shapes[0][0], Nn = n.out_shapes[0][1], K = ta ? as[0] : as[1];
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < Nn; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += a[ta ? k * as[1] + m : m * as[1] + k] * b[tb ? j * bs[1] + k : k * bs[1] + j];
      y[m * Nn + j] = s;
    }
  return Status::OK();
}

}  // namespace

void RegisterMatMulOps(KernelTable& t) { t.Set(OpKind::kMatMul, MatMul); }

}  // namespace strata::backend::reference
