// The reduction family on the cpu backend: sums and means as oneDNN reductions, or Strata's vector
// loop over a middle run of axes (broadcast_kernels.h); Broadcast, their gradient, as Strata's
// gather (elementwise_kernels.h).
#include <memory>
#include <vector>

#include "strata/backend/cpu/broadcast_kernels.h"
#include "strata/backend/cpu/elementwise_kernels.h"
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

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

Status PlanBroadcast(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  auto index = std::make_shared<const std::vector<int32_t>>(BroadcastSourceIndex(n.out_shapes[0], n.attrs.axes));
  return PlanHand(p, i, "broadcast", {{n.inputs[0], dt::f32}}, {g.output(i)}, [index](Kernel& k, uint64_t) {
    Gather(Ptr<float>(k, 0), index->data(), static_cast<int64_t>(index->size()), Ptr<float>(k, 1));
    return Status::OK();
  });
}

void RegisterReducePlans(PlanTable& t) {
  Register(t, OpKind::kReduceSum, PlanReduce);
  Register(t, OpKind::kReduceMean, PlanReduce);
  Register(t, OpKind::kBroadcast, PlanBroadcast);
}

}  // namespace strata::backend::cpu::ops
