// The elementwise family on the cpu backend: binary ops (broadcasting too), bias add and
// scale as oneDNN binary and eltwise primitives; dropout as Strata's own kernel.
#include <optional>
#include <string>
#include <vector>

#include "strata/backend/cpu/broadcast_kernels.h"
#include "strata/backend/cpu/elementwise_kernels.h"
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

// Bias [C] broadcast along every axis but the last.
md BiasBroadcastDesc(const Shape& xs) {
  std::vector<int64_t> ones(xs.rank(), 1);
  ones.back() = xs[-1];
  return PlainDesc(Shape(ones), dt::f32);
}

}  // namespace

Status PlanScale(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  auto d = dnnl::eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear,
                                       DataDesc(p, n.inputs[0]), n.attrs.scalar, 0.0f);
  dnnl::eltwise_forward::primitive_desc pd(d, p.Attr(), p.engine());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(n.inputs[0], pd.src_desc()));
  const int yb = p.Define(g.output(i), pd.dst_desc());
  return AppendPrimitive<dnnl::eltwise_forward>(p, Info(p, i, "scale", pd.impl_info_str()), pd,
                                                {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DST, yb, pd.dst_desc()}});
}

namespace {

// y (layout a) = x0 (layout a) `alg` x1 (layout b, read as `b_view` of its plain bytes if set).
Status AppendBinary(Planner& p, int i, const std::string& op, algorithm alg, const md& a, const md& b,
                    std::optional<md> b_view) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  // A fused activation (graph/fusion.h: Add -> Activation) is the kernel's post-op.
  const int act = p.fusion.activation[i];
  dnnl::primitive_attr attr = p.Attr();
  if (act >= 0) attr.set_post_ops(ActivationPostOp(g.node(act).attrs.activation));
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, a, b, a), attr, p.engine());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(n.inputs[0], a));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(n.inputs[1], b, b_view));
  const int yb = p.Define(act >= 0 ? g.output(act) : g.output(i), a);
  KernelInfo info = Info(p, i, op, pd.impl_info_str());
  if (act >= 0) {
    info.name = n.name + " (" + graph::OpKindName(n.kind) + "+" + graph::ActivationName(g.node(act).attrs.activation) + ")";
    info.other_flops += g.OtherFlops(act);
  }
  return AppendPrimitive<dnnl::binary>(p, std::move(info), pd,
                                       {{DNNL_ARG_SRC_0, xb, a}, {DNNL_ARG_SRC_1, bb, b}, {DNNL_ARG_DST, yb, a}});
}

}  // namespace

Status PlanBinary(Planner& p, int i) {
  const Node& n = p.graph().node(i);
  const algorithm alg = n.kind == OpKind::kAdd ? algorithm::binary_add
                        : n.kind == OpKind::kSub ? algorithm::binary_sub : algorithm::binary_mul;
  const md a = DataDesc(p, n.inputs[0]);
  if (n.inputs[1].shape() != n.inputs[0].shape()) {
    const Value x = n.inputs[0], b = n.inputs[1];
    // Squeeze-and-excitation's scale ([N, H, W, C] * [N, 1, 1, C]) and drop-connect's mask
    // ([N, H, W, C] * [N, 1, 1, 1]): broadcast along one run of axes, Strata's own vectorised
    // kernel (oneDNN 2.6 runs these as its reference binary, ~400 ns an element).
    if (const std::optional<MiddleRun> run = BroadcastRun(x.shape(), b.shape());
        run && p.options().broadcast_kernels && n.kind == OpKind::kMultiply && x.dtype() == DType::kF32 &&
        b.dtype() == DType::kF32) {
      const KernelIsa isa = BestKernelIsa();
      // x in the layout it already has where the kernel can read it (oneDNN's channel blocks:
      // the per-channel factor then runs in blocks of 16 channels; a per-example factor
      // covers an example's elements in any order), so no reorder on either side.
      md xd = PlainDesc(x.shape(), dt::f32);
      MiddleRun m = *run;
      const md primary = DataDesc(p, x);
      if (const std::optional<MiddleRun> blocked = ChannelBroadcastRun(primary, x.shape())) {
        if (m.a == x.shape()[0] && m.b == x.shape()[-1]) {  // [N, 1, 1, C]
          xd = primary;
          m = *blocked;
        } else if (m.a == x.shape()[0] && m.b == 1) {  // [N, 1, 1, 1]
          xd = primary;
        }
      }
      return PlanHandIn(
          p, i, "binary_broadcast", {{x, xd}, {b, PlainDesc(b.shape(), dt::f32)}}, {{p.graph().output(i), xd}},
          [m, isa](Kernel& k, uint64_t) {
            MultiplyBroadcastMiddle(Ptr<const float>(k, 0), Ptr<const float>(k, 1), m.a, m.r, m.b, Ptr<float>(k, 2), isa);
            return Status::OK();
          },
          KernelImplName(isa));
    }
    // Otherwise oneDNN's binary reads the second input in place, plain, in its own dtype.
    const md bd = PlainDesc(b.shape(), a.data_type() == dt::bf16 && b.dtype() == DType::kBF16 ? dt::bf16 : dt::f32);
    return AppendBinary(p, i, "binary_broadcast", alg, a, bd, std::nullopt);
  }
  return AppendBinary(p, i, "binary", alg, a, a, std::nullopt);
}

Status PlanBiasAdd(Planner& p, int i) {
  const Value x = p.graph().node(i).inputs[0];
  const md b = BiasBroadcastDesc(x.shape());
  return AppendBinary(p, i, "bias_add", algorithm::binary_add, DataDesc(p, x), b, b);
}

Status PlanDropout(Planner& p, int i) {  // outputs y, mask
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t count = n.out_shapes[0].num_elements();
  const float rate = n.attrs.scalar;
  const uint64_t seed = n.attrs.seed;
  return PlanHand(p, i, "dropout", {{n.inputs[0], dt::f32}}, {g.output(i, 0), g.output(i, 1)},
                  [=](Kernel& k, uint64_t step) {
                    DropoutForward(Ptr<float>(k, 0), count, rate, seed, step, Ptr<float>(k, 1), Ptr<float>(k, 2));
                    return Status::OK();
                  });
}

void RegisterElementwisePlans(PlanTable& t) {
  Register(t, OpKind::kAdd, PlanBinary, kTakesBF16);
  Register(t, OpKind::kSub, PlanBinary, kTakesBF16);
  Register(t, OpKind::kMultiply, PlanBinary, kTakesBF16);
  Register(t, OpKind::kScale, PlanScale);
  Register(t, OpKind::kBiasAdd, PlanBiasAdd, kTakesBF16);
  Register(t, OpKind::kBiasAddGrad, PlanReduce);  // a reduction over every axis but the last
  Register(t, OpKind::kDropout, PlanDropout);
}

}  // namespace strata::backend::cpu::ops
