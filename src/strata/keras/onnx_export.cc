// ONNX export: Strata's inference graph op by op into ONNX nodes (the mapping table is
// docs/formats/onnx.md), serialized with record/wire.h from onnx.proto's field numbers.
//
// Layout: Strata's images are NHWC and ONNX's convolutions and pools take NCHW, so every rank-4
// value lives in the ONNX graph as NCHW: the input is transposed once after it comes in, rank-4
// weights and constants are stored permuted, axes of Concat, Slice and reductions are mapped,
// and a Reshape (Keras's flatten order is H, W, C) transposes back to NHWC first. The graph is
// traced at batch 1 and the batch stays symbolic: Reshape keeps dimension 0 (shape entry 0),
// uniform constants of batch 1 broadcast over it.
#include "strata/keras/onnx_export.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/core/file.h"
#include "strata/graph/graph.h"
#include "strata/record/wire.h"

namespace strata::keras {
namespace {

using graph::Activation;
using graph::Node;
using graph::OpKind;
using graph::Value;
namespace wire = record::wire;

constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;  // the IR of opset 13 (onnx 1.8)

// onnx.proto's numbers.
enum : uint32_t {
  kModelIrVersion = 1, kModelProducerName = 2, kModelProducerVersion = 3, kModelGraph = 7, kModelOpsetImport = 8,
  kOpsetDomain = 1, kOpsetVersion = 2,
  kGraphNode = 1, kGraphName = 2, kGraphInitializer = 5, kGraphInput = 11, kGraphOutput = 12,
  kNodeInput = 1, kNodeOutput = 2, kNodeName = 3, kNodeOpType = 4, kNodeAttribute = 5,
  kAttrName = 1, kAttrF = 2, kAttrI = 3, kAttrInts = 8, kAttrType = 20,
  kTensorDims = 1, kTensorDataType = 2, kTensorName = 8, kTensorRawData = 9,
  kValueInfoName = 1, kValueInfoType = 2,
  kTypeTensorType = 1, kTypeTensorElemType = 1, kTypeTensorShape = 2,
  kShapeDim = 1, kDimValue = 1, kDimParam = 2,
};
enum : int64_t { kAttrTypeFloat = 1, kAttrTypeInt = 2, kAttrTypeInts = 7 };
enum : int64_t { kFloat = 1, kInt64 = 7 };  // TensorProto.DataType

void Varint(std::string* s, uint32_t field, uint64_t v) {
  wire::AppendTag(s, field, wire::kVarint);
  wire::AppendVarint(s, v);
}

struct Attr {
  std::string bytes;  // a serialized AttributeProto
};
Attr AttrInt(const std::string& name, int64_t v) {
  Attr a;
  wire::AppendBytesField(&a.bytes, kAttrName, name);
  Varint(&a.bytes, kAttrI, static_cast<uint64_t>(v));
  Varint(&a.bytes, kAttrType, kAttrTypeInt);
  return a;
}
Attr AttrFloat(const std::string& name, float v) {
  Attr a;
  wire::AppendBytesField(&a.bytes, kAttrName, name);
  wire::AppendTag(&a.bytes, kAttrF, wire::kFixed32);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  char le[4] = {static_cast<char>(bits), static_cast<char>(bits >> 8), static_cast<char>(bits >> 16),
                static_cast<char>(bits >> 24)};
  a.bytes.append(le, 4);
  Varint(&a.bytes, kAttrType, kAttrTypeFloat);
  return a;
}
Attr AttrInts(const std::string& name, const std::vector<int64_t>& v) {
  Attr a;
  wire::AppendBytesField(&a.bytes, kAttrName, name);
  for (int64_t x : v) Varint(&a.bytes, kAttrInts, static_cast<uint64_t>(x));
  Varint(&a.bytes, kAttrType, kAttrTypeInts);
  return a;
}

// ValueInfoProto of a float tensor whose dimension 0 is the symbolic batch "N".
std::string BatchedValueInfo(const std::string& name, const Shape& shape) {
  std::string dims;
  for (int i = 0; i < shape.rank(); ++i) {
    std::string d;
    if (i == 0) {
      wire::AppendBytesField(&d, kDimParam, "N");
    } else {
      Varint(&d, kDimValue, static_cast<uint64_t>(shape[i]));
    }
    wire::AppendBytesField(&dims, kShapeDim, d);
  }
  std::string tensor;
  Varint(&tensor, kTypeTensorElemType, kFloat);
  wire::AppendBytesField(&tensor, kTypeTensorShape, dims);
  std::string type;
  wire::AppendBytesField(&type, kTypeTensorType, tensor);
  std::string vi;
  wire::AppendBytesField(&vi, kValueInfoName, name);
  wire::AppendBytesField(&vi, kValueInfoType, type);
  return vi;
}

// NHWC axis -> NCHW axis.
int ToNchwAxis(int axis) {
  static constexpr int kMap[4] = {0, 2, 3, 1};
  return kMap[axis];
}
std::vector<int64_t> ToNchwDims(const Shape& s) { return {s[0], s[3], s[1], s[2]}; }

// The Keras layer a graph node belongs to: its name up to the first '/'.
std::string LayerOf(const std::string& node_name) { return node_name.substr(0, node_name.find('/')); }

class Exporter {
 public:
  Exporter(const graph::Graph& g, const backend::VariableStore& store) : g_(g), store_(store), names_(g.num_nodes()) {}

