// Batch norm forward, inference and backward as oneDNN primitives (the moving statistics
// after the forward primitive), and synchronized batch norm and batch norm + ReLU6, hard swish
// or swish (both directions) as Strata's own kernels.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/backend/cpu/norm_act_kernels.h"
#include "strata/backend/cpu/norm_kernels.h"
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

// Synchronized batch norm: statistics of the global batch, by Strata's own kernels over the
// plain [M, C] layout (norm_kernels.h). Without a cross-replica sum this is the ordinary batch
// norm of the local batch.

// Forward: inputs x [M, C], gamma, beta, moving mean, moving variance [C];
// outputs y [M, C], batch mean [C], batch variance [C] (of the global batch).
Status PlanSyncBatchNorm(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
  const float eps = n.attrs.bn.epsilon, mom = n.attrs.bn.momentum;
  auto acc = std::make_shared<std::vector<double>>(static_cast<size_t>(2 * C + 1));  // sum x, sum x^2, count
  auto sum = p.cross_replica_sum;
  return PlanHand(
      p, i, "bn_fwd_sync",
      {{x, dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}, {n.inputs[3], dt::f32}, {n.inputs[4], dt::f32}},
      {g.output(i, 0), g.output(i, 1), g.output(i, 2)}, [=](Kernel& k, uint64_t) {
        return SyncBatchNormForward(Ptr<float>(k, 0), Ptr<float>(k, 1), Ptr<float>(k, 2), M, C, eps, mom, *sum,
                                    acc->data(), Ptr<float>(k, 3), Ptr<float>(k, 4), Ptr<float>(k, 5),
                                    Ptr<float>(k, 6), Ptr<float>(k, 7));
      });
}

// Backward: inputs x [M, C], gamma, batch mean, batch variance [C], dy [M, C]; outputs
// dx [M, C], dgamma, dbeta [C].
Status PlanSyncBatchNormGrad(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
  const float eps = n.attrs.bn.epsilon;
  auto acc = std::make_shared<std::vector<double>>(static_cast<size_t>(3 * C + 1));  // sum dy, sum dy*x_hat, count, 1/sigma
  auto sum = p.cross_replica_sum;
  return PlanHand(
      p, i, "bn_bwd_sync",
      {{x, dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}, {n.inputs[3], dt::f32}, {n.inputs[4], dt::f32}},
      {g.output(i, 0), g.output(i, 1), g.output(i, 2)}, [=](Kernel& k, uint64_t) {
        return SyncBatchNormBackward(Ptr<float>(k, 0), Ptr<float>(k, 1), Ptr<float>(k, 2), Ptr<float>(k, 3),
                                     Ptr<float>(k, 4), M, C, eps, *sum, acc->data(), Ptr<float>(k, 5),
                                     Ptr<float>(k, 6), Ptr<float>(k, 7));
      });
}

// Batch norm + ReLU6 or hard swish (graph/fusion.h, norm_act_kernels.h): Strata's own kernels over the
// layout the batch norm's input already has, plain or oneDNN's nChw16c / nChw8c (f32); any
// other layout is read plain.
std::pair<md, ChannelLayout> NormActLayout(Planner& p, Value x) {
  const Shape& s = x.shape();
  const int64_t C = s[-1];
  const md& have = p.PrimaryDesc(x);
  if (const std::optional<ChannelBlockFormat> blocks = ChannelBlocksOf(have, s);
      blocks && have.data_type() == dt::f32) {
    const int64_t b = blocks->block;
    return {have, ChannelLayout{s[0], (C + b - 1) / b, s[1] * s[2], b, C}};
  }
  return {PlainDesc(s, dt::f32), ChannelLayout{1, 1, s.num_elements() / C, C, C}};
}

