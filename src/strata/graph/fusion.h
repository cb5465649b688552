// Compile pass: which nodes fold into one kernel. Decided on the graph, so every backend
// that can fuse (oneDNN post-ops here, cuDNN later) sees the same groups.
//
//   Conv2D|MatMul -> BiasAdd -> Activation   one kernel (bias and activation as post-ops)
//   BatchNorm -> Relu                        one kernel (oneDNN fuse_norm_relu); and backward:
//   ActivationGrad(relu) -> BatchNormGrad    one kernel, using the forward's workspace
//   Conv2DBackpropFilter + BiasAddGrad       one kernel (the bias gradient falls out of the
//                                            weight gradient's reduction)
// A node folds only when the value between the two is read by nothing else and the fused
// kernel can run where the head runs (no consumer of an absorbed output comes before it).
#pragma once

#include <vector>

#include "strata/graph/graph.h"
#include "strata/graph/schedule.h"

namespace strata::graph {

struct FusionPlan {
  std::vector<int> absorbed_by;  // [node] -> the head node that computes it, or -1
  std::vector<int> bias;         // [head] Conv2D/MatMul: its BiasAdd node, or -1
  std::vector<int> activation;   // [head] Conv2D/MatMul/BatchNorm: its Activation node, or -1
  std::vector<int> act_grad;     // [head] BatchNormGrad: the absorbed ActivationGrad(relu), or -1
  std::vector<int> bias_grad;    // [head] Conv2DBackpropFilter: its BiasAddGrad node, or -1
};

// `can_fuse_activation(a)`: the backend supports `a` as a post-op.
FusionPlan PlanFusion(const Graph& g, const Schedule& s, bool enabled);

}  // namespace strata::graph
