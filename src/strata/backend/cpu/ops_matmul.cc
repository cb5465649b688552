// MatMul (with a fused bias and activation) as one oneDNN matmul primitive; a batch of
// matrices ([B, M, K] x [B, K, N]) as one batched primitive.
#include <utility>

#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

// A shape's dims in the graph's own axis order (Dims reorders rank 4 to oneDNN's NCHW).
dims GraphOrderDims(const Shape& s) { return dims(s.dims().begin(), s.dims().end()); }

// The operand's plain row-major bytes as oneDNN's [batch..., rows, cols], transposed by strides.
md MatrixView(const Shape& s, bool transpose) {
  const int rank = s.rank();
  const int64_t c = s[-1];
  dims shape = GraphOrderDims(s), strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * s[d + 1];
  if (transpose) {
    std::swap(shape[rank - 2], shape[rank - 1]);
    strides[rank - 2] = 1;
    strides[rank - 1] = c;
  }
  return md(shape, dt::f32, strides);
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
  const Shape& ys = n.out_shapes[0];
  const bool batched = ys.rank() > 2;
  const int64_t N = ys[-1];
  const bool bf = p.bf16();
  // Row-major in the graph's axis order (a rank-4 batch is not an NCHW image here).
  const md src = bf ? RowMajorDesc(va.dims(), dt::bf16) : va;
  // A batch's second operand is data (attention's keys and values), not a weight to pre-pack.
  const md wei = bf ? (batched ? RowMajorDesc(vb.dims(), dt::bf16) : md(vb.dims(), dt::bf16, tag::any)) : vb;
  const md dst = RowMajorDesc(GraphOrderDims(ys), OutType(p, out));
  dims bias_dims(ys.rank(), 1);
  bias_dims.back() = N;
  const md bias_md = RowMajorDesc(bias_dims, dt::f32);
  auto d = bias_node >= 0 ? dnnl::matmul::desc(src, wei, bias_md, dst) : dnnl::matmul::desc(src, wei, dst);
  dnnl::matmul::primitive_desc pd(d, fused.attr, p.engine());
  KernelInfo info = Info(p, i, "matmul", pd.impl_info_str());
  info.name = n.name + " (" + fused.name + ")";
  STRATA_ASSIGN_OR_RETURN(int ab, p.Use(a, pd.src_desc(), va));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(b, pd.weights_desc(), vb));
  DnnlArgs args = {{DNNL_ARG_SRC, ab, pd.src_desc()}, {DNNL_ARG_WEIGHTS, bb, pd.weights_desc()}};
  if (bias_node >= 0) {
    STRATA_ASSIGN_OR_RETURN(int biasb, p.Use(g.node(bias_node).inputs[1], bias_md, bias_md));
    args.push_back({DNNL_ARG_BIAS, biasb, bias_md});
    info.other_flops += g.OtherFlops(bias_node);
  }
  if (act_node >= 0) info.other_flops += g.OtherFlops(act_node);
  args.push_back({DNNL_ARG_DST, p.Define(out, pd.dst_desc(), RowMajorDesc(GraphOrderDims(ys), pd.dst_desc().data_type())),
                  pd.dst_desc()});
  return AppendPrimitive<dnnl::matmul>(p, std::move(info), pd, std::move(args));
}

void RegisterMatMulPlans(PlanTable& t) { Register(t, OpKind::kMatMul, PlanMatMul, kTakesBF16); }

}  // namespace strata::backend::cpu::ops
