// The reference evaluator's kernels (internal to backend/reference): what a kernel sees of its
// node, the table the evaluator finds it in by OpKind, and one Register function per op family,
// each defined in ops_<family>.cc (conv, matmul, norm, pool, activation, elementwise, reduce,
// shape, loss). evaluator.cc calls every Register function once, when it first builds the
// table: the library is a static archive, where self-registering objects would be dropped by
// the linker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/graph/graph.h"
#include "strata/graph/op_registry.h"

namespace strata::backend::reference {

using Vec = std::vector<double>;

// One node's evaluation. Outputs arrive sized to their shapes and zeroed, so kernels may
// accumulate into them; the evaluator rounds bf16 outputs after the kernel returns.
struct KernelContext {
  const graph::Graph& graph;
  const graph::Node& node;
  int index;                          // node's id in graph
  std::vector<const Vec*> inputs;     // in node.inputs order
  std::vector<Vec*> outputs;          // in node.out_shapes order
  std::map<int, Vec>& leaves;         // Input and Variable values: batch norm's moving statistics
  uint64_t step;                      // seeds dropout masks (backend/dropout_mask.h)
  const std::string& label;           // OpLabel of the node, to begin error messages with

  const Vec& in(int k) const { return *inputs[k]; }
  Vec& out(int k) const { return *outputs[k]; }
  const Shape& in_shape(int k) const { return node.inputs[k].shape(); }
  const Shape& out_shape(int k) const { return node.out_shapes[k]; }
};

using Kernel = Status (*)(const KernelContext& c);

using KernelTable = graph::OpTable<Kernel>;

void RegisterConvOps(KernelTable& t);
void RegisterMatMulOps(KernelTable& t);
void RegisterNormOps(KernelTable& t);
void RegisterPoolOps(KernelTable& t);
void RegisterActivationOps(KernelTable& t);
void RegisterElementwiseOps(KernelTable& t);
void RegisterReduceOps(KernelTable& t);
void RegisterShapeOps(KernelTable& t);
void RegisterLossOps(KernelTable& t);

}  // namespace strata::backend::reference
