// ONNX translation of the matmul family: MatMul ([N, K] x [K, M], Dense's product).
#include <string>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

Status MatMul(Exporter& e, const Node& n) {
  if (n.inputs[0].shape().rank() != 2) return e.Unsupported(n, "only [N, K] x [K, M] products are mapped");
  STRATA_ASSIGN_OR_RETURN(std::string a, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string b, e.Operand(n.inputs[1]));
  if (n.attrs.transpose_a) a = e.Op("Transpose", {a}, n.name + "/a_t", {AttrInts("perm", {1, 0})});
  if (n.attrs.transpose_b) b = e.Op("Transpose", {b}, n.name + "/b_t", {AttrInts("perm", {1, 0})});
  e.Set(n, e.Op("MatMul", {a, b}, n.name));
  return Status::OK();
}

}  // namespace

void RegisterMatMulOnnx(OnnxTable& t) { t.Set(OpKind::kMatMul, MatMul); }

}  // namespace strata::keras::onnx
