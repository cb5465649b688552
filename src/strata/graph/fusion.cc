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

// Activations the fused batch-norm kernels take whose gradient reads their input.
bool DifferentiatesAtInput(Activation a) { return a == Activation::kHardSwish || a == Activation::kSwish; }

// The hard swish or swish that is the sole reader of training batch norm `bn`'s output but for
// its own gradient, which reads that output too (both differentiate at their input), or -1. The
// fused kernels never write that output, so the gradient must fold into the batch norm's
// gradient (whose kernel recomputes it): it feeds that gradient's dy and nothing else.
int ActivationAfterBatchNorm(const Graph& g, const Schedule& s, int bn) {
  int act = -1, act_grad = -1;
  for (int pos : s.consumers[bn][0]) {
    const int c = s.order[pos];
    const Node& cn = g.node(c);
    if (cn.kind == OpKind::kActivation && DifferentiatesAtInput(cn.attrs.activation) && act < 0) act = c;
    else if (cn.kind == OpKind::kActivationGrad && DifferentiatesAtInput(cn.attrs.activation) && act_grad < 0) act_grad = c;
    else return -1;
  }
  if (act < 0 || act_grad < 0 || g.node(act_grad).attrs.forward_node != act) return -1;
  const int bn_grad = SoleConsumer(g, s, act_grad, 0);
  if (bn_grad < 0) return -1;
  const Node& bg = g.node(bn_grad);
  return bg.kind == OpKind::kBatchNormGrad && bg.attrs.forward_node == bn && bg.inputs[4] == g.output(act_grad) ? act
                                                                                                              : -1;
}

int PositionOf(const Schedule& s, int node) {
  auto it = std::find(s.order.begin(), s.order.end(), node);
  return it == s.order.end() ? -1 : static_cast<int>(it - s.order.begin());
}

// v = Concat([zeros..., x, zeros...], axis) over f32 zero constants: x and the zeros' extents.
struct ZeroConcat {
  Value source;
  int64_t before = 0, after = 0;
};
bool MatchZeroConcat(const Graph& g, Value v, int axis, ZeroConcat& m) {
  const Node& n = g.node(v.node);
  if (n.kind != OpKind::kConcat || n.attrs.axis != axis) return false;
  int middle = -1;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Value in = n.inputs[k];
    const Node& src = g.node(in.node);
    if (src.kind == OpKind::kConstant && src.attrs.scalar == 0.0f && src.attrs.var.values.empty() && in.dtype() == DType::kF32) {
      (middle < 0 ? m.before : m.after) += in.shape()[axis];
      continue;
    }
    if (middle >= 0) return false;
    middle = static_cast<int>(k);
    m.source = in;
  }
  return middle >= 0;
}

// The output of v's sole consumer when that is Slice(v, axis, begin, begin + len), else invalid.
Value SliceOf(const Graph& g, const Schedule& s, Value v, int axis, int64_t begin, int64_t len) {
  const int c = SoleConsumer(g, s, v.node, v.output);
  if (c < 0) return Value{};
  const Node& n = g.node(c);
  if (n.kind != OpKind::kSlice || n.attrs.axis != axis || n.attrs.begin != begin || n.attrs.end != begin + len)
    return Value{};
  return g.output(c);
}

// When node r is Add(x, other) or Add(other, x), same shapes and types, with `other` computed
// before node `head` runs (so the fused kernel can read it there): `other`; else invalid.
Value ResidualOperand(const Graph& g, const Schedule& s, int r, Value x, int head) {
  const Node& add = g.node(r);
  if (add.kind != OpKind::kAdd || add.inputs.size() != 2) return Value{};
  const int k = add.inputs[0] == x ? 1 : add.inputs[1] == x ? 0 : -1;
  if (k < 0 || add.inputs[k] == x) return Value{};
  const Value other = add.inputs[k];
  if (other.shape() != x.shape() || other.dtype() != x.dtype()) return Value{};
  // A leaf (input, variable, constant) is not in the schedule: position -1, always ready.
  return PositionOf(s, other.node) < PositionOf(s, head) ? other : Value{};
}

