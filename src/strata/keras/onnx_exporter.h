// What the ONNX exporter's op families (onnx_ops_<family>.cc) share: the state of one export
// (Exporter: the graph, the ONNX nodes and initializers written so far, each graph value's ONNX
// tensor), the attribute encoders, and the table of translations by graph::OpKind that
// ExportOnnx looks each node up in. Defined in onnx_export.cc. Internal.
//
// Every rank-4 value lives in the ONNX graph as NCHW (onnx_export.cc's opening comment says why);
// a translation maps its axes with ToNchwAxis and transposes with ToNhwc / ToNchw where an op
// needs Keras's order.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/core/status.h"
#include "strata/graph/graph.h"
#include "strata/graph/op_registry.h"

namespace strata::keras::onnx {

// The graph's names the translations use throughout (onnx_export.cc, onnx_ops_<family>.cc).
using graph::Node;
using graph::OpKind;
using graph::Value;

struct Attr {
  std::string bytes;  // a serialized AttributeProto
};
Attr AttrInt(const std::string& name, int64_t v);
Attr AttrFloat(const std::string& name, float v);
Attr AttrInts(const std::string& name, const std::vector<int64_t>& v);

// NHWC axis -> NCHW axis.
int ToNchwAxis(int axis);
std::vector<int64_t> ToNchwDims(const Shape& s);

class Exporter {
 public:
  Exporter(const graph::Graph& g, const backend::VariableStore& store);

  // Translates the nodes `output` needs into ONNX nodes from graph input `input` on.
  Status Run(graph::Value input, graph::Value output, bool add_softmax);
  // The GraphProto written by Run.
  std::string Graph(const std::string& name) const;

  // The error of a node ONNX cannot express, naming its Keras layer.
  Status Unsupported(const graph::Node& n, const std::string& why) const;

  // One ONNX node; its name is made unique from `name` and `op`.
  void Emit(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
            const std::string& name, const std::vector<Attr>& attrs = {});
  // One node with one fresh output named after `name`; returns the output.
  std::string Op(const std::string& op, const std::vector<std::string>& in, const std::string& name,
                 const std::vector<Attr>& attrs = {});
  // Initializers under a fresh name made from `name`; each returns that name.
  std::string FloatInit(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& data);
  std::string Int64Init(const std::string& name, const std::vector<int64_t>& data);
  std::string Scalar(const std::string& name, float v) { return FloatInit(name, {}, {v}); }

  // Looks through the ops that change nothing in an f32 export: Cast (bf16 models export their
  // f32 math) and Identity.
  graph::Value Through(graph::Value v) const;
  // The node Through(v) ends at.
  const graph::Node& NodeThrough(graph::Value v) const { return g_.node(Through(v).node); }
  bool IsLeaf(graph::Value v) const;
  // A leaf's values, row-major in Strata's layout.
  Result<std::vector<float>> LeafValues(graph::Value v) const;
  // The ONNX tensor of a value (rank 4: NCHW). Leaves become initializers on first use.
  Result<std::string> Operand(graph::Value v);
  // Input k of node n, a [C] vector along the last axis of its output (a bias, a scale): as it
  // is, or [C, 1, 1] against a rank-4 output's NCHW.
  Result<std::string> ChannelVector(const graph::Node& n, int k);
  // Whether v is computed from the graph input, so carries its symbolic batch (N) in its first
  // axis, or from weights and constants alone.
  bool Batched(graph::Value v) const { return batched_[static_cast<size_t>(v.node)]; }
  // The graph input's batch as the graph was built (the file's N stands for any).
  int64_t built_batch() const { return built_batch_; }
  // An int64 ONNX shape [N, rest...]: the input's batch (Shape, Slice; made once), then `rest`.
  std::string BatchedShape(const std::string& name, const std::vector<int64_t>& rest);
  // Names `name` the ONNX tensor of node `n`'s (first) output.
  void Set(const graph::Node& n, std::string name);
  // A rank-4 NCHW tensor back to NHWC, or NHWC to NCHW.
  std::string ToNhwc(const std::string& t, const std::string& name);
  std::string ToNchw(const std::string& t, const std::string& name);

 private:
  std::string Fresh(const std::string& base);
  Status Translate(int i);

  const graph::Graph& g_;
  const backend::VariableStore& store_;
  std::vector<std::vector<std::string>> names_;  // per node, per output: its ONNX tensor
  std::vector<bool> batched_;                    // per node: computed from the graph input
  int64_t built_batch_ = 1;
  std::string batch_;                            // [N] (int64), once BatchedShape made it
  std::set<std::string> used_;
  std::string nodes_, initializers_, io_;
};

// Writes the ONNX nodes of graph node `n` and names its output (Exporter::Set). Leaves, Cast and
// Identity write nothing: a leaf becomes an initializer where it is used, in the layout of that
// use, and Exporter::Operand looks through the other two.
using OnnxTranslation = Status (*)(Exporter& e, const graph::Node& n);

using OnnxTable = graph::OpTable<OnnxTranslation>;

// Every family's translations. Built on first use by calling each Register*Onnx below once, from
// this function only: the library is a static archive, whose self-registering objects the linker
// would drop.
const OnnxTable& OnnxTranslations();

// Each family's translations (onnx_ops_<family>.cc; the leaves' in onnx_export.cc).
void RegisterConvOnnx(OnnxTable& t);
void RegisterMatMulOnnx(OnnxTable& t);
void RegisterNormOnnx(OnnxTable& t);
void RegisterPoolOnnx(OnnxTable& t);
void RegisterActivationOnnx(OnnxTable& t);
void RegisterElementwiseOnnx(OnnxTable& t);
void RegisterReduceOnnx(OnnxTable& t);
void RegisterShapeOnnx(OnnxTable& t);

}  // namespace strata::keras::onnx