// The fused kernels' activation, and its name in kernel names ("bn_relu6_fwd", "bn_swish_bwd").
std::optional<NormActivation> NormActivationOf(Activation a) {
  if (a == Activation::kRelu6) return NormActivation::kRelu6;
  if (a == Activation::kHardSwish) return NormActivation::kHardSwish;
  if (a == Activation::kSwish) return NormActivation::kSwish;
  return std::nullopt;
}
const char* NormActName(NormActivation a) {
  return a == NormActivation::kRelu6 ? "relu6" : a == NormActivation::kHardSwish ? "hard_swish" : "swish";
}

// Forward: inputs x, gamma, beta, moving mean, moving variance; outputs the activation node's y
// and the batch norm's batch mean and variance [C].
Status PlanBatchNormAct(Planner& p, int i, int act_node, NormActivation act) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const auto [xd, layout] = NormActLayout(p, x);
  const int64_t C = layout.channels, M = layout.count();
  const float eps = n.attrs.bn.epsilon, mom = n.attrs.bn.momentum;
  const float unbias = M > 1 ? static_cast<float>(M) / static_cast<float>(M - 1) : 1.0f;
  const md cdesc = PlainDesc(Shape{C}, dt::f32);
  Kernel k;
  k.info = Info(p, i, std::string("bn_") + NormActName(act) + "_fwd", "strata:" + NormActIsa());
  k.info.name = n.name + " (BatchNorm+" + graph::ActivationName(g.node(act_node).attrs.activation) + ")";
  k.info.other_flops += g.OtherFlops(act_node);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, xd));
  k.bufs.push_back(xb);
  for (int in = 1; in <= 4; ++in) {  // gamma, beta, moving mean, moving variance
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(n.inputs[in], cdesc));
    k.bufs.push_back(b);
  }
  k.bufs.push_back(p.Define(g.output(act_node), xd));
  k.bufs.push_back(p.Define(g.output(i, 1), cdesc));
  k.bufs.push_back(p.Define(g.output(i, 2), cdesc));
  auto scratch = std::make_shared<NormActScratch>(layout);
  k.fn = [=, layout = layout](Kernel& kk, uint64_t) {
    BatchNormActForward(act, Ptr<float>(kk, 0), Ptr<float>(kk, 1), Ptr<float>(kk, 2), layout, eps, *scratch,
                        Ptr<float>(kk, 5), Ptr<float>(kk, 6), Ptr<float>(kk, 7));
    UpdateMovingStatistics(Ptr<float>(kk, 6), Ptr<float>(kk, 7), C, mom, unbias, Ptr<float>(kk, 3), Ptr<float>(kk, 4));
    return Status::OK();
  };
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// Backward: inputs x, gamma, batch mean, batch variance (of node i) and the forward's beta, and
// dy of the activation's output (the absorbed ActivationGrad's); outputs dx, dgamma, dbeta.
Status PlanBatchNormActGrad(Planner& p, int i, int act_grad, NormActivation act) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const auto [xd, layout] = NormActLayout(p, x);
  const float eps = n.attrs.bn.epsilon;
  const md cdesc = PlainDesc(Shape{layout.channels}, dt::f32);
  Kernel k;
  k.info = Info(p, i, std::string("bn_") + NormActName(act) + "_bwd", "strata:" + NormActIsa());
  k.info.name = n.name + " (" + graph::ActivationName(g.node(act_grad).attrs.activation) + "Grad+BatchNormGrad)";
  k.info.other_flops += g.OtherFlops(act_grad);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, xd));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(g.node(act_grad).inputs[1], xd));
  k.bufs = {xb, db};
  const Value beta = g.node(n.attrs.forward_node).inputs[2];
  for (const Value& v : {n.inputs[1], beta, n.inputs[2], n.inputs[3]}) {  // gamma, beta, mean, var
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(v, cdesc));
    k.bufs.push_back(b);
  }
  k.bufs.push_back(p.Define(g.output(i, 0), xd));
  k.bufs.push_back(p.Define(g.output(i, 1), cdesc));
  k.bufs.push_back(p.Define(g.output(i, 2), cdesc));
  auto scratch = std::make_shared<NormActScratch>(layout);
  k.fn = [=, layout = layout](Kernel& kk, uint64_t) {
    BatchNormActBackward(act, Ptr<float>(kk, 0), Ptr<float>(kk, 1), Ptr<float>(kk, 2), Ptr<float>(kk, 3),
                         Ptr<float>(kk, 4), Ptr<float>(kk, 5), layout, eps, *scratch, Ptr<float>(kk, 6),
                         Ptr<float>(kk, 7), Ptr<float>(kk, 8));
    return Status::OK();
  };
  p.Append(std::move(k));
  return p.FinishOutputs();
}

}  // namespace

