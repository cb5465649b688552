// Compile pass: which nodes fold into one kernel. Decided on the graph, so every backend
// that can fuse (oneDNN post-ops here, cuDNN later) sees the same groups.
//
//   Conv2D|MatMul -> BiasAdd -> Activation   one kernel (bias and activation as post-ops)
//   Conv2D -> [BiasAdd] -> Add(, other) -> [Activation]
//                                            one kernel: the residual sum (the other operand
//                                            computed before the convolution runs) as a
//                                            post-op, the activation after it
//   Add -> Activation                        one kernel (a residual sum after a batch norm)
//   BatchNorm(Inference) -> Relu             one kernel (oneDNN fuse_norm_relu); and backward:
//   ActivationGrad(relu) -> BatchNormGrad    one kernel, using the forward's workspace
//   BatchNorm -> Relu6 | HardSwish | Swish   one kernel each way where the backend has one
//                                            (`bn_act`: the cpu backend's own, one thread, f32)
//   Conv2DBackpropFilter + BiasAddGrad       one kernel (the bias gradient falls out of the
//                                            weight gradient's reduction)
//   ZeroPad2D -> Conv2D('valid')             the convolution's own (asymmetric) padding; its
//                                            filter gradient reads the unpadded input too, and
//                                            its data gradient writes the unpadded gradient
//                                            (the slices autodiff cut from the padded one)
// A node folds only when the value between the two is read by nothing else and the fused
// kernel can run where the head runs (no consumer of an absorbed output comes before it).
#pragma once

#include <utility>
#include <vector>

#include "strata/graph/graph.h"
#include "strata/graph/schedule.h"

namespace strata::graph {

// A ZeroPadding2D (Graph::ZeroPad2D: Concat of f32 zero constants along W around one along
// H, either optional) whose only readers are a 'valid' convolution and its filter gradient,
// folded into that convolution's padding: no padded copy forward, no slices backward.
struct ZeroPadFold {
  Value source;                                // the unpadded input
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  Value padded;                                // the convolution's input as the graph has it
  std::vector<std::pair<int, Value>> source_grads;  // (Conv2DBackpropInput node, the value it writes)
};

struct FusionPlan {
  std::vector<int> absorbed_by;  // [node] -> the head node that computes it, or -1
  std::vector<int> bias;         // [head] Conv2D/MatMul: its BiasAdd node, or -1
  std::vector<int> activation;   // [head] Conv2D/MatMul/BatchNorm(Inference)/Add: its Activation node, or -1
  std::vector<int> residual;     // [head] Conv2D: the Add of its output (after any bias) to another value, or -1
  std::vector<int> act_grad;     // [head] BatchNormGrad: the absorbed ActivationGrad(relu|relu6), or -1
  std::vector<int> bias_grad;    // [head] Conv2DBackpropFilter: its BiasAddGrad node, or -1
  // [Conv2D, its Conv2DBackpropFilter and Conv2DBackpropInput nodes] -> index into zero_pads, or -1
  std::vector<int> zero_pad;
  std::vector<ZeroPadFold> zero_pads;
};

struct FusionOptions {
  bool enabled = true;    // any fusion at all
  bool bn_act = false;  // the backend has batch norm + ReLU6, hard swish and swish kernels (both ways) for this program
  bool zero_pad = true;   // fold ZeroPadding2D into the next 'valid' convolution
  bool residual = true;   // Conv2D -> [BiasAdd] -> Add -> [Activation], and Add -> Activation
};

// `fetches`: the program's outputs (never folded away).
FusionPlan PlanFusion(const Graph& g, const Schedule& s, const FusionOptions& o, const std::vector<Value>& fetches = {});
inline FusionPlan PlanFusion(const Graph& g, const Schedule& s, bool enabled) {
  return PlanFusion(g, s, FusionOptions{.enabled = enabled});
}

}  // namespace strata::graph
