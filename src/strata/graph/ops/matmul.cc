// The matrix-multiply family: MatMul (one matrix product or a batch of them), whose gradient is
// two more MatMuls of the same kind.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

Result<Value> Graph::MatMul(Value a, Value b, bool ta, bool tb, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kMatMul, name_in, {a, b}, kFloatInput));
  STRATA_RETURN_IF_ERROR(CheckSameDType(op.label, a, b));
  const int rank = a.shape().rank();
  if (rank < 2 || b.shape().rank() != rank)
    return InvalidArgument(op.label + "expected matrices, or batches of them of one rank, found " + S(a.shape()) +
                           " and " + S(b.shape()));
  for (int d = 0; d < rank - 2; ++d)
    if (a.shape()[d] != b.shape()[d])
      return InvalidArgument(op.label + "batch dimensions differ: " + S(a.shape()) + " and " + S(b.shape()));
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const int64_t m = ta ? as[-1] : as[-2];
  const int64_t ka = ta ? as[-2] : as[-1];
  const int64_t kb = tb ? bs[-1] : bs[-2];
  const int64_t nn = tb ? bs[-2] : bs[-1];
  if (ka != kb)
    return InvalidArgument(op.label + "inner dimensions differ: input " + S(a.shape()) + " has " + std::to_string(ka) +
                           ", kernel " + S(b.shape()) + " expects " + std::to_string(kb));
  std::vector<int64_t> out(as.dims().begin(), as.dims().end() - 2);
  out.push_back(m);
  out.push_back(nn);
  Node n{OpKind::kMatMul, op.name, {a, b}, {Shape(out)}, {a.dtype()}, {}, false};
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
  const int64_t k = n.attrs.transpose_a ? a[-2] : a[-1];
  return 2 * n.out_shapes[0].num_elements() * k;
}

}  // namespace

void RegisterMatMulOps(OpTable& t) {
  Register(t, {.kind = OpKind::kMatMul, .name = "MatMul", .family = "matmul", .gradient = MatMulGradient,
               .matrix_flops = MatMulFlops, .other_flops = NoFlops});
}

}  // namespace ops
}  // namespace strata::graph