  Status Run(Value input, Value output, bool add_softmax);
  std::string Graph(const std::string& name) const {
    std::string s;
    s += nodes_;
    wire::AppendBytesField(&s, kGraphName, name);
    s += initializers_;
    s += io_;
    return s;
  }

 private:
  Status Unsupported(const Node& n, const std::string& why) const {
    return InvalidArgument("ONNX export: layer '" + LayerOf(n.name) + "' (" + graph::OpKindName(n.kind) + " node '" +
                           n.name + "') cannot be expressed in ONNX opset " + std::to_string(kOpset) + ": " + why);
  }
  std::string Fresh(const std::string& base) {
    std::string n = base.empty() ? "t" : base;
    for (int k = 1; !used_.insert(n).second; ++k) n = base + "_" + std::to_string(k);
    return n;
  }
  void Emit(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
            const std::string& name, const std::vector<Attr>& attrs = {}) {
    std::string n;
    for (const auto& i : in) wire::AppendBytesField(&n, kNodeInput, i);
    for (const auto& o : out) wire::AppendBytesField(&n, kNodeOutput, o);
    wire::AppendBytesField(&n, kNodeName, Fresh(name + "/" + op));
    wire::AppendBytesField(&n, kNodeOpType, op);
    for (const auto& a : attrs) wire::AppendBytesField(&n, kNodeAttribute, a.bytes);
    wire::AppendBytesField(&nodes_, kGraphNode, n);
  }
  // One node with one fresh output named after `name`; returns the output.
  std::string Op(const std::string& op, const std::vector<std::string>& in, const std::string& name,
                 const std::vector<Attr>& attrs = {}) {
    std::string out = Fresh(name);
    Emit(op, in, {out}, name, attrs);
    return out;
  }
  std::string FloatInit(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& data) {
    std::string t, out = Fresh(name);
    for (int64_t d : dims) Varint(&t, kTensorDims, static_cast<uint64_t>(d));
    Varint(&t, kTensorDataType, kFloat);
    wire::AppendBytesField(&t, kTensorName, out);
    std::string raw(data.size() * 4, '\0');  // little-endian, as raw_data is defined
    for (size_t i = 0; i < data.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, &data[i], 4);
      for (int k = 0; k < 4; ++k) raw[i * 4 + k] = static_cast<char>(b >> (8 * k));
    }
    wire::AppendBytesField(&t, kTensorRawData, raw);
    wire::AppendBytesField(&initializers_, kGraphInitializer, t);
    return out;
  }
  std::string Int64Init(const std::string& name, const std::vector<int64_t>& data) {
    std::string t, out = Fresh(name);
    Varint(&t, kTensorDims, data.size());
    Varint(&t, kTensorDataType, kInt64);
    wire::AppendBytesField(&t, kTensorName, out);
    std::string raw(data.size() * 8, '\0');
    for (size_t i = 0; i < data.size(); ++i)
      for (int k = 0; k < 8; ++k) raw[i * 8 + k] = static_cast<char>(static_cast<uint64_t>(data[i]) >> (8 * k));
    wire::AppendBytesField(&t, kTensorRawData, raw);
    wire::AppendBytesField(&initializers_, kGraphInitializer, t);
    return out;
  }
  std::string Scalar(const std::string& name, float v) { return FloatInit(name, {}, {v}); }

