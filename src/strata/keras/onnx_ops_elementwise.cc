// ONNX translation of the elementwise family: Add, Sub, Multiply (ONNX broadcasts size-1
// dimensions as Strata's Multiply does), Scale and BiasAdd.
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

Status Binary(Exporter& e, const Node& n) {
  STRATA_ASSIGN_OR_RETURN(std::string a, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string b, e.Operand(n.inputs[1]));
  const char* op = n.kind == OpKind::kAdd ? "Add" : n.kind == OpKind::kSub ? "Sub" : "Mul";
  e.Set(n, e.Op(op, {a, b}, n.name));
  return Status::OK();
}

Status Scale(Exporter& e, const Node& n) {
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  e.Set(n, e.Op("Mul", {x, e.Scalar(n.name + "/factor", n.attrs.scalar)}, n.name));
  return Status::OK();
}

Status BiasAdd(Exporter& e, const Node& n) {
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string b, e.ChannelVector(n, 1));
  e.Set(n, e.Op("Add", {x, b}, n.name));
  return Status::OK();
}

}  // namespace

void RegisterElementwiseOnnx(OnnxTable& t) {
  t.SetAll({{OpKind::kAdd, Binary}, {OpKind::kSub, Binary}, {OpKind::kMultiply, Binary}, {OpKind::kScale, Scale},
            {OpKind::kBiasAdd, BiasAdd}});
}

}  // namespace strata::keras::onnx
