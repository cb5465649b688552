// Max and average pooling, forward and backward, as oneDNN primitives.
#include <memory>

#include "strata/backend/cpu/broadcast_kernels.h"
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

struct PoolGeo {
  dims strides, kernel, pad_l, pad_r;
};
PoolGeo PoolGeometry(const Shape& x, const graph::PoolOptions& o) {
  const graph::WindowDim h = graph::ComputeWindow(x[1], o.window_h, o.stride_h, 1, o.padding);
  const graph::WindowDim w = graph::ComputeWindow(x[2], o.window_w, o.stride_w, 1, o.padding);
  return {{o.stride_h, o.stride_w}, {o.window_h, o.window_w}, {h.pad_before, w.pad_before}, {h.pad_after, w.pad_after}};
}

}  // namespace

Status PlanPool(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const bool max = n.kind == OpKind::kMaxPool;
  const bool training = HasBackward(p, i);
  md src = p.PrimaryDesc(x);
  const PoolGeo geo = PoolGeometry(x.shape(), n.attrs.pool);
  auto d = dnnl::pooling_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference,
                                       max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding, src,
                                       Any(Dims(n.out_shapes[0]), src.data_type()), geo.strides, geo.kernel, geo.pad_l,
                                       geo.pad_r);
  dnnl::pooling_forward::primitive_desc pd(d, p.Attr(), p.engine());
  p.pool_pd[i] = std::make_shared<dnnl::pooling_forward::primitive_desc>(pd);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  const int yb = p.Define(g.output(i), pd.dst_desc());
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DST, yb, pd.dst_desc()}};
  if (max && training) {
    const int ws = p.NewScratchBuffer(pd.workspace_desc());
    p.workspace[i] = {ws, pd.workspace_desc()};
    args.push_back({DNNL_ARG_WORKSPACE, ws, pd.workspace_desc()});
  }
  return AppendPrimitive<dnnl::pooling_forward>(p, Info(p, i, max ? "maxpool_fwd" : "avgpool_fwd", pd.impl_info_str()),
                                                pd, std::move(args));
}

Status PlanPoolGrad(Planner& p, int i) {  // MaxPoolGrad: x, dy; AvgPoolGrad: dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const bool max = n.kind == OpKind::kMaxPoolGrad;
  const Value dy = max ? n.inputs[1] : n.inputs[0];
  const Shape& xs = n.out_shapes[0];
  auto it = p.pool_pd.find(n.attrs.forward_node);
  if (it == p.pool_pd.end())
    return Unimplemented("the pooling gradient needs its forward pooling in the same program");
  const auto& hint = *it->second;
  const PoolGeo geo = PoolGeometry(xs, n.attrs.pool);
  // A global average pool's gradient (squeeze-and-excitation, the classifier head): dy [N, C]
  // spread over H * W, Strata's own vectorised kernel. oneDNN 2.6 runs windows this large as
  // its reference pooling backward (1.5 s for EfficientNetB0's [16, 48, 48, 144]).
  const bool global = !max && geo.kernel[0] == xs[1] && geo.kernel[1] == xs[2] && dy.shape()[1] == 1 &&
                      dy.shape()[2] == 1 && geo.pad_l == dims{0, 0} && geo.pad_r == dims{0, 0};
  if (global && p.options().broadcast_kernels && dy.dtype() == DType::kF32 && n.out_dtypes[0] == DType::kF32) {
    const KernelIsa isa = BestKernelIsa();
    // dx in the forward input's layout where that is plain or channel-blocked (its reader,
    // the gradient sum, then needs no reorder).
    md dxd = PlainDesc(xs, dt::f32);
    MiddleRun m{xs[0], xs[1] * xs[2], xs[3]};
    if (const std::optional<MiddleRun> run = ChannelBroadcastRun(hint.src_desc(), xs)) {
      dxd = hint.src_desc();
      m = *run;
    }
    const float scale = 1.0f / static_cast<float>(xs[1] * xs[2]);
    return PlanHandIn(
        p, i, "avgpool_bwd", {{dy, PlainDesc(dy.shape(), dt::f32)}}, {{g.output(i), dxd}},
        [=](Kernel& k, uint64_t) {
          BroadcastMiddle(Ptr<const float>(k, 0), m.a, m.r, m.b, scale, Ptr<float>(k, 1), isa);
          return Status::OK();
        },
        KernelImplName(isa));
  }
  const dt type = hint.src_desc().data_type();
  auto d = dnnl::pooling_backward::desc(max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding,
                                        Any(Dims(xs), type), Any(Dims(dy.shape()), type), geo.strides, geo.kernel,
                                        geo.pad_l, geo.pad_r);
  dnnl::pooling_backward::primitive_desc pd(d, p.Attr(), p.engine(), hint);
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  DnnlArgs args = {{DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()}};
  if (max) {
    auto ws = p.workspace.find(n.attrs.forward_node);
    if (ws == p.workspace.end()) return Internal("max pooling backward without a forward workspace");
    args.push_back({DNNL_ARG_WORKSPACE, ws->second.first, ws->second.second});
  }
  args.push_back({DNNL_ARG_DIFF_SRC, p.Define(g.output(i), pd.diff_src_desc()), pd.diff_src_desc()});
  return AppendPrimitive<dnnl::pooling_backward>(p, Info(p, i, max ? "maxpool_bwd" : "avgpool_bwd", pd.impl_info_str()),
                                                 pd, std::move(args));
}

void RegisterPoolPlans(PlanTable& t) {
  Register(t, OpKind::kMaxPool, PlanPool, kTakesBF16);
  Register(t, OpKind::kAvgPool, PlanPool, kTakesBF16);
  Register(t, OpKind::kMaxPoolGrad, PlanPoolGrad, kTakesBF16);
  Register(t, OpKind::kAvgPoolGrad, PlanPoolGrad, kTakesBF16);
}

}  // namespace strata::backend::cpu::ops
