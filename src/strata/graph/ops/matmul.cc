// The matrix-multiply family: MatMul, whose gradient is two more MatMuls.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

Result<Value> Graph::MatMul(Value a, Value b, bool ta, bool tb, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kMatMul, name_in, {a, b}, kFloatInput));
  STRATA_RETURN_IF_ERROR(CheckSameDType(op.label, a, b));
  if (a.shape().rank() != 2 || b.shape().rank() != 2)
    return InvalidArgument(op.label + "expected 2-D operands, found " + S(a.shape()) + " and " + S(b.shape()));
  const int64_t m = ta ? a.shape()[1] : a.shape()[0];
  const int64_t ka = ta ? a.shape()[0] : a.shape()[1];
  const int64_t kb = tb ? b.shape()[1] : b.shape()[0];
  const int64_t nn = tb ? b.shape()[0] : b.shape()[1];
  if (ka != kb)
    return InvalidArgument(op.label + "inner dimensions differ: input " + S(a.shape()) + " has " + std::to_string(ka) +
                           ", kernel " + S(b.shape()) + " expects " + std::to_string(kb));
  Node n{OpKind::kMatMul, op.name, {a, b}, {Shape{m, nn}}, {a.dtype()}, {}, false};
  n.attrs.transpose_a = ta;
  n.attrs.transpose_b = tb;
  return Finish(std::move(n));
}

namespace ops {
namespace {

// y = op(A) op(B): dA and dB are products of dy with the other operand, transposed to match.
Status MatMulGradient(GradientContext& c) {
  Graph& g = c.g;
  const Value A = c.in(0), B = c.in(1), dy = c.dy();
  const bool ta = c.n.attrs.transpose_a, tb = c.n.attrs.transpose_b;
  const std::string na = c.gname + "/a", nb = c.gname + "/b";
  if (c.need(0)) {
    STRATA_ASSIGN_OR_RETURN(Value da, !ta ? g.MatMul(dy, B, false, !tb, na) : g.MatMul(B, dy, tb, true, na));
    STRATA_RETURN_IF_ERROR(c.Accumulate(A, da));
  }
  if (c.need(1)) {
    STRATA_ASSIGN_OR_RETURN(Value db, !tb ? g.MatMul(A, dy, !ta, false, nb) : g.MatMul(dy, A, true, ta, nb));
    STRATA_RETURN_IF_ERROR(c.Accumulate(B, db));
  }
  return Status::OK();
}

int64_t MatMulFlops(const Node& n) {
  const Shape& a = n.inputs[0].shape();
  const int64_t k = n.attrs.transpose_a ? a[0] : a[1];
  return 2 * n.out_shapes[0].num_elements() * k;
}

}  // namespace

void RegisterMatMulOps(OpTable& t) {
  Register(t, {.kind = OpKind::kMatMul, .name = "MatMul", .family = "matmul", .gradient = MatMulGradient,
               .matrix_flops = MatMulFlops, .other_flops = NoFlops});
}

}  // namespace ops
}  // namespace strata::graph
