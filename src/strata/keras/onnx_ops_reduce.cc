// ONNX translation of the reduce family: ReduceSum, ReduceMean, and Broadcast (their gradient's
// op, which inference graphs use too: Unsqueeze + Expand). The reductions may not touch the
// batch, which stays symbolic.
#include <algorithm>
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

Status Reduce(Exporter& e, const Node& n) {
  const Shape& in = n.inputs[0].shape();
  const int out_rank = n.out_shapes[0].rank();
  std::vector<int64_t> axes;
  for (int a : n.attrs.axes) axes.push_back(a < 0 ? a + in.rank() : a);
  if (axes.empty())
    for (int a = 0; a < in.rank(); ++a) axes.push_back(a);
  for (int64_t a : axes)
    if (a == 0) return e.Unsupported(n, "it reduces over the batch");
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  const bool keep = out_rank == in.rank();
  if (in.rank() == 4 && keep) {
    for (auto& a : axes) a = ToNchwAxis(static_cast<int>(a));
  } else if (in.rank() == 4) {
    x = e.ToNhwc(x, n.name);  // the kept axes in Keras's order
  }
  const std::string name = n.name;
  // ReduceSum takes its axes as an input from opset 13 on; ReduceMean still as an attribute.
  std::string y = n.kind == OpKind::kReduceMean
                      ? e.Op("ReduceMean", {x}, name, {AttrInts("axes", axes), AttrInt("keepdims", keep)})
                      : e.Op("ReduceSum", {x, e.Int64Init(name + "/axes", axes)}, name, {AttrInt("keepdims", keep)});
  if (in.rank() == 4 && !keep && out_rank == 4) y = e.ToNchw(y, name);
  e.Set(n, y);
  return Status::OK();
}

// Along the batch (a weight given to every image: ViT's class token and position embedding),
// Expand takes the input's own batch (Exporter::BatchedShape).
Status Broadcast(Exporter& e, const Node& n) {
  const Shape& out = n.out_shapes[0];
  std::vector<int64_t> axes(n.attrs.axes.begin(), n.attrs.axes.end());
  const bool along_batch = std::find(axes.begin(), axes.end(), 0) != axes.end();
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  if (n.inputs[0].shape().rank() == 4) x = e.ToNhwc(x, n.name);
  std::string y = e.Op("Unsqueeze", {x, e.Int64Init(n.name + "/axes", axes)}, n.name + "/unsqueeze");
  std::vector<int64_t> dims = out.dims();
  if (out.rank() == 4) {
    y = e.ToNchw(y, n.name);
    dims = ToNchwDims(out);
  }
  dims[0] = 1;  // the batch: whatever the input has
  const std::string shape = along_batch ? e.BatchedShape(n.name + "/shape", std::vector<int64_t>(dims.begin() + 1, dims.end()))
                                        : e.Int64Init(n.name + "/shape", dims);
  e.Set(n, e.Op("Expand", {y, shape}, n.name));
  return Status::OK();
}

}  // namespace

void RegisterReduceOnnx(OnnxTable& t) {
  t.SetAll({{OpKind::kReduceSum, Reduce}, {OpKind::kReduceMean, Reduce}, {OpKind::kBroadcast, Broadcast}});
}

}  // namespace strata::keras::onnx