// Folds the ZeroPad2D before 'valid' Conv2D node i into it where it may (see ZeroPadFold).
void FoldZeroPad(const Graph& g, const Schedule& s, int i, const std::vector<Value>& fetches, FusionPlan& f) {
  const Node& conv = g.node(i);
  const Value padded = conv.inputs[0];
  // An output of the program is computed, not folded away.
  auto output = [&](Value v) {
    return g.GradientOf(v) >= 0 || std::find(fetches.begin(), fetches.end(), v) != fetches.end();
  };
  if (conv.attrs.conv.padding != Padding::kValid || padded.shape().rank() != 4 || padded.dtype() != DType::kF32 ||
      output(padded))
    return;
  ZeroPadFold z;
  z.padded = padded;
  std::vector<int> concats;
  Value v = padded;
  ZeroConcat cols, rows;
  if (MatchZeroConcat(g, v, 2, cols)) {  // ZeroPad2D's outer concat pads W
    z.left = cols.before;
    z.right = cols.after;
    concats.push_back(v.node);
    v = cols.source;
  }
  if (MatchZeroConcat(g, v, 1, rows) && (concats.empty() || SoleConsumer(g, s, v.node, v.output) == concats[0]) &&
      !output(v)) {
    z.top = rows.before;
    z.bottom = rows.after;
    concats.push_back(v.node);
    v = rows.source;
  }
  if (concats.empty()) return;
  z.source = v;
  // oneDNN's convolutions take pads smaller than the (dilated) window.
  const Shape& ks = conv.inputs[1].shape();
  const int64_t eff_h = (ks[0] - 1) * conv.attrs.conv.dilation_h + 1, eff_w = (ks[1] - 1) * conv.attrs.conv.dilation_w + 1;
  if (z.top >= eff_h || z.bottom >= eff_h || z.left >= eff_w || z.right >= eff_w) return;
  // The padded value is read by this convolution and its filter gradient only.
  std::vector<int> readers = {i};
  for (int pos : s.consumers[padded.node][padded.output]) {
    const int r = s.order[pos];
    const Node& rn = g.node(r);
    if (r == i) continue;
    if (rn.kind != OpKind::kConv2DBackpropFilter || rn.attrs.forward_node != i || !(rn.inputs[0] == padded)) return;
    readers.push_back(r);
  }
  // Each data gradient: the padded gradient's slices back to the source's extent (the outer
  // concat's slice first), absorbed by the data gradient, which writes the last slice's value.
  std::vector<std::pair<int, int>> absorbed;  // (slice node, data gradient node)
  for (int j : s.order) {
    const Node& bn = g.node(j);
    if (bn.kind != OpKind::kConv2DBackpropInput || bn.attrs.forward_node != i) continue;
    Value d = g.output(j);
    for (size_t c = 0; c < concats.size(); ++c) {
      const int axis = g.node(concats[c]).attrs.axis;
      const Value inner = axis == 2 ? cols.source : rows.source;
      if (c > 0 && output(d)) return;  // an intermediate slice is a program output
      const Value next = SliceOf(g, s, d, axis, axis == 2 ? z.left : z.top, inner.shape()[axis]);
      if (!next.valid()) return;
      absorbed.push_back({next.node, j});
      d = next;
    }
    z.source_grads.push_back({j, d});
    readers.push_back(j);
  }
  const int index = static_cast<int>(f.zero_pads.size());
  f.zero_pads.push_back(z);
  for (int r : readers) f.zero_pad[r] = index;
  for (int c : concats) f.absorbed_by[c] = i;
  for (const auto& [slice, by] : absorbed) f.absorbed_by[slice] = by;
}

}  // namespace