  // Looks through the ops that change nothing in an f32 export: Cast (bf16 models export their
  // f32 math) and Identity.
  Value Through(Value v) const {
    while (true) {
      const Node& n = g_.node(v.node);
      if (n.kind != OpKind::kCast && n.kind != OpKind::kIdentity) return v;
      v = n.inputs[0];
    }
  }
  bool IsLeaf(Value v) const {
    const OpKind k = g_.node(Through(v).node).kind;
    return k == OpKind::kVariable || k == OpKind::kConstant;
  }
  // A leaf's values, row-major in Strata's layout.
  Result<std::vector<float>> LeafValues(Value v) const {
    v = Through(v);
    const Node& n = g_.node(v.node);
    const int64_t count = n.out_shapes[0].num_elements();
    if (n.kind == OpKind::kConstant) return std::vector<float>(static_cast<size_t>(count), n.attrs.scalar);
    auto t = store_.Value(n.name);
    if (!t.ok()) return t.status();
    Tensor c = t->Contiguous();
    const float* p = c.data<float>();
    return std::vector<float>(p, p + count);
  }
  // The ONNX tensor of a value (rank 4: NCHW). Leaves become initializers on first use.
  Result<std::string> Operand(Value v) {
    v = Through(v);
    auto& slot = names_[v.node];
    if (!slot.empty() && !slot[v.output].empty()) return slot[v.output];
    const Node& n = g_.node(v.node);
    if (n.kind != OpKind::kVariable && n.kind != OpKind::kConstant)
      return Internal("ONNX export: " + n.name + " used before it was translated");
    STRATA_ASSIGN_OR_RETURN(std::vector<float> data, LeafValues(v));
    const Shape& s = n.out_shapes[0];
    std::vector<int64_t> dims = s.dims();
    if (s.rank() == 4) {  // NHWC -> NCHW
      std::vector<float> p(data.size());
      const int64_t N = s[0], H = s[1], W = s[2], C = s[3];
      for (int64_t b = 0; b < N; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            for (int64_t c = 0; c < C; ++c) p[((b * C + c) * H + h) * W + w] = data[((b * H + h) * W + w) * C + c];
      data = std::move(p);
      dims = ToNchwDims(s);
    }
    slot.assign(n.out_shapes.size(), "");
    slot[0] = FloatInit(n.name, dims, data);
    return slot[0];
  }
  void Set(int node, std::string name) {
    names_[node].assign(g_.node(node).out_shapes.size(), "");
    names_[node][0] = std::move(name);
  }
  // A rank-4 NCHW tensor back to NHWC, or NHWC to NCHW.
  std::string ToNhwc(const std::string& t, const std::string& name) {
    return Op("Transpose", {t}, name + "/to_nhwc", {AttrInts("perm", {0, 2, 3, 1})});
  }
  std::string ToNchw(const std::string& t, const std::string& name) {
    return Op("Transpose", {t}, name + "/to_nchw", {AttrInts("perm", {0, 3, 1, 2})});
  }

  Status Translate(int i);
  Status Conv(const Node& n);
  Status Pool(const Node& n);
  Status Concat(const Node& n);
  Status Reduce(const Node& n);
  Status Broadcast(const Node& n);
  Result<std::string> ActivationOf(Activation a, const std::string& x, const std::string& name);

  const graph::Graph& g_;
  const backend::VariableStore& store_;
  std::vector<std::vector<std::string>> names_;  // per node, per output: its ONNX tensor
  std::set<std::string> used_;
  std::string nodes_, initializers_, io_;
};

Result<std::string> Exporter::ActivationOf(Activation a, const std::string& x, const std::string& name) {
  switch (a) {
    case Activation::kLinear: return Op("Identity", {x}, name);
    case Activation::kRelu: return Op("Relu", {x}, name);
    case Activation::kRelu6: return Op("Clip", {x, Scalar(name + "/min", 0), Scalar(name + "/max", 6)}, name);
    case Activation::kSigmoid: return Op("Sigmoid", {x}, name);
    case Activation::kTanh: return Op("Tanh", {x}, name);
    case Activation::kSwish: return Op("Mul", {x, Op("Sigmoid", {x}, name + "/sigmoid")}, name);
    case Activation::kGelu: {  // 0.5 x (1 + erf(x / sqrt 2)): the erf form oneDNN's gelu_erf computes
      std::string e = Op("Erf", {Op("Div", {x, Scalar(name + "/sqrt2", std::sqrt(2.0f))}, name + "/scaled")}, name + "/erf");
      std::string one_plus = Op("Add", {e, Scalar(name + "/one", 1)}, name + "/one_plus");
      return Op("Mul", {Op("Mul", {x, one_plus}, name + "/x_times"), Scalar(name + "/half", 0.5f)}, name);
    }
  }
  return InvalidArgument("ONNX export: unknown activation in " + name);
}

Status Exporter::Conv(const Node& n) {
  const Value xv = n.inputs[0], kv = n.inputs[1];
  if (!IsLeaf(kv)) return Unsupported(n, "its kernel is computed, not a weight");
  const Shape& xs = xv.shape();
  const Shape& ks = kv.shape();  // [KH, KW, C / groups, O]
  const auto& o = n.attrs.conv;
  STRATA_ASSIGN_OR_RETURN(std::string x, Operand(xv));
  STRATA_ASSIGN_OR_RETURN(std::vector<float> k, LeafValues(kv));
  const int64_t KH = ks[0], KW = ks[1], CG = ks[2], O = ks[3];
  std::vector<float> w(k.size());  // ONNX: [O, C / groups, KH, KW]
  for (int64_t h = 0; h < KH; ++h)
    for (int64_t ww = 0; ww < KW; ++ww)
      for (int64_t c = 0; c < CG; ++c)
        for (int64_t oo = 0; oo < O; ++oo) w[((oo * CG + c) * KH + h) * KW + ww] = k[((h * KW + ww) * CG + c) * O + oo];
  const std::string wname = FloatInit(g_.node(Through(kv).node).name, {O, CG, KH, KW}, w);
  const auto hd = graph::ComputeWindow(xs[1], KH, o.stride_h, o.dilation_h, o.padding);
  const auto wd = graph::ComputeWindow(xs[2], KW, o.stride_w, o.dilation_w, o.padding);
  Set(static_cast<int>(&n - &g_.node(0)), Op("Conv", {x, wname}, n.name,
                                            {AttrInts("kernel_shape", {KH, KW}), AttrInts("strides", {o.stride_h, o.stride_w}),
                                             AttrInts("dilations", {o.dilation_h, o.dilation_w}), AttrInt("group", o.groups),
                                             AttrInts("pads", {hd.pad_before, wd.pad_before, hd.pad_after, wd.pad_after})}));
  return Status::OK();
}

Status Exporter::Pool(const Node& n) {
  const Shape& xs = n.inputs[0].shape();
  const auto& o = n.attrs.pool;
  const int sh = o.stride_h > 0 ? o.stride_h : o.window_h, sw = o.stride_w > 0 ? o.stride_w : o.window_w;
  const bool max = n.kind == OpKind::kMaxPool;
  STRATA_ASSIGN_OR_RETURN(std::string x, Operand(n.inputs[0]));
  const auto hd = graph::ComputeWindow(xs[1], o.window_h, sh, 1, o.padding);
  const auto wd = graph::ComputeWindow(xs[2], o.window_w, sw, 1, o.padding);
  const int id = static_cast<int>(&n - &g_.node(0));
  if (o.window_h == xs[1] && o.window_w == xs[2] && hd.out == 1 && wd.out == 1 && hd.pad_before + hd.pad_after == 0 &&
      wd.pad_before + wd.pad_after == 0) {  // global pooling (GlobalAveragePooling2D's pool)
    Set(id, Op(max ? "GlobalMaxPool" : "GlobalAveragePool", {x}, n.name));
    return Status::OK();
  }
  std::vector<Attr> attrs = {AttrInts("kernel_shape", {o.window_h, o.window_w}), AttrInts("strides", {sh, sw}),
                             AttrInts("pads", {hd.pad_before, wd.pad_before, hd.pad_after, wd.pad_after})};
  if (!max) attrs.push_back(AttrInt("count_include_pad", 0));  // Strata and TF average the window's real cells
  Set(id, Op(max ? "MaxPool" : "AveragePool", {x}, n.name, attrs));
  return Status::OK();
}

Status Exporter::Concat(const Node& n) {
  const int rank = n.out_shapes[0].rank();
  const int axis = rank == 4 ? ToNchwAxis(n.attrs.axis) : n.attrs.axis;
  const int id = static_cast<int>(&n - &g_.node(0));
  // ZeroPad2D's composite: [constant, x, constant] along one axis is a Pad of x.
  std::vector<int> computed;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!IsLeaf(n.inputs[i])) computed.push_back(static_cast<int>(i));
  if (computed.size() == n.inputs.size()) {
    std::vector<std::string> in;
    for (Value v : n.inputs) {
      STRATA_ASSIGN_OR_RETURN(std::string t, Operand(v));
      in.push_back(t);
    }
    Set(id, Op("Concat", in, n.name, {AttrInt("axis", axis)}));
    return Status::OK();
  }
  if (computed.size() != 1 || n.inputs.size() > 3 || n.attrs.axis == 0)
    return Unsupported(n, "it concatenates constants with the batch");
  const int c = computed[0];
  const Value x = n.inputs[c];
  int64_t before = 0, after = 0;
  float fill = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (static_cast<int>(i) == c) continue;
    const Node& leaf = g_.node(Through(n.inputs[i]).node);
    if (leaf.kind != OpKind::kConstant) return Unsupported(n, "it concatenates a weight with the batch");
    if ((before || after) && leaf.attrs.scalar != fill) return Unsupported(n, "its padding constants differ");
    fill = leaf.attrs.scalar;
    (static_cast<int>(i) < c ? before : after) = n.inputs[i].shape()[n.attrs.axis];
  }
  std::vector<int64_t> pads(2 * rank, 0);
  pads[axis] = before;
  pads[rank + axis] = after;
  STRATA_ASSIGN_OR_RETURN(std::string xt, Operand(x));
  Set(id, Op("Pad", {xt, Int64Init(n.name + "/pads", pads), Scalar(n.name + "/value", fill)}, n.name,
             {}));
  return Status::OK();
}