Status PlanBatchNorm(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const bool training = n.kind == OpKind::kBatchNorm;
  if (training && n.attrs.bn.synchronized) return PlanSyncBatchNorm(p, i);
  const Value x = n.inputs[0];
  const int act_node = p.fusion.activation[i];
  if (training && act_node >= 0)
    if (const auto act = NormActivationOf(g.node(act_node).attrs.activation)) return PlanBatchNormAct(p, i, act_node, *act);
  const Value out = act_node >= 0 ? g.output(act_node) : g.output(i);
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (act_node >= 0) flags |= dnnl::normalization_flags::fuse_norm_relu;
  if (!training) flags |= dnnl::normalization_flags::use_global_stats;
  auto d = dnnl::batch_normalization_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference,
                                                   DataDesc(p, x), n.attrs.bn.epsilon, flags);
  dnnl::batch_normalization_forward::primitive_desc pd(d, p.Attr(), p.engine());
  p.bn_pd[i] = std::make_shared<dnnl::batch_normalization_forward::primitive_desc>(pd);
  Kernel k;
  k.info = Info(p, i, training ? "bn_fwd" : "bn_inference", pd.impl_info_str());
  if (act_node >= 0) {
    k.info.name = n.name + " (" + graph::OpKindName(n.kind) + "+Relu)";
    k.info.other_flops += g.OtherFlops(act_node);
  }
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(n.inputs[2], cdesc));
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_SHIFT, bb, cdesc}};
  if (training) {
    STRATA_ASSIGN_OR_RETURN(int mmb, p.Use(n.inputs[3], cdesc));
    STRATA_ASSIGN_OR_RETURN(int mvb, p.Use(n.inputs[4], cdesc));
    const int meanb = p.Define(g.output(i, 1), cdesc), varb = p.Define(g.output(i, 2), cdesc);
    args.push_back({DNNL_ARG_MEAN, meanb, cdesc});
    args.push_back({DNNL_ARG_VARIANCE, varb, cdesc});
    if (act_node >= 0) {
      const int ws = p.NewScratchBuffer(pd.workspace_desc());
      p.workspace[i] = {ws, pd.workspace_desc()};
      args.push_back({DNNL_ARG_WORKSPACE, ws, pd.workspace_desc()});
    }
    // Moving statistics, after the primitive: Keras's momentum, unbiased variance.
    const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
    const float mom = n.attrs.bn.momentum;
    const float unbias = M > 1 ? static_cast<float>(M) / static_cast<float>(M - 1) : 1.0f;
    k.bufs = {meanb, varb, mmb, mvb};
    k.fn = [C, mom, unbias](Kernel& kk, uint64_t) {
      UpdateMovingStatistics(Ptr<float>(kk, 0), Ptr<float>(kk, 1), C, mom, unbias, Ptr<float>(kk, 2), Ptr<float>(kk, 3));
      return Status::OK();
    };
  } else {
    STRATA_ASSIGN_OR_RETURN(int mmb, p.Use(n.inputs[3], cdesc));
    STRATA_ASSIGN_OR_RETURN(int mvb, p.Use(n.inputs[4], cdesc));
    args.push_back({DNNL_ARG_MEAN, mmb, cdesc});
    args.push_back({DNNL_ARG_VARIANCE, mvb, cdesc});
  }
  args.push_back({DNNL_ARG_DST, p.Define(out, pd.dst_desc()), pd.dst_desc()});
  return AppendPrimitive<dnnl::batch_normalization_forward>(p, std::move(k), pd, std::move(args));
}