FusionPlan PlanFusion(const Graph& g, const Schedule& s, const FusionOptions& o, const std::vector<Value>& fetches) {
  const bool bn_act = o.bn_act;
  const int n = g.num_nodes();
  FusionPlan f;
  f.absorbed_by.assign(n, -1);
  f.bias.assign(n, -1);
  f.activation.assign(n, -1);
  f.act_grad.assign(n, -1);
  f.bias_grad.assign(n, -1);
  f.zero_pad.assign(n, -1);
  f.residual.assign(n, -1);
  if (!o.enabled) return f;
  // A fetched value, or one whose gradient is asked for, is computed as it is, not folded away.
  auto is_fetch_or_grad = [&](int node, int k) {
    const Value v = g.output(node, k);
    return g.GradientOf(v) >= 0 || std::find(fetches.begin(), fetches.end(), v) != fetches.end();
  };
  if (o.zero_pad)
    for (int i : s.order)
      if (g.node(i).kind == OpKind::kConv2D) FoldZeroPad(g, s, i, fetches, f);
  // A fused kernel runs at its head's place, so an operand it absorbs (the bias) must be ready by
  // then: a leaf, or computed earlier (a bias reshaped from its variable after the product is not).
  std::vector<int> position(n, -1);
  for (size_t k = 0; k < s.order.size(); ++k) position[s.order[k]] = static_cast<int>(k);
  auto ready_at = [&](Value v, int head) {
    return IsLeaf(g.node(v.node).kind) || (position[v.node] >= 0 && position[v.node] < position[head]);
  };
  for (int i : s.order) {
    const Node& nd = g.node(i);
    if (f.absorbed_by[i] >= 0) continue;
    if (nd.kind == OpKind::kConv2D || nd.kind == OpKind::kMatMul) {
      int tail = i;
      int b = SoleConsumer(g, s, i, 0);
      if (b >= 0 && g.node(b).kind == OpKind::kBiasAdd && g.node(b).inputs[0] == g.output(i) &&
          ready_at(g.node(b).inputs[1], i) && !is_fetch_or_grad(i, 0)) {
        f.bias[i] = b;
        f.absorbed_by[b] = i;
        tail = b;
      }
      if (nd.kind == OpKind::kConv2D && o.residual) {  // a residual sum: ResNet's and MobileNetV2's blocks
        const int r = SoleConsumer(g, s, tail, 0);
        if (r >= 0 && !is_fetch_or_grad(tail, 0) && ResidualOperand(g, s, r, g.output(tail), i).valid()) {
          f.residual[i] = r;
          f.absorbed_by[r] = i;
          tail = r;
        }
      }
      int a = SoleConsumer(g, s, tail, 0);
      if (a >= 0 && g.node(a).kind == OpKind::kActivation && g.node(a).attrs.activation != Activation::kLinear &&
          !is_fetch_or_grad(tail, 0)) {
        f.activation[i] = a;
        f.absorbed_by[a] = i;
      }
    } else if (nd.kind == OpKind::kAdd && o.residual && nd.inputs[0].shape() == nd.inputs[1].shape()) {
      // A residual sum that follows a batch norm (training's): the activation after it runs
      // inside the same pass over the tensor.
      const int a = SoleConsumer(g, s, i, 0);
      if (a >= 0 && g.node(a).kind == OpKind::kActivation && g.node(a).attrs.activation != Activation::kLinear &&
          !is_fetch_or_grad(i, 0)) {
        f.activation[i] = a;
        f.absorbed_by[a] = i;
      }
    } else if ((nd.kind == OpKind::kBatchNorm && !nd.attrs.bn.synchronized) ||  // synchronized: strata's own kernel
               nd.kind == OpKind::kBatchNormInference) {  // a pre-activation network's (DenseNet's) inference
      const bool training = nd.kind == OpKind::kBatchNorm;
      int a = SoleConsumer(g, s, i, 0);
      if (a < 0 && training && bn_act) a = ActivationAfterBatchNorm(g, s, i);
      // The batch norm's own output is never written by the fused kernels: not when it is fetched.
      const bool fusable = a >= 0 && g.node(a).kind == OpKind::kActivation && !is_fetch_or_grad(i, 0) &&
                           (g.node(a).attrs.activation == Activation::kRelu ||
                            (training && bn_act && (g.node(a).attrs.activation == Activation::kRelu6 ||
                                                    DifferentiatesAtInput(g.node(a).attrs.activation))));
      if (fusable) {
        f.activation[i] = a;
        f.absorbed_by[a] = i;
      }
    }
  }
  for (int i : s.order) {
    const Node& nd = g.node(i);
    if (nd.kind == OpKind::kBatchNormGrad) {
      // dy of the batch norm is ActivationGrad(relu|relu6|hard_swish|swish)(y or x, dy_y) of the fused activation.
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
