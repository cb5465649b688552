// ONNX translation of the norm family: BatchNormInference, kept as BatchNormalization on the
// moving statistics (not folded into the convolution). Training batch norm is never exported
// (onnx_export.cc's training-only list).
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

using graph::Node;
using graph::OpKind;

Status BatchNormInference(Exporter& e, const Node& n) {
  const int rank = n.out_shapes[0].rank();
  if (rank != 4 && rank != 2) return e.Unsupported(n, "batch norm is mapped for [N, C] and [N, H, W, C]");
  std::vector<std::string> args;  // x, scale, B, mean, var: Strata's inputs in ONNX's order
  for (int k = 0; k < 5; ++k) {
    STRATA_ASSIGN_OR_RETURN(std::string t, e.Operand(n.inputs[k]));
    args.push_back(t);
  }
  e.Set(n, e.Op("BatchNormalization", args, n.name, {AttrFloat("epsilon", n.attrs.bn.epsilon)}));
  return Status::OK();
}

}  // namespace

void RegisterNormOnnx(OnnxTable& t) { t.Set(OpKind::kBatchNormInference, BatchNormInference); }

}  // namespace strata::keras::onnx