Status PlanBatchNormGrad(Planner& p, int i) {  // inputs x, gamma, mean, var, dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  if (n.attrs.bn.synchronized) return PlanSyncBatchNormGrad(p, i);
  const int fwd = n.attrs.forward_node;
  const int act_grad = p.fusion.act_grad[i];
  if (act_grad >= 0)
    if (const auto act = NormActivationOf(g.node(act_grad).attrs.activation)) return PlanBatchNormActGrad(p, i, act_grad, *act);
  const Value x = n.inputs[0];
  const Value dy = act_grad >= 0 ? g.node(act_grad).inputs[1] : n.inputs[4];
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (act_grad >= 0) flags |= dnnl::normalization_flags::fuse_norm_relu;
  std::shared_ptr<dnnl::batch_normalization_forward::primitive_desc> hint;
  auto it = p.bn_pd.find(fwd);
  const bool fwd_fused = fwd >= 0 && p.fusion.activation[fwd] >= 0;
  if (it != p.bn_pd.end() && fwd_fused == (act_grad >= 0)) {
    hint = it->second;
  } else {
    md data = it != p.bn_pd.end() ? it->second->src_desc() : p.PrimaryDesc(x);
    auto d = dnnl::batch_normalization_forward::desc(prop_kind::forward_training, data, n.attrs.bn.epsilon, flags);
    hint = std::make_shared<dnnl::batch_normalization_forward::primitive_desc>(d, p.Attr(), p.engine());
  }
  const md data = hint->src_desc();
  auto d = dnnl::batch_normalization_backward::desc(prop_kind::backward, data, data, n.attrs.bn.epsilon, flags);
  dnnl::batch_normalization_backward::primitive_desc pd(d, p.Attr(), p.engine(), *hint);
  KernelInfo info = Info(p, i, "bn_bwd", pd.impl_info_str());
  if (act_grad >= 0) info.name = n.name + " (ReluGrad+BatchNormGrad)";
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int mb, p.Use(n.inputs[2], cdesc));
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(n.inputs[3], cdesc));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  // oneDNN 2.6 validates a shift argument under use_shift even backward, where it is never
  // read: it gets a scratch buffer.
  const int unused_shift = p.NewScratchBuffer(cdesc);
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_MEAN, mb, cdesc},
                   {DNNL_ARG_VARIANCE, vb, cdesc}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
                   {DNNL_ARG_SHIFT, unused_shift, cdesc}};
  if (act_grad >= 0) {
    auto ws = p.workspace.find(fwd);
    if (ws == p.workspace.end()) return Internal("fused batch norm + relu backward without a forward workspace");
    args.push_back({DNNL_ARG_WORKSPACE, ws->second.first, ws->second.second});
  }
  const int dxb = p.Define(g.output(i, 0), pd.diff_src_desc());
  const int dgb = p.Define(g.output(i, 1), cdesc);
  const int dbb = p.Define(g.output(i, 2), cdesc);
  args.push_back({DNNL_ARG_DIFF_SRC, dxb, pd.diff_src_desc()});
  args.push_back({DNNL_ARG_DIFF_SCALE, dgb, cdesc});
  args.push_back({DNNL_ARG_DIFF_SHIFT, dbb, cdesc});
  return AppendPrimitive<dnnl::batch_normalization_backward>(p, std::move(info), pd, std::move(args));
}

namespace {

// Layer norm over the last axis as oneDNN sees it: x's plain bytes as [rows, C] (oneDNN
// normalises over the last logical dimension, which for rank 4 would be W), and the rows'
// statistics as [rows].
struct RowsView {
  md data, stat;
};
RowsView RowsOf(const Shape& xs, dt type) {
  const int64_t c = xs[-1], rows = xs.num_elements() / c;
  return {md({rows, c}, type, tag::ab), md({rows}, dt::f32, tag::a)};
}

const dnnl::normalization_flags kScaleShift = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

dnnl::layer_normalization_forward::primitive_desc LayerNormForwardPd(Planner& p, const RowsView& v, float epsilon) {
  auto d = dnnl::layer_normalization_forward::desc(prop_kind::forward_training, v.data, v.stat, epsilon, kScaleShift);
  return dnnl::layer_normalization_forward::primitive_desc(d, p.Attr(), p.engine());
}

}  // namespace

