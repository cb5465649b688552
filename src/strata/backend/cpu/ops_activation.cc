// The activation family on the cpu backend: activations and their gradients as oneDNN eltwise
// primitives; the hard sigmoid (which oneDNN 2.6 lacks; it gates squeeze-and-excite: [N, 1, 1,
// C], a few thousand elements) and the softmaxes, masked or not, and their gradient as Strata's
// own loops (softmax_kernels.h: oneDNN 2.6 has no masked softmax and a jit softmax backward only
// for AVX-512; the plain softmax shares the masked one's row kernel).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "strata/backend/cpu/ops_internal.h"
#include "strata/backend/cpu/softmax_kernels.h"

namespace strata::backend::cpu::ops {

namespace {

// relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1).
Status PlanHardSigmoid(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Value x = g.node(i).inputs[0];
  const int64_t count = x.shape().num_elements();
  return PlanHand(p, i, "hard_sigmoid", {{x, dt::f32}}, {g.output(i)}, [=](Kernel& k, uint64_t) {
    const float* in = Ptr<float>(k, 0);
    float* out = Ptr<float>(k, 1);
    for (int64_t e = 0; e < count; ++e) out[e] = std::clamp(in[e] * (1.0f / 6) + 0.5f, 0.0f, 1.0f);
    return Status::OK();
  });
}

// dx = dy / 6 where the output is strictly inside (0, 1), else 0.
Status PlanHardSigmoidGrad(Planner& p, int i) {  // inputs y, dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t count = n.out_shapes[0].num_elements();
  return PlanHand(p, i, "hard_sigmoid_bwd", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}}, {g.output(i)},
                  [=](Kernel& k, uint64_t) {
                    const float *y = Ptr<float>(k, 0), *dy = Ptr<float>(k, 1);
                    float* dx = Ptr<float>(k, 2);
                    for (int64_t e = 0; e < count; ++e) dx[e] = y[e] > 0 && y[e] < 1 ? dy[e] * (1.0f / 6) : 0.0f;
                    return Status::OK();
                  });
}

}  // namespace

Status PlanActivation(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  if (n.attrs.activation == Activation::kHardSigmoid) return PlanHardSigmoid(p, i);
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
  if (n.attrs.activation == Activation::kHardSigmoid) return PlanHardSigmoidGrad(p, i);
  const Value v = n.inputs[0], dy = n.inputs[1];
  const EltwiseAlg a = ForwardAlg(n.attrs.activation, true);
  const md data = DataDesc(p, v);
  // A blocked layout whose channels do not fill the last block (C = 184 in nChw16c) is not
  // dense, and oneDNN 2.6 then runs some backward algorithms (hardswish) only in its reference
  // implementation, 15-30x slower: a fifth of MobileNetV3's training step. The gradient is
  // elementwise and the padding is zero in v and dy (oneDNN keeps it so), where
  // dx = dy * f'(0) = 0 keeps it zero: the same buffers run as one flat vector.
  const size_t elem = data.data_type() == dt::bf16 ? 2 : 4;
  const bool padded = data.get_size() != static_cast<size_t>(v.shape().num_elements()) * elem;
  const md run = padded ? md({static_cast<int64_t>(data.get_size() / elem)}, data.data_type(), tag::a) : data;
  auto fd = dnnl::eltwise_forward::desc(prop_kind::forward_training, a.alg, run, a.alpha, a.beta);
  dnnl::eltwise_forward::primitive_desc hint(fd, p.Attr(), p.engine());
  auto d = dnnl::eltwise_backward::desc(a.alg, run, run, a.alpha, a.beta);
  dnnl::eltwise_backward::primitive_desc pd(d, p.Attr(), p.engine(), hint);
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(v, data));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, data));
  const int xb = p.Define(g.output(i), data);
  return AppendPrimitive<dnnl::eltwise_backward>(
      p, Info(p, i, std::string("eltwise_bwd_") + graph::ActivationName(n.attrs.activation), pd.impl_info_str()), pd,
      {{a.uses_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, vb, run}, {DNNL_ARG_DIFF_DST, db, run}, {DNNL_ARG_DIFF_SRC, xb, run}});
}

// The softmaxes: Strata's own row kernels (softmax_kernels.h) over the f32 row-major inputs of
// node i, `run(inputs..., output)` with the widest body this host allows.
template <class Run>
Status PlanSoftmaxRows(Planner& p, int i, const std::string& op, Run run) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  std::vector<std::pair<Value, dt>> ins;
  for (const Value& v : n.inputs) ins.push_back({v, dt::f32});
  const KernelIsa isa = BestKernelIsa();
  return PlanHand(
      p, i, op, ins, {g.output(i)},
      [=](Kernel& k, uint64_t) {
        run(k, isa);
        return Status::OK();
      },
      KernelImplName(isa));
}

Status PlanSoftmax(Planner& p, int i) {
  const Shape& xs = p.graph().node(i).inputs[0].shape();
  const int64_t S = xs[-1], rows = xs.num_elements() / S;
  return PlanSoftmaxRows(p, i, "softmax", [=](Kernel& k, KernelIsa isa) {
    Softmax(Ptr<float>(k, 0), rows, S, Ptr<float>(k, 1), isa);
  });
}

// Inputs y, dy (oneDNN 2.6 has a jit softmax backward only for AVX-512: its reference kernel on
// AVX2 machines).
Status PlanSoftmaxGrad(Planner& p, int i) {
  const Shape& ys = p.graph().node(i).inputs[0].shape();
  const int64_t S = ys[-1], rows = ys.num_elements() / S;
  return PlanSoftmaxRows(p, i, "softmax_bwd", [=](Kernel& k, KernelIsa isa) {
    SoftmaxBackward(Ptr<float>(k, 0), Ptr<float>(k, 1), rows, S, Ptr<float>(k, 2), isa);
  });
}

// Inputs x [B, G..., T, S], mask [B, T, S].
Status PlanMaskedSoftmax(Planner& p, int i) {
  const Shape& xs = p.graph().node(i).inputs[0].shape();
  const int64_t B = xs[0], T = xs[-2], S = xs[-1], G = xs.num_elements() / (B * T * S);
  return PlanSoftmaxRows(p, i, "masked_softmax", [=](Kernel& k, KernelIsa isa) {
    MaskedSoftmax(Ptr<float>(k, 0), Ptr<float>(k, 1), B, G, T, S, Ptr<float>(k, 2), isa);
  });
}

void RegisterActivationPlans(PlanTable& t) {
  Register(t, OpKind::kActivation, PlanActivation, kTakesBF16);
  Register(t, OpKind::kActivationGrad, PlanActivationGrad, kTakesBF16);
  Register(t, OpKind::kSoftmax, PlanSoftmax);
  Register(t, OpKind::kSoftmaxGrad, PlanSoftmaxGrad);
  Register(t, OpKind::kMaskedSoftmax, PlanMaskedSoftmax);
}

}  // namespace strata::backend::cpu::ops
