// Element-wise and data-movement ops: activations and their gradients, scale, softmax,
// binary ops, bias add, reductions, concat, slice, reshape/cast/identity as oneDNN primitives;
// dropout and broadcast as Strata's own kernels.
#include <algorithm>
#include <memory>
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

Status PlanActivation(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const EltwiseAlg a = ForwardAlg(n.attrs.activation, HasBackward(p, i));
  auto d = dnnl::eltwise_forward::desc(prop_kind::forward_training, a.alg, DataDesc(p, x), a.alpha, a.beta);
  dnnl::eltwise_forward::primitive_desc pd(d, p.Attr(), p.engine());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  const int yb = p.Define(g.output(i), pd.dst_desc());
  return AppendPrimitive<dnnl::eltwise_forward>(
      p, Info(p, i, std::string("eltwise_") + graph::ActivationName(n.attrs.activation), pd.impl_info_str()), pd,
      {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DST, yb, pd.dst_desc()}});
}

Status PlanActivationGrad(Planner& p, int i) {  // inputs (y or x), dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value v = n.inputs[0], dy = n.inputs[1];
  const EltwiseAlg a = ForwardAlg(n.attrs.activation, true);
  const md data = DataDesc(p, v);
  auto fd = dnnl::eltwise_forward::desc(prop_kind::forward_training, a.alg, data, a.alpha, a.beta);
  dnnl::eltwise_forward::primitive_desc hint(fd, p.Attr(), p.engine());
  auto d = dnnl::eltwise_backward::desc(a.alg, data, data, a.alpha, a.beta);
  dnnl::eltwise_backward::primitive_desc pd(d, p.Attr(), p.engine(), hint);
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(v, data));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  const int xb = p.Define(g.output(i), pd.diff_src_desc());
  return AppendPrimitive<dnnl::eltwise_backward>(
      p, Info(p, i, std::string("eltwise_bwd_") + graph::ActivationName(n.attrs.activation), pd.impl_info_str()), pd,
      {{a.uses_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, vb, data}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
       {DNNL_ARG_DIFF_SRC, xb, pd.diff_src_desc()}});
}

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

Status PlanSoftmax(Planner& p, int i, bool backward) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const md data = PlainDesc(x.shape(), dt::f32);
  const int axis = DnnlAxis(x.shape().rank(), x.shape().rank() - 1);
  dnnl::softmax_forward::primitive_desc fpd(dnnl::softmax_forward::desc(prop_kind::forward_training, data, axis),
                                            p.Attr(), p.engine());
  if (!backward) {
    STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, data));
    const int yb = p.Define(g.output(i), data);
    return AppendPrimitive<dnnl::softmax_forward>(p, Info(p, i, "softmax", fpd.impl_info_str()), fpd,
                                                  {{DNNL_ARG_SRC, xb, data}, {DNNL_ARG_DST, yb, data}});
  }
  // inputs y, dy
  dnnl::softmax_backward::primitive_desc pd(dnnl::softmax_backward::desc(data, data, axis), p.Attr(), p.engine(), fpd);
  STRATA_ASSIGN_OR_RETURN(int yb, p.Use(x, data));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(n.inputs[1], data));
  const int xb = p.Define(g.output(i), data);
  return AppendPrimitive<dnnl::softmax_backward>(
      p, Info(p, i, "softmax_bwd", pd.impl_info_str()), pd,
      {{DNNL_ARG_DST, yb, data}, {DNNL_ARG_DIFF_DST, db, data}, {DNNL_ARG_DIFF_SRC, xb, data}});
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

