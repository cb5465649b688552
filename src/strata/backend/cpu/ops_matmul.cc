// MatMul (with a fused bias and activation) as one oneDNN matmul primitive.
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

md MatrixView(const Shape& s, bool transpose) {
  const int64_t r = s[0], c = s[1];
  return transpose ? md({c, r}, dt::f32, dims{1, c}) : md({r, c}, dt::f32, dims{c, 1});
}

}  // namespace

Status PlanMatMul(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value a = n.inputs[0], b = n.inputs[1];
  const md va = MatrixView(a.shape(), n.attrs.transpose_a), vb = MatrixView(b.shape(), n.attrs.transpose_b);
  const FusedEpilogue fused = Epilogue(p, i, "MatMul");
  const int bias_node = fused.bias_node, act_node = fused.act_node;
  const Value out = fused.out;
  const int64_t M = n.out_shapes[0][0], N = n.out_shapes[0][1];
  const bool bf = p.bf16();
  const md src = bf ? md(va.dims(), dt::bf16, tag::ab) : va;
  const md wei = bf ? md(vb.dims(), dt::bf16, tag::any) : vb;
  const md dst({M, N}, OutType(p, out), tag::ab);
  auto d = bias_node >= 0 ? dnnl::matmul::desc(src, wei, md({1, N}, dt::f32, tag::ab), dst)
                          : dnnl::matmul::desc(src, wei, dst);
  dnnl::matmul::primitive_desc pd(d, fused.attr, p.engine());
  KernelInfo info = Info(p, i, "matmul", pd.impl_info_str());
  info.name = n.name + " (" + fused.name + ")";
  STRATA_ASSIGN_OR_RETURN(int ab, p.Use(a, pd.src_desc(), va));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(b, pd.weights_desc(), vb));
  DnnlArgs args = {{DNNL_ARG_SRC, ab, pd.src_desc()}, {DNNL_ARG_WEIGHTS, bb, pd.weights_desc()}};
  if (bias_node >= 0) {
    const md bias_md({1, N}, dt::f32, tag::ab);
    STRATA_ASSIGN_OR_RETURN(int biasb, p.Use(g.node(bias_node).inputs[1], bias_md, bias_md));
    args.push_back({DNNL_ARG_BIAS, biasb, bias_md});
    info.other_flops += g.OtherFlops(bias_node);
  }
  if (act_node >= 0) info.other_flops += g.OtherFlops(act_node);
  args.push_back({DNNL_ARG_DST, p.Define(out, pd.dst_desc()), pd.dst_desc()});
  return AppendPrimitive<dnnl::matmul>(p, std::move(info), pd, std::move(args));
}

void RegisterMatMulPlans(PlanTable& t) { Register(t, OpKind::kMatMul, PlanMatMul, kTakesBF16); }

}  // namespace strata::backend::cpu::ops
