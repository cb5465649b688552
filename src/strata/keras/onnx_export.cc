// ONNX export: Strata's inference graph op by op into ONNX nodes (the mapping table is
// docs/formats/onnx.md), serialized with record/wire.h from onnx.proto's field numbers. This file
// is the exporter's core: the walk over the graph, the wire encoding, the table of translations
// by op kind and the list of kinds left out on purpose; each op family's translations are in
// onnx_ops_<family>.cc (onnx_exporter.h).
//
// Layout: Strata's images are NHWC and ONNX's convolutions and pools take NCHW, so every rank-4
// value lives in the ONNX graph as NCHW: the input is transposed once after it comes in, rank-4
// weights and constants are stored permuted, axes of Concat, Slice and reductions are mapped,
// and a Reshape (Keras's flatten order is H, W, C) transposes back to NHWC first. The graph is
// traced at batch 1 and the batch stays symbolic: Reshape keeps dimension 0 (shape entry 0),
// uniform constants of batch 1 broadcast over it.
#include "strata/keras/onnx_export.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "strata/core/file.h"
#include "strata/keras/onnx_exporter.h"
#include "strata/record/wire.h"

namespace strata::keras {
namespace onnx {
namespace {

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

std::string ModelProto(const std::string& graph_proto, const std::string& producer_version) {
  std::string opset;
  wire::AppendBytesField(&opset, kOpsetDomain, "");
  Varint(&opset, kOpsetVersion, kOpset);
  std::string m;
  Varint(&m, kModelIrVersion, kIrVersion);
  wire::AppendBytesField(&m, kModelProducerName, "strata");
  if (!producer_version.empty()) wire::AppendBytesField(&m, kModelProducerVersion, producer_version);
  wire::AppendBytesField(&m, kModelGraph, graph_proto);
  wire::AppendBytesField(&m, kModelOpsetImport, opset);
  return m;
}

// The Keras layer a graph node belongs to: its name up to the first '/'.
std::string LayerOf(const std::string& node_name) { return node_name.substr(0, node_name.find('/')); }

// Variables and constants become initializers where they are used (in the layout of the use);
// Run maps the one input before the walk.
Status Leaf(Exporter&, const Node&) { return Status::OK(); }
Status SecondInput(Exporter&, const Node& n) { return Internal("ONNX export: a second input " + n.name); }

void RegisterLeafOnnx(OnnxTable& t) {
  t.Set(OpKind::kInput, SecondInput);
  t.Set(OpKind::kVariable, Leaf);
  t.Set(OpKind::kConstant, Leaf);
}

// The kinds with no translation on purpose: none of them is in the graph predict() compiles.
struct TrainingOnly {
  OpKind kind;
  const char* why;
};
constexpr char kGradient[] = "a gradient, emitted by autodiff for training";
constexpr char kLoss[] = "a loss, computed after the model's output in training";
constexpr TrainingOnly kTrainingOnly[] = {
    {OpKind::kBatchNorm, "batch norm on the batch's own statistics (training); inference has BatchNormInference"},
    {OpKind::kDropout, "dropout, which the inference graph leaves out"},
    {OpKind::kSoftmaxCrossEntropy, kLoss},
    {OpKind::kMeanSquaredError, kLoss},
    {OpKind::kConv2DBackpropInput, kGradient},
    {OpKind::kConv2DBackpropFilter, kGradient},
    {OpKind::kBiasAddGrad, kGradient},
    {OpKind::kBatchNormGrad, kGradient},
    {OpKind::kLayerNormGrad, kGradient},
    {OpKind::kActivationGrad, kGradient},
    {OpKind::kSoftmaxGrad, kGradient},
    {OpKind::kMaxPoolGrad, kGradient},
    {OpKind::kAvgPoolGrad, kGradient},
    {OpKind::kSoftmaxCrossEntropyGrad, kGradient},
    {OpKind::kMeanSquaredErrorGrad, kGradient},
    {OpKind::kGatherGrad, kGradient},
};

}  // namespace

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

int ToNchwAxis(int axis) {
  static constexpr int kMap[4] = {0, 2, 3, 1};
  return kMap[axis];
}
std::vector<int64_t> ToNchwDims(const Shape& s) { return {s[0], s[3], s[1], s[2]}; }

Exporter::Exporter(const graph::Graph& g, const backend::VariableStore& store)
    : g_(g), store_(store), names_(g.num_nodes()) {}

std::string Exporter::Graph(const std::string& name) const {
  std::string s;
  s += nodes_;
  wire::AppendBytesField(&s, kGraphName, name);
  s += initializers_;
  s += io_;
  return s;
}

Status Exporter::Unsupported(const Node& n, const std::string& why) const {
  return InvalidArgument("ONNX export: layer '" + LayerOf(n.name) + "' (" + graph::OpKindName(n.kind) + " node '" +
                         n.name + "') cannot be expressed in ONNX opset " + std::to_string(kOpset) + ": " + why);
}

std::string Exporter::Fresh(const std::string& base) {
  std::string n = base.empty() ? "t" : base;
  for (int k = 1; !used_.insert(n).second; ++k) n = base + "_" + std::to_string(k);
  return n;
}

void Exporter::Emit(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                    const std::string& name, const std::vector<Attr>& attrs) {
  std::string n;
  for (const auto& i : in) wire::AppendBytesField(&n, kNodeInput, i);
  for (const auto& o : out) wire::AppendBytesField(&n, kNodeOutput, o);
  wire::AppendBytesField(&n, kNodeName, Fresh(name + "/" + op));
  wire::AppendBytesField(&n, kNodeOpType, op);
  for (const auto& a : attrs) wire::AppendBytesField(&n, kNodeAttribute, a.bytes);
  wire::AppendBytesField(&nodes_, kGraphNode, n);
}

std::string Exporter::Op(const std::string& op, const std::vector<std::string>& in, const std::string& name,
                         const std::vector<Attr>& attrs) {
  std::string out = Fresh(name);
  Emit(op, in, {out}, name, attrs);
  return out;
}

std::string Exporter::FloatInit(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<float>& data) {
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

std::string Exporter::Int64Init(const std::string& name, const std::vector<int64_t>& data) {
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

Value Exporter::Through(Value v) const {
  while (true) {
    const Node& n = g_.node(v.node);
    if (n.kind != OpKind::kCast && n.kind != OpKind::kIdentity) return v;
    v = n.inputs[0];
  }
}

std::string Exporter::BatchedShape(const std::string& name, const std::vector<int64_t>& rest) {
  if (batch_.empty()) {
    const std::string shape = Op("Shape", {"input"}, "input_shape");
    batch_ = Op("Slice", {shape, Int64Init("batch/start", {0}), Int64Init("batch/end", {1})}, "batch");
  }
  return Op("Concat", {batch_, Int64Init(name + "/rest", rest)}, name, {AttrInt("axis", 0)});
}

bool Exporter::IsLeaf(Value v) const {
  const OpKind k = NodeThrough(v).kind;
  return k == OpKind::kVariable || k == OpKind::kConstant;
}

Result<std::vector<float>> Exporter::LeafValues(Value v) const {
  v = Through(v);
  const Node& n = g_.node(v.node);
  const int64_t count = n.out_shapes[0].num_elements();
  if (n.kind == OpKind::kConstant) {
    std::vector<float> values(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) values[e] = graph::ConstantAt(n, e);
    return values;
  }
  auto t = store_.Value(n.name);
  if (!t.ok()) return t.status();
  Tensor c = t->Contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + count);
}

Result<std::string> Exporter::Operand(Value v) {
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

Result<std::string> Exporter::ChannelVector(const Node& n, int k) {
  const Value v = n.inputs[k];
  if (n.out_shapes[0].rank() != 4) return Operand(v);
  const int64_t c = v.shape()[0];
  if (IsLeaf(v)) {
    STRATA_ASSIGN_OR_RETURN(std::vector<float> values, LeafValues(v));
    return FloatInit(NodeThrough(v).name, {c, 1, 1}, values);
  }
  STRATA_ASSIGN_OR_RETURN(std::string flat, Operand(v));
  return Op("Reshape", {flat, Int64Init(n.name + "/bias_shape", {c, 1, 1})}, n.name + "/bias");
}

void Exporter::Set(const Node& n, std::string name) {
  auto& slot = names_[&n - &g_.node(0)];
  slot.assign(n.out_shapes.size(), "");
  slot[0] = std::move(name);
}

std::string Exporter::ToNhwc(const std::string& t, const std::string& name) {
  return Op("Transpose", {t}, name + "/to_nhwc", {AttrInts("perm", {0, 2, 3, 1})});
}
std::string Exporter::ToNchw(const std::string& t, const std::string& name) {
  return Op("Transpose", {t}, name + "/to_nchw", {AttrInts("perm", {0, 3, 1, 2})});
}

Status Exporter::Translate(int i) {
  const Node& n = g_.node(i);
  const OnnxTranslation* translate = OnnxTranslations().Find(n.kind);
  if (translate == nullptr)  // training-only or forgotten alike (OnnxSupportOf tells which): the user needs the layer
    return Unsupported(n, "no ONNX mapping (an inference graph has no training or gradient ops)");
  return (*translate)(*this, n);
}

Status Exporter::Run(Value input, Value output, bool add_softmax) {
  const Shape& is = input.shape();
  wire::AppendBytesField(&io_, kGraphInput, BatchedValueInfo("input", is));
  used_.insert("input");
  used_.insert("probabilities");
  Set(g_.node(input.node), is.rank() == 4 ? ToNchw("input", "input") : "input");
  // Only what the output needs, in graph order (a topological order).
  std::vector<bool> needed(g_.num_nodes(), false);
  needed[Through(output).node] = true;
  for (int i = g_.num_nodes() - 1; i >= 0; --i) {
    if (!needed[i]) continue;
    for (Value v : g_.node(i).inputs) needed[v.node] = true;
  }
  batched_.assign(static_cast<size_t>(g_.num_nodes()), false);
  batched_[static_cast<size_t>(input.node)] = true;
  built_batch_ = std::max<int64_t>(is.rank() > 0 ? is[0] : 1, 1);
  for (int i = 0; i < g_.num_nodes(); ++i)
    for (Value v : g_.node(i).inputs) batched_[static_cast<size_t>(i)] = batched_[static_cast<size_t>(i)] || Batched(v);
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

const OnnxTable& OnnxTranslations() {
  static const OnnxTable table = [] {
    OnnxTable t("ONNX exporter's op table");
    RegisterLeafOnnx(t);
    RegisterConvOnnx(t);
    RegisterMatMulOnnx(t);
    RegisterNormOnnx(t);
    RegisterPoolOnnx(t);
    RegisterActivationOnnx(t);
    RegisterElementwiseOnnx(t);
    RegisterReduceOnnx(t);
    RegisterShapeOnnx(t);
    return t;
  }();
  return table;
}

}  // namespace onnx

OnnxSupport OnnxSupportOf(graph::OpKind kind, const char** why) {
  if (why != nullptr) *why = nullptr;
  if (onnx::OnnxTranslations().Find(kind) != nullptr) return OnnxSupport::kTranslated;
  for (const auto& t : onnx::kTrainingOnly) {
    if (t.kind != kind) continue;
    if (why != nullptr) *why = t.why;
    return OnnxSupport::kTrainingOnly;
  }
  return OnnxSupport::kMissing;
}

Result<std::string> ExportOnnx(const Model& model, const OnnxExportOptions& options) {
  const backend::VariableStore* store = model.variables();
  if (store == nullptr)
    return InvalidArgument("ONNX export of " + model.name() + ": compile the model (and load its weights) first");
  graph::Graph g;
  std::vector<graph::Value> inputs, outputs;
  STRATA_RETURN_IF_ERROR(model.BuildInferenceGraph(g, /*batch=*/1, &inputs, &outputs));
  if (inputs.size() != 1 || outputs.empty())
    return InvalidArgument("ONNX export of " + model.name() + ": only models of one input are exported, this one has " +
                           std::to_string(inputs.size()));
  onnx::Exporter e(g, *store);
  STRATA_RETURN_IF_ERROR(e.Run(inputs[0], outputs[0], !model.ends_in_softmax()));
  return onnx::ModelProto(e.Graph(model.name()), options.producer_version);
}

Status SaveOnnx(const Model& model, const std::string& path, const OnnxExportOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ExportOnnx(model, options));
  return WriteFileAtomic(path, bytes);
}

}  // namespace strata::keras