Status Exporter::Reduce(const Node& n) {
  const Shape& in = n.inputs[0].shape();
  const int out_rank = n.out_shapes[0].rank();
  std::vector<int64_t> axes;
  for (int a : n.attrs.axes) axes.push_back(a < 0 ? a + in.rank() : a);
  if (axes.empty())
    for (int a = 0; a < in.rank(); ++a) axes.push_back(a);
  for (int64_t a : axes)
    if (a == 0) return Unsupported(n, "it reduces over the batch");
  STRATA_ASSIGN_OR_RETURN(std::string x, Operand(n.inputs[0]));
  const bool keep = out_rank == in.rank();
  if (in.rank() == 4 && keep) {
    for (auto& a : axes) a = ToNchwAxis(static_cast<int>(a));
  } else if (in.rank() == 4) {
    x = ToNhwc(x, n.name);  // the kept axes in Keras's order
  }
  const std::string name = n.name;
  std::string y = n.kind == OpKind::kReduceMean
                      ? Op("ReduceMean", {x}, name, {AttrInts("axes", axes), AttrInt("keepdims", keep)})
                      : Op("ReduceSum", {x, Int64Init(name + "/axes", axes)}, name, {AttrInt("keepdims", keep)});
  if (in.rank() == 4 && !keep && out_rank == 4) y = ToNchw(y, name);
  Set(static_cast<int>(&n - &g_.node(0)), y);
  return Status::OK();
}

