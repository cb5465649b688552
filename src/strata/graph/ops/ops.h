// Internal to graph/: what the op families' files (graph/ops/<family>.cc) share: the table they
// register into, the FLOP rules several families use, and one registration function per family
// (called from op_registry.cc, the only place that lists them).
#pragma once

#include "strata/graph/op_registry.h"

namespace strata::graph::ops {

using OpTable = graph::OpTable<OpDef>;

inline void Register(OpTable& table, const OpDef& def) { table.Set(def.kind, def); }

// FLOP rules: none, one per element of the first output, one per element of the first input.
int64_t NoFlops(const Node& n);
int64_t PerOutputElement(const Node& n);
int64_t PerInputElement(const Node& n);

// Why a gradient op has no gradient of its own.
inline constexpr const char* kSecondOrder = "a gradient op: second derivatives are not supported";

void RegisterLeafOps(OpTable& t);         // ops/leaf.cc
void RegisterConvOps(OpTable& t);         // ops/conv.cc
void RegisterMatMulOps(OpTable& t);       // ops/matmul.cc
void RegisterNormOps(OpTable& t);         // ops/norm.cc
void RegisterPoolOps(OpTable& t);         // ops/pool.cc
void RegisterActivationOps(OpTable& t);   // ops/activation.cc
void RegisterElementwiseOps(OpTable& t);  // ops/elementwise.cc
void RegisterReduceOps(OpTable& t);       // ops/reduce.cc
void RegisterShapeOps(OpTable& t);        // ops/shape.cc
void RegisterLossOps(OpTable& t);         // ops/loss.cc

}  // namespace strata::graph::ops
