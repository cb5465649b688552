#include "strata/graph/op_registry.h"

#include <cstdio>
#include <cstdlib>

#include "strata/graph/ops/ops.h"

namespace strata::graph {
namespace ops {

int64_t NoFlops(const Node&) { return 0; }
int64_t PerOutputElement(const Node& n) { return n.out_shapes.empty() ? 0 : n.out_shapes[0].num_elements(); }
int64_t PerInputElement(const Node& n) { return n.inputs[0].shape().num_elements(); }

}  // namespace ops

// The kind's number only: naming it would ask the table being built.
void DuplicateOpEntry(OpKind kind, const char* table) {
  std::fprintf(stderr, "strata: op kind %d registered twice in the %s\n", static_cast<int>(kind), table);
  std::abort();
}

const OpDef& Op(OpKind kind) {
  static const ops::OpTable table = [] {
    ops::OpTable t("graph's op registry");
    ops::RegisterLeafOps(t);
    ops::RegisterConvOps(t);
    ops::RegisterMatMulOps(t);
    ops::RegisterNormOps(t);
    ops::RegisterPoolOps(t);
    ops::RegisterActivationOps(t);
    ops::RegisterElementwiseOps(t);
    ops::RegisterReduceOps(t);
    ops::RegisterShapeOps(t);
    ops::RegisterLossOps(t);
    return t;
  }();
  static const OpDef kUnregistered{};
  const OpDef* op = table.Find(kind);
  return op ? *op : kUnregistered;
}

const char* OpKindName(OpKind kind) {
  const char* name = static_cast<int>(kind) < kNumOpKinds ? Op(kind).name : nullptr;
  return name ? name : "?";
}

int64_t Graph::MatrixFlops(int i) const { return Op(nodes_[i].kind).matrix_flops(nodes_[i]); }
int64_t Graph::OtherFlops(int i) const { return Op(nodes_[i].kind).other_flops(nodes_[i]); }

GradientContext::GradientContext(Graph& graph, int node_index, std::vector<Value> output_grads,
                                 const std::vector<bool>& needs, Sink& sink)
    : g(graph),
      node(node_index),
      n(graph.node(node_index)),
      dys(std::move(output_grads)),
      gname(n.name + "/grad"),
      label(OpLabel(n.name, n.kind)),
      needs_(needs),
      sink_(sink) {}

Attrs GradientContext::BackwardAttrs() const {
  Attrs a;
  a.forward_node = node;
  return a;
}

Value GradientContext::Emit(OpKind kind, const std::string& name, std::vector<Value> inputs, std::vector<Shape> shapes,
                            std::vector<DType> dtypes, Attrs attrs) {
  Node node_out{kind, name, std::move(inputs), std::move(shapes), std::move(dtypes), std::move(attrs), false};
  return g.AddNode(std::move(node_out));
}

}  // namespace strata::graph