Status Exporter::Broadcast(const Node& n) {
  const Shape& out = n.out_shapes[0];
  std::vector<int64_t> axes(n.attrs.axes.begin(), n.attrs.axes.end());
  for (int64_t a : axes)
    if (a == 0) return Unsupported(n, "it broadcasts along the batch");
  STRATA_ASSIGN_OR_RETURN(std::string x, Operand(n.inputs[0]));
  if (n.inputs[0].shape().rank() == 4) x = ToNhwc(x, n.name);
  std::string y = Op("Unsqueeze", {x, Int64Init(n.name + "/axes", axes)}, n.name + "/unsqueeze");
  std::vector<int64_t> dims = out.dims();
  if (out.rank() == 4) {
    y = ToNchw(y, n.name);
    dims = ToNchwDims(out);
  }
  dims[0] = 1;  // the batch: whatever the input has
  Set(static_cast<int>(&n - &g_.node(0)), Op("Expand", {y, Int64Init(n.name + "/shape", dims)}, n.name));
  return Status::OK();
}

Status Exporter::Translate(int i) {
  const Node& n = g_.node(i);
  auto in = [&](int k) { return Operand(n.inputs[k]); };
  const int rank = n.out_shapes.empty() ? 0 : n.out_shapes[0].rank();
  switch (n.kind) {
    case OpKind::kVariable:
    case OpKind::kConstant:
      return Status::OK();  // initializers, made where they are used (in the layout of the use)
    case OpKind::kInput:
      return Internal("ONNX export: a second input " + n.name);
    case OpKind::kCast:
    case OpKind::kIdentity:
      return Status::OK();  // looked through (Through)
    case OpKind::kConv2D:
      return Conv(n);
    case OpKind::kMatMul: {
      if (n.inputs[0].shape().rank() != 2) return Unsupported(n, "only [N, K] x [K, M] products are mapped");
      STRATA_ASSIGN_OR_RETURN(std::string a, in(0));
      STRATA_ASSIGN_OR_RETURN(std::string b, in(1));
      if (n.attrs.transpose_a) a = Op("Transpose", {a}, n.name + "/a_t", {AttrInts("perm", {1, 0})});
      if (n.attrs.transpose_b) b = Op("Transpose", {b}, n.name + "/b_t", {AttrInts("perm", {1, 0})});
      Set(i, Op("MatMul", {a, b}, n.name));
      return Status::OK();
    }
    case OpKind::kBiasAdd: {
      STRATA_ASSIGN_OR_RETURN(std::string x, in(0));
      std::string b;
      if (rank == 4) {  // bias [C] against NCHW: [C, 1, 1]
        const int64_t c = n.inputs[1].shape()[0];
        if (IsLeaf(n.inputs[1])) {
          STRATA_ASSIGN_OR_RETURN(std::vector<float> v, LeafValues(n.inputs[1]));
          b = FloatInit(g_.node(Through(n.inputs[1]).node).name, {c, 1, 1}, v);
        } else {
          STRATA_ASSIGN_OR_RETURN(std::string b1, in(1));
          b = Op("Reshape", {b1, Int64Init(n.name + "/bias_shape", {c, 1, 1})}, n.name + "/bias");
        }
      } else {
        STRATA_ASSIGN_OR_RETURN(b, in(1));
      }
      Set(i, Op("Add", {x, b}, n.name));
      return Status::OK();
    }
    case OpKind::kBatchNormInference: {
      if (rank != 4 && rank != 2) return Unsupported(n, "batch norm is mapped for [N, C] and [N, H, W, C]");
      std::vector<std::string> args;
      for (int k = 0; k < 5; ++k) {
        STRATA_ASSIGN_OR_RETURN(std::string t, in(k));
        args.push_back(t);
      }
      Set(i, Op("BatchNormalization", args, n.name, {AttrFloat("epsilon", n.attrs.bn.epsilon)}));
      return Status::OK();
    }
    case OpKind::kActivation: {
      STRATA_ASSIGN_OR_RETURN(std::string x, in(0));
      STRATA_ASSIGN_OR_RETURN(std::string y, ActivationOf(n.attrs.activation, x, n.name));
      Set(i, y);
      return Status::OK();
    }
    case OpKind::kSoftmax: {
      STRATA_ASSIGN_OR_RETURN(std::string x, in(0));
      Set(i, Op("Softmax", {x}, n.name, {AttrInt("axis", rank == 4 ? 1 : -1)}));
      return Status::OK();
    }
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return Pool(n);
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMultiply: {
      STRATA_ASSIGN_OR_RETURN(std::string a, in(0));
      STRATA_ASSIGN_OR_RETURN(std::string b, in(1));
      const char* op = n.kind == OpKind::kAdd ? "Add" : n.kind == OpKind::kSub ? "Sub" : "Mul";
      Set(i, Op(op, {a, b}, n.name));  // ONNX broadcasts size-1 dimensions as Strata's Multiply
      return Status::OK();
    }
    case OpKind::kScale: {
      STRATA_ASSIGN_OR_RETURN(std::string x, in(0));
      Set(i, Op("Mul", {x, Scalar(n.name + "/factor", n.attrs.scalar)}, n.name));
      return Status::OK();
    }
    case OpKind::kConcat:
      return Concat(n);
    case OpKind::kSlice: {
      if (n.attrs.axis == 0) return Unsupported(n, "it slices the batch");
      STRATA_ASSIGN_OR_RETURN(std::string x, in(0));
      const int axis = rank == 4 ? ToNchwAxis(n.attrs.axis) : n.attrs.axis;
      Set(i, Op("Slice", {x, Int64Init(n.name + "/starts", {n.attrs.begin}), Int64Init(n.name + "/ends", {n.attrs.end}),
                          Int64Init(n.name + "/axes", {axis})},
                n.name));
      return Status::OK();
    }
    case OpKind::kReshape: {
      const Shape& from = n.inputs[0].shape();
      const Shape& to = n.out_shapes[0];
      if (from.rank() == 0 || to.rank() == 0 || from[0] != to[0]) return Unsupported(n, "it reshapes the batch");
      STRATA_ASSIGN_OR_RETURN(std::string x, in(0));
      if (from.rank() == 4) x = ToNhwc(x, n.name);
      std::vector<int64_t> dims = to.dims();
      dims[0] = 0;  // ONNX: copy the (symbolic) batch
      std::string y = Op("Reshape", {x, Int64Init(n.name + "/shape", dims)}, n.name);
      if (to.rank() == 4) y = ToNchw(y, n.name);
      Set(i, y);
      return Status::OK();
    }
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
      return Reduce(n);
    case OpKind::kBroadcast:
      return Broadcast(n);
    default:
      return Unsupported(n, "no ONNX mapping (an inference graph has no training or gradient ops)");
  }
}

