#include "strata/graph/fusion.h"

#include <algorithm>

namespace strata::graph {

namespace {

// The single consumer node of output k of node i, or -1 (none, several, or a fetch).
int SoleConsumer(const Graph& g, const Schedule& s, int i, int k) {
  const std::vector<int>& c = s.consumers[i][k];
  if (c.size() != 1) return -1;
  return s.order[c[0]];
}

int PositionOf(const Schedule& s, int node) {
  auto it = std::find(s.order.begin(), s.order.end(), node);
  return it == s.order.end() ? -1 : static_cast<int>(it - s.order.begin());
}

}  // namespace

FusionPlan PlanFusion(const Graph& g, const Schedule& s, bool enabled) {
  const int n = g.num_nodes();
  FusionPlan f;
  f.absorbed_by.assign(n, -1);
  f.bias.assign(n, -1);
  f.activation.assign(n, -1);
  f.act_grad.assign(n, -1);
  f.bias_grad.assign(n, -1);
  if (!enabled) return f;
  auto is_fetch_or_grad = [&](int node, int k) { return g.GradientOf(g.output(node, k)) >= 0; };
  for (int i : s.order) {
    const Node& nd = g.node(i);
    if (f.absorbed_by[i] >= 0) continue;
    if (nd.kind == OpKind::kConv2D || nd.kind == OpKind::kMatMul) {
      int tail = i;
      int b = SoleConsumer(g, s, i, 0);
      if (b >= 0 && g.node(b).kind == OpKind::kBiasAdd && g.node(b).inputs[0] == g.output(i) &&
          !is_fetch_or_grad(i, 0)) {
        f.bias[i] = b;
        f.absorbed_by[b] = i;
        tail = b;
      }
      int a = SoleConsumer(g, s, tail, 0);
      if (a >= 0 && g.node(a).kind == OpKind::kActivation && g.node(a).attrs.activation != Activation::kLinear &&
          !is_fetch_or_grad(tail, 0)) {
        f.activation[i] = a;
        f.absorbed_by[a] = i;
      }
    } else if (nd.kind == OpKind::kBatchNorm && !nd.attrs.bn.synchronized) {  // synchronized: strata's own kernel
      int a = SoleConsumer(g, s, i, 0);
      if (a >= 0 && g.node(a).kind == OpKind::kActivation && g.node(a).attrs.activation == Activation::kRelu) {
        f.activation[i] = a;
        f.absorbed_by[a] = i;
      }
    }
  }
  for (int i : s.order) {
    const Node& nd = g.node(i);
    if (nd.kind == OpKind::kBatchNormGrad) {
      // dy of the batch norm is ActivationGrad(relu)(y_relu, dy_relu) of the fused relu.
      const int fwd = nd.attrs.forward_node;
      const Value dz = nd.inputs[4];
      const Node& src = g.node(dz.node);
      if (fwd >= 0 && f.activation[fwd] >= 0 && src.kind == OpKind::kActivationGrad &&
          src.attrs.forward_node == f.activation[fwd] && SoleConsumer(g, s, dz.node, 0) == i) {
        f.act_grad[i] = dz.node;
        f.absorbed_by[dz.node] = i;
      }
    } else if (nd.kind == OpKind::kConv2DBackpropFilter) {
      const int pos = PositionOf(s, i);
      for (int j : s.order) {
        const Node& bg = g.node(j);
        if (bg.kind != OpKind::kBiasAddGrad || !(bg.inputs[0] == nd.inputs[1]) || f.absorbed_by[j] >= 0) continue;
        bool early = false;
        for (int c : s.consumers[j][0]) early |= c <= pos;
        if (early) continue;
        f.bias_grad[i] = j;
        f.absorbed_by[j] = i;
        break;
      }
    }
  }
  return f;
}

}  // namespace strata::graph