// ReduceSum / ReduceMean / BiasAddGrad: a oneDNN reduction into the kept-dims shape.
Status PlanReduce(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  std::vector<int> axes = n.attrs.axes;
  if (n.kind == OpKind::kBiasAddGrad) {
    axes.clear();
    for (int a = 0; a + 1 < x.shape().rank(); ++a) axes.push_back(a);
  }
  std::vector<int64_t> kept = x.shape().dims();
  for (int a : axes) kept[a] = 1;
  // Reduced axes in one contiguous run (squeeze-and-excitation's gradient over H and W, a bias
  // gradient over N, H, W, a full sum): Strata's own [A, R, B] -> [A, B] sum over plain memory.
  // oneDNN 2.6 runs these as its reference kernel, ~50 ns an element (0.7 s for a
  // [32, 56, 56, 144] SE gradient).
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && sorted.back() - sorted.front() + 1 == static_cast<int>(sorted.size())) {
    int64_t a = 1, r = 1, b = 1;
    for (int d = 0; d < x.shape().rank(); ++d) {
      if (d < sorted.front()) a *= x.shape()[d];
      else if (d <= sorted.back()) r *= x.shape()[d];
      else b *= x.shape()[d];
    }
    const double scale = n.kind == OpKind::kReduceMean ? 1.0 / static_cast<double>(r) : 1.0;
    // A sum over H and W reads x in its channel-blocked layout as it is (the result, [N, C],
    // is plain either way): squeeze-and-excitation's factor gradient needs no reorder.
    md xd = PlainDesc(x.shape(), dt::f32);
    MiddleRun m{a, r, b};
    if (sorted == std::vector<int>{1, 2})
      if (const std::optional<MiddleRun> blocked = ChannelBroadcastRun(DataDesc(p, x), x.shape())) {
        xd = DataDesc(p, x);
        m = *blocked;
      }
    const KernelIsa isa = BestKernelIsa();
    return PlanHandIn(
        p, i, "reduce_sum_middle", {{x, xd}}, {{g.output(i), PlainDesc(g.output(i).shape(), dt::f32)}},
        [=](Kernel& k, uint64_t) {
          SumMiddle(Ptr<const float>(k, 0), m.a, m.r, m.b, scale, Ptr<float>(k, 1), isa);
          return Status::OK();
        },
        KernelImplName(isa));
  }
  const md src = DataDesc(p, x);
  const md dst = PlainDesc(Shape(kept), dt::f32);
  const algorithm alg = n.kind == OpKind::kReduceMean ? algorithm::reduction_mean : algorithm::reduction_sum;
  if (src.dims() == dst.dims()) {  // nothing to reduce: a copy
    dnnl::reorder::primitive_desc pd(p.engine(), src, p.engine(), dst, p.Attr());
    STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, src));
    const int yb = p.Define(g.output(i), dst, dst);
    return AppendPrimitive<dnnl::reorder>(p, Info(p, i, "reduce(copy)", pd.impl_info_str()), pd,
                                          {{DNNL_ARG_FROM, xb, src}, {DNNL_ARG_TO, yb, dst}});
  }
  dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(alg, src, dst, 0.0f, 0.0f), p.Attr(), p.engine());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, src));
  const int yb = p.Define(g.output(i), dst, dst);
  return AppendPrimitive<dnnl::reduction>(p, Info(p, i, "reduction", pd.impl_info_str()), pd,
                                          {{DNNL_ARG_SRC, xb, src}, {DNNL_ARG_DST, yb, dst}});
}

namespace {

// The channel-blocked layout a concat along channels keeps: the one its first blocked input
// has, where every input and the result are whole blocks of it (DenseNet's dense blocks: the
// growing input, its batch norm and the 1x1 convolution reading it stay blocked, instead of a
// reorder to plain before each concat and one back after it). Inputs in another layout are
// reordered to it. nullopt: plain.
std::optional<ChannelBlockFormat> ConcatBlockFormat(Planner& p, const Node& n, const Shape& out, dt type) {
  if (out.rank() != 4 || n.attrs.axis != 3) return std::nullopt;
  std::optional<ChannelBlockFormat> blocks;
  for (const Value& v : n.inputs) {
    const md& have = p.PrimaryDesc(v);
    if (have.data_type() != type) continue;
    if (std::optional<ChannelBlockFormat> b = WholeChannelBlocks(have, v.shape())) {
      blocks = b;
      break;
    }
  }
  if (!blocks) return std::nullopt;
  for (const Value& v : n.inputs)
    if (v.shape()[3] % blocks->block != 0) return std::nullopt;
  return blocks;
}

}  // namespace