Status Exporter::Run(Value input, Value output, bool add_softmax) {
  const Shape& is = input.shape();
  wire::AppendBytesField(&io_, kGraphInput, BatchedValueInfo("input", is));
  used_.insert("input");
  used_.insert("probabilities");
  Set(input.node, is.rank() == 4 ? ToNchw("input", "input") : "input");
  // Only what the output needs, in graph order (a topological order).
  std::vector<bool> needed(g_.num_nodes(), false);
  needed[Through(output).node] = true;
  for (int i = g_.num_nodes() - 1; i >= 0; --i) {
    if (!needed[i]) continue;
    for (Value v : g_.node(i).inputs) needed[v.node] = true;
  }
  for (int i = 0; i < g_.num_nodes(); ++i) {
    if (!needed[i] || i == input.node) continue;
    STRATA_RETURN_IF_ERROR(Translate(i));
  }
  STRATA_ASSIGN_OR_RETURN(std::string y, Operand(output));
  const Shape& os = output.shape();
  if (os.rank() == 4) y = ToNhwc(y, "output");
  if (add_softmax) {
    Emit("Softmax", {y}, {"probabilities"}, "probabilities", {AttrInt("axis", -1)});
  } else {
    Emit("Identity", {y}, {"probabilities"}, "probabilities");
  }
  wire::AppendBytesField(&io_, kGraphOutput, BatchedValueInfo("probabilities", os));
  return Status::OK();
}

}  // namespace

