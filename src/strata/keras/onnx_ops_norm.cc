// ONNX translation of the norm family: BatchNormInference, kept as BatchNormalization on the
// moving statistics (not folded into the convolution), and LayerNorm, decomposed (opset 13 has
// no LayerNormalization; it came in 17). Training batch norm is never exported (onnx_export.cc's
// training-only list).
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

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

// (x - mean) / sqrt(var + epsilon) * gamma + beta over the last axis: NCHW's C for rank 4.
Status LayerNorm(Exporter& e, const Node& n) {
  const std::string& name = n.name;
  const int rank = n.out_shapes[0].rank();
  const std::vector<int64_t> axis = {rank == 4 ? 1 : -1};
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string gamma, e.ChannelVector(n, 1));
  STRATA_ASSIGN_OR_RETURN(std::string beta, e.ChannelVector(n, 2));
  const std::vector<Attr> mean_over = {AttrInts("axes", axis), AttrInt("keepdims", 1)};
  std::string centered = e.Op("Sub", {x, e.Op("ReduceMean", {x}, name + "/mean", mean_over)}, name + "/centered");
  std::string var = e.Op("ReduceMean", {e.Op("Mul", {centered, centered}, name + "/square")}, name + "/variance",
                         mean_over);
  std::string stddev =
      e.Op("Sqrt", {e.Op("Add", {var, e.Scalar(name + "/epsilon", n.attrs.ln.epsilon)}, name + "/var_eps")},
           name + "/stddev");
  std::string normalized = e.Op("Div", {centered, stddev}, name + "/normalized");
  e.Set(n, e.Op("Add", {e.Op("Mul", {normalized, gamma}, name + "/scaled"), beta}, name));
  return Status::OK();
}

}  // namespace

void RegisterNormOnnx(OnnxTable& t) {
  t.SetAll({{OpKind::kBatchNormInference, BatchNormInference}, {OpKind::kLayerNorm, LayerNorm}});
}

}  // namespace strata::keras::onnx