Status PlanConcat(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const dt type = DataDesc(p, n.inputs[0]).data_type();
  const Shape& out = n.out_shapes[0];
  const std::optional<ChannelBlockFormat> blocks = ConcatBlockFormat(p, n, out, type);
  auto layout = [&](const Shape& s) { return blocks ? md(Dims(s), type, blocks->format) : PlainDesc(s, type); };
  std::vector<md> srcs;
  for (const Value& v : n.inputs) srcs.push_back(layout(v.shape()));
  const md dst = layout(out);
  dnnl::concat::primitive_desc pd(dst, DnnlAxis(out.rank(), n.attrs.axis), srcs, p.engine(), p.Attr());
  DnnlArgs args;
  for (size_t j = 0; j < n.inputs.size(); ++j) {
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(n.inputs[j], srcs[j]));
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(j), b, srcs[j]});
  }
  args.push_back({DNNL_ARG_DST, p.Define(g.output(i), dst), dst});
  return AppendPrimitive<dnnl::concat>(p, Info(p, i, "concat", pd.impl_info_str()), pd, std::move(args));
}

Status PlanSlice(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const Shape& out = n.out_shapes[0];
  const md have = DataDesc(p, x);
  const dt type = have.data_type();
  // A slice of whole channel blocks reads the blocked layout x has and keeps it (a concat's
  // gradient in DenseNet); anything else is a slice of the plain layout.
  md full = PlainDesc(x.shape(), type), dst = PlainDesc(out, type);
  const int axis = n.attrs.axis;  // the graph keeps it in [0, rank)
  if (const std::optional<ChannelBlockFormat> b = WholeChannelBlocks(have, x.shape());
      b && axis == 3 && n.attrs.begin % b->block == 0 && out[3] % b->block == 0) {
    full = have;
    dst = md(Dims(out), type, b->format);
  }
  dims sub = Dims(out), offsets(sub.size(), 0);
  offsets[DnnlAxis(x.shape().rank(), axis)] = n.attrs.begin;
  const md src = full.submemory_desc(sub, offsets);
  dnnl::reorder::primitive_desc pd(p.engine(), src, p.engine(), dst, p.Attr());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, full));
  const int yb = p.Define(g.output(i), dst);
  return AppendPrimitive<dnnl::reorder>(p, Info(p, i, "slice", pd.impl_info_str()), pd,
                                        {{DNNL_ARG_FROM, xb, src}, {DNNL_ARG_TO, yb, dst}});
}

// Reshape, Cast, Identity: the output is the input's plain bytes (of type `type`) seen in
// the output's shape; an alias unless the output is pinned to program memory.
Status PlanAliasOrCopy(Planner& p, int i, dt type) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0], y = g.output(i);
  const md src = PlainDesc(x.shape(), type);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, src));
  const md ydesc = PlainDesc(y.shape(), type);
  if (!p.IsPinned(y) && n.kind != OpKind::kIdentity) {
    p.Alias(y, ydesc, xb);
    return Status::OK();
  }
  // A copy: the input's plain bytes are the output's plain bytes (both row-major in graph order).
  const md from = ydesc;
  dnnl::reorder::primitive_desc pd(p.engine(), from, p.engine(), ydesc, p.Attr());
  const int yb = p.Define(y, ydesc);
  return AppendPrimitive<dnnl::reorder>(p, Info(p, i, "copy", pd.impl_info_str()), pd,
                                        {{DNNL_ARG_FROM, xb, from}, {DNNL_ARG_TO, yb, ydesc}});
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

Status PlanBroadcast(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  auto index = std::make_shared<const std::vector<int32_t>>(BroadcastSourceIndex(n.out_shapes[0], n.attrs.axes));
  return PlanHand(p, i, "broadcast", {{n.inputs[0], dt::f32}}, {g.output(i)}, [index](Kernel& k, uint64_t) {
    Gather(Ptr<float>(k, 0), index->data(), static_cast<int64_t>(index->size()), Ptr<float>(k, 1));
    return Status::OK();
  });
}

}  // namespace strata::backend::cpu::ops
