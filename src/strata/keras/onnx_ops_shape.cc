// ONNX translation of the shape family: Concat (ZeroPadding2D's concatenation with constants as
// a Pad; weights beside the batch expanded to it), Slice, Transpose, Reshape (through NHWC: Keras's flatten order is H, W, C), and Cast and Identity,
// which write nothing: an f32 export has nothing to cast (a bf16 model exports its f32 math), and
// Exporter::Operand looks through both.
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

// ZeroPadding2D's composite, [constant, x, constant] along one axis with one fill, is a Pad of x.
// Otherwise a Concat, where a value computed from weights alone beside batched values (ViT's
// class token: a weight of one row, as the graph was built for one image) is first given to
// every image of the file's batch (Expand to [N, ...]).
Status Concat(Exporter& e, const Node& n) {
  const int rank = n.out_shapes[0].rank();
  const int axis = rank == 4 ? ToNchwAxis(n.attrs.axis) : n.attrs.axis;
  std::vector<int> computed;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!e.IsLeaf(n.inputs[i])) computed.push_back(static_cast<int>(i));
  bool uniform_constants = computed.size() == 1 && n.inputs.size() <= 3 && n.attrs.axis != 0;
  for (size_t i = 0; i < n.inputs.size() && uniform_constants; ++i) {
    if (static_cast<int>(i) == computed[0]) continue;
    const Node& leaf = e.NodeThrough(n.inputs[i]);
    uniform_constants = leaf.kind == OpKind::kConstant && leaf.attrs.var.values.empty();
  }
  if (!uniform_constants) {
    bool any_batched = false;
    for (Value v : n.inputs) any_batched = any_batched || e.Batched(v);
    std::vector<std::string> in;
    for (Value v : n.inputs) {
      STRATA_ASSIGN_OR_RETURN(std::string t, e.Operand(v));
      if (any_batched && !e.Batched(v)) {
        if (n.attrs.axis == 0) return e.Unsupported(n, "it concatenates weights with the batch along the batch");
        if (v.shape()[0] != 1) return e.Unsupported(n, "it concatenates a weight of more than one row with the batch");
        const std::vector<int64_t> dims = rank == 4 ? ToNchwDims(v.shape()) : v.shape().dims();
        t = e.Op("Expand", {t, e.BatchedShape(n.name + "/per_image", {dims.begin() + 1, dims.end()})},
                 n.name + "/per_image");
      }
      in.push_back(t);
    }
    e.Set(n, e.Op("Concat", in, n.name, {AttrInt("axis", axis)}));
    return Status::OK();
  }
  const int c = computed[0];
  const Value x = n.inputs[c];
  int64_t before = 0, after = 0;
  float fill = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (static_cast<int>(i) == c) continue;
    const Node& leaf = e.NodeThrough(n.inputs[i]);
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

// A weight's reshape is static. A batched value's keeps the batch first: as it is (0: ONNX copies
// it) or merged with the axes after it or split from them, which are static ([B, T, d] -> [B T,
// d] -> [B, T, H, k]: attention's; -1: ONNX infers the product).
Status Reshape(Exporter& e, const Node& n) {
  const Shape& from = n.inputs[0].shape();
  const Shape& to = n.out_shapes[0];
  const bool batched = e.Batched(n.inputs[0]);
  const int64_t b = e.built_batch();
  if (batched && (from.rank() == 0 || to.rank() == 0 || from[0] % b != 0 || to[0] % b != 0))
    return e.Unsupported(n, "it moves the batch off the first axis");
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  if (from.rank() == 4) x = e.ToNhwc(x, n.name);
  std::vector<int64_t> dims = to.dims();
  if (batched) dims[0] = from[0] == to[0] ? 0 : -1;
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
