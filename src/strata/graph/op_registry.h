// The op registry: what the engine knows about each graph op, one entry per OpKind.
//
// An op belongs to one family, and each family has one file in each layer that handles ops:
//
//   graph/ops/<family>.cc              builder (shape and dtype rule), gradient rule, FLOP count
//   backend/reference/ops_<family>.cc  float64 reference evaluation (the oracle)
//   backend/cpu/ops_<family>.cc        lowering to the cpu backend's kernels (oneDNN or Strata's)
//   keras/onnx_ops_<family>.cc         ONNX translation (or, once, why the op is not exported)
//
// A layer cannot include a higher one, so the entries of one op are spread over those files,
// each registered by kind from one function per family (explicit calls, no static
// initialisers: a static library drops unreferenced objects). tests/graph/op_registry_test.cc
// walks every OpKind and fails where a layer lacks its entry, where an op has no gradient rule
// and is not listed as having none on purpose, or where an op has no case in
// tests/graph/op_cases.h (the gradient, backend and FLOP-count checks).
// docs/architecture.md, "Adding an op", is the recipe.
#pragma once
#pragma GCC visibility push(default)

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/graph/graph.h"

namespace strata::graph {

// The number of OpKinds (the enum is dense, from 0).
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kMeanSquaredErrorGrad) + 1;

// What a gradient rule sees of one forward node, from the loss down (graph/autodiff.cc).
class GradientContext {
 public:
  // How the rule hands a gradient back to autodiff: added to what input `v` already has.
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual Status Accumulate(Value v, Value d) = 0;
  };

  // `needs` (indexed by node) must outlive the context.
  GradientContext(Graph& g, int node, std::vector<Value> dys, const std::vector<bool>& needs, Sink& sink);

  Graph& g;
  const int node;           // the forward node
  const Node n;             // a copy: emitting nodes may reallocate the graph's node vector
  const std::vector<Value> dys;  // the gradients of its outputs (invalid where an output has none)
  const std::string gname;  // "<name>/grad": the prefix of the nodes the rule emits
  const std::string label;  // "<name> (<Kind>): " for errors

  Value dy() const { return dys.empty() ? Value{} : dys[0]; }
  Value in(int k) const { return n.inputs[k]; }
  // Whether input k needs a gradient (it depends on a differentiated value and reaches the loss).
  bool need(int k) const { return needs_[n.inputs[k].node]; }
  Status Accumulate(Value v, Value d) { return sink_.Accumulate(v, d); }
  // Attributes of a gradient node of this one: forward_node set, the rest the rule's to fill.
  Attrs BackwardAttrs() const;
  // Appends a gradient node without the builders' checks (its shapes follow from the forward
  // node, which was checked).
  Value Emit(OpKind kind, const std::string& name, std::vector<Value> inputs, std::vector<Shape> shapes,
             std::vector<DType> dtypes, Attrs attrs);

 private:
  const std::vector<bool>& needs_;
  Sink& sink_;
};

struct OpDef {
  OpKind kind = OpKind::kInput;
  const char* name = nullptr;    // "Conv2D" (OpKindName)
  const char* family = nullptr;  // "conv": the files of the family in each layer
  // Emits the gradient nodes of one node and accumulates them into its inputs' gradients;
  // called when some output of the node has a gradient. nullptr: the op has none, and
  // `no_gradient` says why (tests/keras/op_registry_test.cc lists those ops by name).
  Status (*gradient)(GradientContext& c) = nullptr;
  const char* no_gradient = nullptr;
  // FLOPs of one execution of node n: matrix FLOPs (conv, matmul: 2 per multiply-add; what the
  // monitor's matrix-unit utilization counts) and the others.
  int64_t (*matrix_flops)(const Node& n) = nullptr;
  int64_t (*other_flops)(const Node& n) = nullptr;
};

// The entry of `kind`; a kind that no family registered has name nullptr (the registry test
// fails on it).
const OpDef& Op(OpKind kind);

// [[noreturn]]: a kind registered twice in one layer's table (a programming error).
[[noreturn]] void DuplicateOpEntry(OpKind kind, const char* table);

// One layer's entry for each OpKind (the graph's OpDefs, the reference kernels, the cpu
// lowerings, the ONNX translations), filled by that layer's Register functions, one per family,
// called from one place in the layer on first use.
template <class Entry>
class OpTable {
 public:
  explicit OpTable(const char* name) : name_(name) {}
  void Set(OpKind kind, Entry entry) {
    std::optional<Entry>& slot = entries_[static_cast<int>(kind)];
    if (slot) DuplicateOpEntry(kind, name_);
    slot = std::move(entry);
  }
  void SetAll(std::initializer_list<std::pair<OpKind, Entry>> entries) {
    for (const auto& [kind, entry] : entries) Set(kind, entry);
  }
  // nullptr: no entry for `kind`.
  const Entry* Find(OpKind kind) const {
    const int k = static_cast<int>(kind);
    return k < kNumOpKinds && entries_[k] ? &*entries_[k] : nullptr;
  }

 private:
  const char* name_;
  std::array<std::optional<Entry>, kNumOpKinds> entries_{};
};

}  // namespace strata::graph

#pragma GCC visibility pop