Status PlanLayerNorm(Planner& p, int i) {  // inputs x, gamma, beta; outputs y, mean, variance
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const RowsView v = RowsOf(x.shape(), DataDesc(p, x).data_type());
  const auto pd = LayerNormForwardPd(p, v, n.attrs.ln.epsilon);
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, v.data, v.data));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(n.inputs[2], cdesc));
  DnnlArgs args = {{DNNL_ARG_SRC, xb, v.data}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_SHIFT, bb, cdesc}};
  args.push_back({DNNL_ARG_MEAN, p.Define(g.output(i, 1), v.stat, v.stat), v.stat});
  args.push_back({DNNL_ARG_VARIANCE, p.Define(g.output(i, 2), v.stat, v.stat), v.stat});
  args.push_back({DNNL_ARG_DST, p.Define(g.output(i, 0), v.data, v.data), v.data});
  return AppendPrimitive<dnnl::layer_normalization_forward>(p, Info(p, i, "ln_fwd", pd.impl_info_str()), pd,
                                                            std::move(args));
}

Status PlanLayerNormGrad(Planner& p, int i) {  // inputs x, gamma, mean, var, dy; outputs dx, dgamma, dbeta
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const RowsView v = RowsOf(x.shape(), DataDesc(p, x).data_type());
  const float epsilon = n.attrs.ln.epsilon;
  const auto hint = LayerNormForwardPd(p, v, epsilon);
  auto d = dnnl::layer_normalization_backward::desc(prop_kind::backward, v.data, v.data, v.stat, epsilon, kScaleShift);
  dnnl::layer_normalization_backward::primitive_desc pd(d, p.Attr(), p.engine(), hint);
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, v.data, v.data));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int mb, p.Use(n.inputs[2], v.stat, v.stat));
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(n.inputs[3], v.stat, v.stat));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(n.inputs[4], v.data, v.data));
  // As batch norm's: oneDNN 2.6 validates a shift argument under use_shift backward too.
  const int unused_shift = p.NewScratchBuffer(cdesc);
  DnnlArgs args = {{DNNL_ARG_SRC, xb, v.data},        {DNNL_ARG_SCALE, gb, cdesc},     {DNNL_ARG_MEAN, mb, v.stat},
                   {DNNL_ARG_VARIANCE, vb, v.stat},   {DNNL_ARG_DIFF_DST, db, v.data}, {DNNL_ARG_SHIFT, unused_shift, cdesc}};
  args.push_back({DNNL_ARG_DIFF_SRC, p.Define(g.output(i, 0), v.data, v.data), v.data});
  args.push_back({DNNL_ARG_DIFF_SCALE, p.Define(g.output(i, 1), cdesc), cdesc});
  args.push_back({DNNL_ARG_DIFF_SHIFT, p.Define(g.output(i, 2), cdesc), cdesc});
  return AppendPrimitive<dnnl::layer_normalization_backward>(p, Info(p, i, "ln_bwd", pd.impl_info_str()), pd,
                                                             std::move(args));
}

void RegisterNormPlans(PlanTable& t) {
  Register(t, OpKind::kLayerNorm, PlanLayerNorm, kTakesBF16);
  Register(t, OpKind::kLayerNormGrad, PlanLayerNormGrad, kTakesBF16);
  Register(t, OpKind::kBatchNorm, PlanBatchNorm, kTakesBF16);
  Register(t, OpKind::kBatchNormInference, PlanBatchNorm, kTakesBF16);
  Register(t, OpKind::kBatchNormGrad, PlanBatchNormGrad, kTakesBF16);
}

}  // namespace strata::backend::cpu::ops
