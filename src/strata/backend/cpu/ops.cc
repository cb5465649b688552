// Node -> kernels for the cpu backend: oneDNN primitives where oneDNN has the op (conv,
// matmul, batch norm, pooling, eltwise, softmax, binary, concat, reduction, reorder), and
// Strata's own kernels where it has none (losses, dropout, broadcast, synchronized batch norm:
// loss_kernels.h, elementwise_kernels.h, norm_kernels.h). The optimizer update is no op here: it
// runs outside the program (CpuBackend::ApplyUpdate, optimizer_kernels.h).
// This file holds the op table and the helpers every family shares (ops_internal.h); each
// family's Plan functions and their registration are in ops_<family>.cc.
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu {
namespace ops {

namespace {

std::string ShapeStr(const Value& v) { return std::string(DTypeName(v.dtype())) + v.shape().ToString(); }

// Leaves are program memory, pinned by CpuBackend before planning: nothing to run.
Status PlanLeaf(Planner&, int) { return Status::OK(); }

}  // namespace

const CpuOp& CpuOpOf(OpKind kind) {
  static const PlanTable table = [] {
    PlanTable t("cpu backend's op table");
    for (OpKind leaf : {OpKind::kInput, OpKind::kVariable, OpKind::kConstant}) Register(t, leaf, PlanLeaf);
    RegisterConvPlans(t);
    RegisterMatMulPlans(t);
    RegisterNormPlans(t);
    RegisterPoolPlans(t);
    RegisterActivationPlans(t);
    RegisterElementwisePlans(t);
    RegisterReducePlans(t);
    RegisterShapePlans(t);
    RegisterLossPlans(t);
    return t;
  }();
  static const CpuOp kNone{};
  const CpuOp* op = table.Find(kind);
  return op ? *op : kNone;
}

KernelInfo Info(Planner& p, int i, const std::string& op, const std::string& impl) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  KernelInfo k;
  k.name = n.name + " (" + graph::OpKindName(n.kind) + ")";
  k.op = op;
  k.impl = impl;
  for (size_t j = 0; j < n.inputs.size(); ++j) k.shapes += (j ? " x " : "") + ShapeStr(n.inputs[j]);
  if (!n.out_shapes.empty()) k.shapes += " -> " + ShapeStr(g.output(i, 0));
  k.matrix_flops = g.MatrixFlops(i);
  k.other_flops = g.OtherFlops(i);
  return k;
}

dims Dims(const Shape& s) { return PlainDesc(s, dt::f32).dims(); }
int DnnlAxis(int rank, int axis) {
  if (rank != 4) return axis;
  static const int kMap[4] = {0, 2, 3, 1};
  return kMap[axis];
}

dt OutType(Planner& p, Value v) {
  if (!p.bf16() || p.IsPinned(v)) return dt::f32;
  for (int pos : p.schedule.consumers[v.node][v.output]) {
    const int c = p.schedule.order[pos];
    const int head = p.fusion.absorbed_by[c] >= 0 ? p.fusion.absorbed_by[c] : c;
    if (!CpuOpOf(p.graph().node(head).kind).takes_bf16) return dt::f32;
  }
  return dt::bf16;
}

md DataDesc(Planner& p, Value v) {
  md d = p.PrimaryDesc(v);
  if (d.data_type() != dt::f32 && d.data_type() != dt::bf16) return PlainDesc(v.shape(), dt::f32);
  return d;
}

EltwiseAlg ForwardAlg(Activation a, bool for_backward) {
  switch (a) {
    case Activation::kRelu: return {for_backward ? algorithm::eltwise_relu_use_dst_for_bwd : algorithm::eltwise_relu, 0, 0, for_backward};
    case Activation::kRelu6: return {for_backward ? algorithm::eltwise_clip_v2_use_dst_for_bwd : algorithm::eltwise_clip_v2, 0, 6, for_backward};
    case Activation::kSigmoid: return {for_backward ? algorithm::eltwise_logistic_use_dst_for_bwd : algorithm::eltwise_logistic, 0, 0, for_backward};
    case Activation::kTanh: return {for_backward ? algorithm::eltwise_tanh_use_dst_for_bwd : algorithm::eltwise_tanh, 0, 0, for_backward};
    case Activation::kGelu: return {algorithm::eltwise_gelu_erf, 0, 0, false};
    case Activation::kGeluTanh: return {algorithm::eltwise_gelu_tanh, 0, 0, false};
    case Activation::kSwish: return {algorithm::eltwise_swish, 1, 0, false};
    case Activation::kLinear: return {algorithm::eltwise_linear, 1, 0, false};
    case Activation::kHardSwish: return {algorithm::eltwise_hardswish, 0, 0, false};
    // oneDNN 2.6 has no hard sigmoid: x / 6 + 1/2 here, clipped to [0, 1] after it as a post-op
    // (ActivationPostOp) or by Strata's own kernel (ops_activation.cc).
    case Activation::kHardSigmoid: return {algorithm::eltwise_linear, 1.0f / 6, 0.5f, false};
  }
  return {algorithm::eltwise_linear, 1, 0, false};
}

FusedEpilogue Epilogue(Planner& p, int i, const std::string& op) {
  const graph::Graph& g = p.graph();
  const int bias_node = p.fusion.bias[i], act_node = p.fusion.activation[i], res_node = p.fusion.residual[i];
  FusedEpilogue e{.bias_node = bias_node,
                  .act_node = act_node,
                  .residual_node = res_node,
                  .out = act_node >= 0   ? g.output(act_node)
                         : res_node >= 0 ? g.output(res_node)
                         : bias_node >= 0 ? g.output(bias_node)
                                          : g.output(i),
                  .name = op,
                  .attr = p.Attr()};
  if (bias_node >= 0) e.name += "+BiasAdd";
  if (res_node >= 0) {
    const Node& add = g.node(res_node);
    const Value sum = bias_node >= 0 ? g.output(bias_node) : g.output(i);
    e.other = add.inputs[0] == sum ? add.inputs[1] : add.inputs[0];
    e.name += "+Add";
  }
  if (act_node >= 0) {
    e.name += std::string("+") + graph::ActivationName(g.node(act_node).attrs.activation);
    // With a residual sum the activation comes after it: the caller builds that chain.
    if (res_node < 0) e.attr.set_post_ops(ActivationPostOp(g.node(act_node).attrs.activation));
  }
  return e;
}

dnnl::post_ops ActivationPostOp(Activation a, dnnl::post_ops po) {
  const EltwiseAlg e = ForwardAlg(a, false);
  po.append_eltwise(1.0f, e.alg, e.alpha, e.beta);
  if (a == Activation::kHardSigmoid) po.append_eltwise(1.0f, algorithm::eltwise_clip_v2, 0, 1);
  return po;
}

std::optional<MiddleRun> BroadcastRun(const Shape& full, const Shape& part) {
  if (full.rank() != part.rank()) return std::nullopt;
  int first = -1, last = -1;
  for (int d = 0; d < full.rank(); ++d) {
    if (full[d] == 1) {  // an extent-1 axis joins a run it follows
      if (first >= 0 && last == d - 1) last = d;
      continue;
    }
    if (part[d] == full[d]) continue;
    if (part[d] != 1) return std::nullopt;
    if (first < 0) first = d;
    else if (last != d - 1) return std::nullopt;  // a second run
    last = d;
  }
  if (first < 0) return std::nullopt;
  MiddleRun m{1, 1, 1};
  for (int d = 0; d < full.rank(); ++d) (d < first ? m.a : d <= last ? m.r : m.b) *= full[d];
  return m;
}

bool HasBackward(Planner& p, int fwd) {
  const graph::Graph& g = p.graph();
  for (int j : p.schedule.order)
    if (g.node(j).attrs.forward_node == fwd) return true;
  return false;
}

Status PlanHand(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, dt>>& ins,
                const std::vector<Value>& outs, KernelFn fn, const std::string& impl) {
  std::vector<std::pair<Value, md>> in_descs, out_descs;
  for (const auto& [v, type] : ins) in_descs.push_back({v, PlainDesc(v.shape(), type)});
  for (const Value& v : outs) out_descs.push_back({v, PlainDesc(v.shape(), dt::f32)});
  return PlanHandIn(p, i, op, in_descs, out_descs, std::move(fn), impl);
}

Status PlanHandIn(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, md>>& ins,
                  const std::vector<std::pair<Value, md>>& outs, KernelFn fn, const std::string& impl) {
  Kernel k;
  k.info = Info(p, i, op, impl);
  for (const auto& [v, d] : ins) {
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(v, d));
    k.bufs.push_back(b);
  }
  for (const auto& [v, d] : outs) k.bufs.push_back(p.Define(v, d));
  k.fn = std::move(fn);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

std::optional<MiddleRun> ChannelBroadcastRun(const md& d, const Shape& s) {
  if (s.rank() != 4 || d.data_type() != dt::f32) return std::nullopt;
  const int64_t n = s[0], hw = s[1] * s[2], c = s[3];
  if (d == PlainDesc(s, dt::f32)) return MiddleRun{n, hw, c};
  if (const std::optional<ChannelBlockFormat> b = WholeChannelBlocks(d, s)) return MiddleRun{n * c / b->block, hw, b->block};
  return std::nullopt;
}

std::optional<ChannelBlockFormat> ChannelBlocksOf(const md& d, const Shape& s) {
  if (s.rank() != 4) return std::nullopt;
  for (const ChannelBlockFormat b : {ChannelBlockFormat{tag::nChw16c, 16}, ChannelBlockFormat{tag::nChw8c, 8}})
    if (d == md(Dims(s), d.data_type(), b.format)) return b;
  return std::nullopt;
}

std::optional<ChannelBlockFormat> WholeChannelBlocks(const md& d, const Shape& s) {
  const std::optional<ChannelBlockFormat> b = ChannelBlocksOf(d, s);
  if (!b || s[3] % b->block != 0) return std::nullopt;
  return b;
}

}  // namespace ops

Status PlanNode(Planner& p, int i) {
  const graph::Node& n = p.graph().node(i);
  const ops::CpuOp& op = ops::CpuOpOf(n.kind);
  if (op.plan == nullptr) return Unimplemented(graph::OpLabel(n.name, n.kind) + "no cpu kernel");
  return op.plan(p, i);
}

bool HasCpuKernel(graph::OpKind kind) { return ops::CpuOpOf(kind).plan != nullptr; }

}  // namespace strata::backend::cpu
