// The leaves: inputs fed each step, variables and constants (their builders are Graph's own,
// graph.cc, since variables are the graph's state). Gradients stop here: what autodiff
// accumulated into a leaf is its gradient.
#include "strata/graph/ops/ops.h"

namespace strata::graph::ops {
namespace {

Status LeafGradient(GradientContext&) { return Status::OK(); }

}  // namespace

void RegisterLeafOps(OpTable& t) {
  for (auto [kind, name] : {std::pair{OpKind::kInput, "Input"}, std::pair{OpKind::kVariable, "Variable"},
                            std::pair{OpKind::kConstant, "Constant"}})
    Register(t, {.kind = kind, .name = name, .family = "leaf", .gradient = LeafGradient, .matrix_flops = NoFlops,
                 .other_flops = NoFlops});
}

}  // namespace strata::graph::ops
