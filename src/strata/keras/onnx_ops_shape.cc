// ONNX translation of the shape family: Concat (ZeroPadding2D's concatenation with constants as
// a Pad), Slice, Transpose, Reshape (through NHWC: Keras's flatten order is H, W, C), and Cast and Identity,
// which write nothing: an f32 export has nothing to cast (a bf16 model exports its f32 math), and
// Exporter::Operand looks through both.
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

Status Concat(Exporter& e, const Node& n) {
  const int rank = n.out_shapes[0].rank();
  const int axis = rank == 4 ? ToNchwAxis(n.attrs.axis) : n.attrs.axis;
  // ZeroPad2D's composite: [constant, x, constant] along one axis is a Pad of x.
  std::vector<int> computed;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!e.IsLeaf(n.inputs[i])) computed.push_back(static_cast<int>(i));
  if (computed.size() == n.inputs.size()) {
    std::vector<std::string> in;
    for (Value v : n.inputs) {
      STRATA_ASSIGN_OR_RETURN(std::string t, e.Operand(v));
      in.push_back(t);
    }
    e.Set(n, e.Op("Concat", in, n.name, {AttrInt("axis", axis)}));
    return Status::OK();
  }
  if (computed.size() != 1 || n.inputs.size() > 3 || n.attrs.axis == 0)
    return e.Unsupported(n, "it concatenates constants with the batch");
  const int c = computed[0];
  const Value x = n.inputs[c];
  int64_t before = 0, after = 0;
  float fill = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (static_cast<int>(i) == c) continue;
    const Node& leaf = e.NodeThrough(n.inputs[i]);
    if (leaf.kind != OpKind::kConstant) return e.Unsupported(n, "it concatenates a weight with the batch");
    if (!leaf.attrs.var.values.empty()) return e.Unsupported(n, "it concatenates varying constants with the batch");
    if ((before || after) && leaf.attrs.scalar != fill) return e.Unsupported(n, "its padding constants differ");
    fill = leaf.attrs.scalar;
    (static_cast<int>(i) < c ? before : after) = n.inputs[i].shape()[n.attrs.axis];
  }
  std::vector<int64_t> pads(2 * rank, 0);
  pads[axis] = before;
  pads[rank + axis] = after;
  STRATA_ASSIGN_OR_RETURN(std::string xt, e.Operand(x));
  e.Set(n, e.Op("Pad", {xt, e.Int64Init(n.name + "/pads", pads), e.Scalar(n.name + "/value", fill)}, n.name, {}));
  return Status::OK();
}

Status Slice(Exporter& e, const Node& n) {
  if (n.attrs.axis == 0) return e.Unsupported(n, "it slices the batch");
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  const int axis = n.out_shapes[0].rank() == 4 ? ToNchwAxis(n.attrs.axis) : n.attrs.axis;
  e.Set(n, e.Op("Slice",
                {x, e.Int64Init(n.name + "/starts", {n.attrs.begin}), e.Int64Init(n.name + "/ends", {n.attrs.end}),
                 e.Int64Init(n.name + "/axes", {axis})},
                n.name));
  return Status::OK();
}

Status Reshape(Exporter& e, const Node& n) {
  const Shape& from = n.inputs[0].shape();
  const Shape& to = n.out_shapes[0];
  if (from.rank() == 0 || to.rank() == 0 || from[0] != to[0]) return e.Unsupported(n, "it reshapes the batch");
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  if (from.rank() == 4) x = e.ToNhwc(x, n.name);
  std::vector<int64_t> dims = to.dims();
  dims[0] = 0;  // ONNX: copy the (symbolic) batch
  std::string y = e.Op("Reshape", {x, e.Int64Init(n.name + "/shape", dims)}, n.name);
  if (to.rank() == 4) y = e.ToNchw(y, n.name);
  e.Set(n, y);
  return Status::OK();
}

// A rank-4 value is NCHW in ONNX: transposed to its own axis order, permuted, and back.
Status Transpose(Exporter& e, const Node& n) {
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  const bool image = n.out_shapes[0].rank() == 4;
  if (image) x = e.ToNhwc(x, n.name + "/in");
  std::vector<int64_t> perm(n.attrs.axes.begin(), n.attrs.axes.end());
  std::string y = e.Op("Transpose", {x}, n.name + (image ? "/permuted" : ""), {AttrInts("perm", perm)});
  e.Set(n, image ? e.ToNchw(y, n.name) : y);
  return Status::OK();
}

// An embedding's lookup: Gather along the table's rows, the ids as int64.
Status Gather(Exporter& e, const Node& n) {
  if (n.inputs[1].shape().rank() == 4 || n.out_shapes[0].rank() == 4)
    return e.Unsupported(n, "its ids or rows are rank 4 (an image's layout in the file)");
  STRATA_ASSIGN_OR_RETURN(std::string table, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string ids, e.Operand(n.inputs[1]));
  ids = e.Op("Cast", {ids}, n.name + "/ids", {AttrInt("to", 7)});  // TensorProto INT64
  e.Set(n, e.Op("Gather", {table, ids}, n.name, {AttrInt("axis", 0)}));
  return Status::OK();
}

Status LookedThrough(Exporter&, const Node&) { return Status::OK(); }

}  // namespace

void RegisterShapeOnnx(OnnxTable& t) {
  t.SetAll({{OpKind::kConcat, Concat}, {OpKind::kSlice, Slice}, {OpKind::kReshape, Reshape}, {OpKind::kTranspose, Transpose}, {OpKind::kGather, Gather},
            {OpKind::kCast, LookedThrough}, {OpKind::kIdentity, LookedThrough}});
}

}  // namespace strata::keras::onnx