Result<std::string> ExportOnnx(const Model& model, const OnnxExportOptions& options) {
  const backend::VariableStore* store = model.variables();
  if (store == nullptr) return InvalidArgument("ONNX export of " + model.name() + ": compile the model (and load its weights) first");
  graph::Graph g;
  std::vector<Value> inputs, outputs;
  STRATA_RETURN_IF_ERROR(model.BuildInferenceGraph(g, /*batch=*/1, &inputs, &outputs));
  if (inputs.size() != 1 || outputs.empty())
    return InvalidArgument("ONNX export of " + model.name() + ": only models of one input are exported, this one has " +
                           std::to_string(inputs.size()));
  Exporter e(g, *store);
  STRATA_RETURN_IF_ERROR(e.Run(inputs[0], outputs[0], !model.ends_in_softmax()));
  std::string opset;
  wire::AppendBytesField(&opset, kOpsetDomain, "");
  Varint(&opset, kOpsetVersion, kOpset);
  std::string m;
  Varint(&m, kModelIrVersion, kIrVersion);
  wire::AppendBytesField(&m, kModelProducerName, "strata");
  if (!options.producer_version.empty()) wire::AppendBytesField(&m, kModelProducerVersion, options.producer_version);
  wire::AppendBytesField(&m, kModelGraph, e.Graph(model.name()));
  wire::AppendBytesField(&m, kModelOpsetImport, opset);
  return m;
}

Status SaveOnnx(const Model& model, const std::string& path, const OnnxExportOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ExportOnnx(model, options));
  return WriteFileAtomic(path, bytes);
}

}  // namespace strata::keras
