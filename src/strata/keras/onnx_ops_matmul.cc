// ONNX translation of the matmul family: MatMul ([N, K] x [K, M], Dense's product, and batches
// of matrices, attention's).
#include <string>
#include <utility>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

// A rank-4 value lives in ONNX as NCHW (the exporter's convention for images): a batch of
// matrices [B, H, T, K] is brought to its own axis order first and back after.
Status MatMul(Exporter& e, const Node& n) {
  const int rank = n.inputs[0].shape().rank();
  STRATA_ASSIGN_OR_RETURN(std::string a, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string b, e.Operand(n.inputs[1]));
  if (rank == 4) {
    a = e.ToNhwc(a, n.name + "/a");
    b = e.ToNhwc(b, n.name + "/b");
  }
  std::vector<int64_t> swap_last(rank);
  for (int d = 0; d < rank; ++d) swap_last[d] = d;
  std::swap(swap_last[rank - 2], swap_last[rank - 1]);
  if (n.attrs.transpose_a) a = e.Op("Transpose", {a}, n.name + "/a_t", {AttrInts("perm", swap_last)});
  if (n.attrs.transpose_b) b = e.Op("Transpose", {b}, n.name + "/b_t", {AttrInts("perm", swap_last)});
  std::string y = e.Op("MatMul", {a, b}, n.name + (rank == 4 ? "/product" : ""));
  e.Set(n, rank == 4 ? e.ToNchw(y, n.name) : y);
  return Status::OK();
}

}  // namespace

void RegisterMatMulOnnx(OnnxTable& t) { t.Set(OpKind::kMatMul, MatMul); }

}  // namespace strata::keras::onnx
