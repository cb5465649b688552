// MatMul (with a fused bias and activation) as one oneDNN matmul primitive.
#include <string>

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
  const int bias_node = p.fusion.bias[i], act_node = p.fusion.activation[i];
  const Value out = act_node >= 0 ? g.output(act_node) : bias_node >= 0 ? g.output(bias_node) : g.output(i);
  const md va = MatrixView(a.shape(), n.attrs.transpose_a), vb = MatrixView(b.shape(), n.attrs.transpose_b);
  const int64_t M = n.out_shapes[0][0], N = n.out_shapes[0][1];
  const bool bf = p.bf16();
  const md src = bf ? md(va.dims(), dt::bf16, tag::ab) : va;
  const md wei = bf ? md(vb.dims(), dt::bf16, tag::any) : vb;
  const md dst({M, N}, OutType(p, out), tag::ab);
  dnnl::primitive_attr attr = p.Attr();
  std::string fused = "MatMul";
  if (bias_node >= 0) fused += "+BiasAdd";
  if (act_node >= 0) {
    const EltwiseAlg e = ForwardAlg(g.node(act_node).attrs.activation, false);
    dnnl::post_ops po;
    po.append_eltwise(1.0f, e.alg, e.alpha, e.beta);
    attr.set_post_ops(po);
    fused += std::string("+") + graph::ActivationName(g.node(act_node).attrs.activation);
  }
  auto d = bias_node >= 0 ? dnnl::matmul::desc(src, wei, md({1, N}, dt::f32, tag::ab), dst)
                          : dnnl::matmul::desc(src, wei, dst);
  dnnl::matmul::primitive_desc pd(d, attr, p.engine());
  Kernel k;
  k.info = Info(p, i, "matmul", pd.impl_info_str());
  k.info.name = n.name + " (" + fused + ")";
  STRATA_ASSIGN_OR_RETURN(int ab, p.Use(a, pd.src_desc(), va));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(b, pd.weights_desc(), vb));
  k.dnnl_args = {{DNNL_ARG_SRC, ab, pd.src_desc()}, {DNNL_ARG_WEIGHTS, bb, pd.weights_desc()}};
  if (bias_node >= 0) {
    const md bias_md({1, N}, dt::f32, tag::ab);
    STRATA_ASSIGN_OR_RETURN(int biasb, p.Use(g.node(bias_node).inputs[1], bias_md, bias_md));
    k.dnnl_args.push_back({DNNL_ARG_BIAS, biasb, bias_md});
    k.info.other_flops += g.OtherFlops(bias_node);
  }
  if (act_node >= 0) k.info.other_flops += g.OtherFlops(act_node);
  const int yb = p.Define(out, pd.dst_desc());
  k.dnnl_args.push_back({DNNL_ARG_DST, yb, pd.dst_desc()});
  AddPrim(k, pd, p);
  k.prim = dnnl::matmul(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

}  // namespace strata::backend::cpu::ops
