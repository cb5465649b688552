// Node -> kernels for the cpu backend: oneDNN primitives where oneDNN has the op (conv,
// matmul, batch norm, pooling, eltwise, softmax, binary, concat, reduction, reorder), and
// hand-written loops where it has none (losses, dropout, optimizer updates, broadcast).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "strata/backend/cpu/optimizer_kernels.h"
#include "strata/backend/cpu/planner.h"
#include "strata/backend/cpu/winograd.h"
#include "strata/backend/dropout_mask.h"
#include "strata/core/cpu.h"

namespace strata::backend::cpu {

using graph::Activation;
using graph::Node;
using graph::OpKind;
using graph::Value;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

std::string ShapeStr(const Value& v) { return std::string(DTypeName(v.dtype())) + v.shape().ToString(); }

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

md Any(const dims& d, dt t) { return md(d, t, tag::any); }

// oneDNN dims of a graph shape (rank 4 [N, H, W, C] -> {N, C, H, W}).
dims Dims(const Shape& s) { return PlainDesc(s, dt::f32).dims(); }
int DnnlAxis(int rank, int axis) {
  if (rank != 4) return axis;
  static const int kMap[4] = {0, 2, 3, 1};
  return kMap[axis];
}

bool AcceptsBF16(OpKind k) {
  switch (k) {
    case OpKind::kConv2D: case OpKind::kConv2DBackpropInput: case OpKind::kConv2DBackpropFilter:
    case OpKind::kMatMul: case OpKind::kBatchNorm: case OpKind::kBatchNormInference: case OpKind::kBatchNormGrad:
    case OpKind::kMaxPool: case OpKind::kMaxPoolGrad: case OpKind::kAvgPool: case OpKind::kAvgPoolGrad:
    case OpKind::kActivation: case OpKind::kActivationGrad: case OpKind::kReshape: case OpKind::kAdd:
    case OpKind::kSub: case OpKind::kMultiply: case OpKind::kConcat: case OpKind::kBiasAdd:
      return true;
    default: return false;
  }
}

// The data type a conv/matmul writes v in: bf16 under mixed precision when every reader
// takes bf16 (a hand-written f32 reader would only reorder it back).
dt OutType(Planner& p, Value v) {
  if (!p.bf16() || p.IsPinned(v)) return dt::f32;
  for (int pos : p.schedule.consumers[v.node][v.output]) {
    const int c = p.schedule.order[pos];
    const int head = p.fusion.absorbed_by[c] >= 0 ? p.fusion.absorbed_by[c] : c;
    if (!AcceptsBF16(p.graph().node(head).kind)) return dt::f32;
  }
  return dt::bf16;
}

dt ComputeType(Planner& p) { return p.bf16() ? dt::bf16 : dt::f32; }

struct EltwiseAlg {
  algorithm alg;
  float alpha, beta;
  bool uses_dst;
};
EltwiseAlg ForwardAlg(Activation a, bool for_backward) {
  switch (a) {
    case Activation::kRelu: return {for_backward ? algorithm::eltwise_relu_use_dst_for_bwd : algorithm::eltwise_relu, 0, 0, for_backward};
    case Activation::kRelu6: return {for_backward ? algorithm::eltwise_clip_v2_use_dst_for_bwd : algorithm::eltwise_clip_v2, 0, 6, for_backward};
    case Activation::kSigmoid: return {for_backward ? algorithm::eltwise_logistic_use_dst_for_bwd : algorithm::eltwise_logistic, 0, 0, for_backward};
    case Activation::kTanh: return {for_backward ? algorithm::eltwise_tanh_use_dst_for_bwd : algorithm::eltwise_tanh, 0, 0, for_backward};
    case Activation::kGelu: return {algorithm::eltwise_gelu_erf, 0, 0, false};
    case Activation::kSwish: return {algorithm::eltwise_swish, 1, 0, false};
    case Activation::kLinear: return {algorithm::eltwise_linear, 1, 0, false};
  }
  return {algorithm::eltwise_linear, 1, 0, false};
}

void AddPrim(Kernel& k, const dnnl::primitive_desc_base& pd, Planner& p) {
  p.NoteScratchpad(pd);
  k.dnnl_args.push_back({DNNL_ARG_SCRATCHPAD, -2, pd.scratchpad_desc()});
}

// Conv geometry in oneDNN terms.
struct ConvGeo {
  dims strides, dilates, pad_l, pad_r;
};
ConvGeo Geometry(const Shape& x, const Shape& k, const graph::Conv2DOptions& o) {
  const graph::WindowDim h = graph::ComputeWindow(x[1], k[0], o.stride_h, o.dilation_h, o.padding);
  const graph::WindowDim w = graph::ComputeWindow(x[2], k[1], o.stride_w, o.dilation_w, o.padding);
  return {{o.stride_h, o.stride_w}, {o.dilation_h - 1, o.dilation_w - 1}, {h.pad_before, w.pad_before},
          {h.pad_after, w.pad_after}};
}
dims WeightsDims(const Shape& k, int groups) {
  if (groups == 1) return {k[3], k[2], k[0], k[1]};
  return {groups, k[3] / groups, k[2], k[0], k[1]};
}

// Winograd applies to f32 convolutions only (oneDNN has no bf16 Winograd), with input and
// output channels in whole blocks of 16: oneDNN pads channels to 16, so the first layer of a
// grayscale model (1 -> 32 channels) runs 5x slower than direct (measured). Whether oneDNN
// implements it for the rest of the shape (3x3, stride 1) is its call: an unimplemented
// descriptor throws and the caller falls back to direct.
bool TryWinograd(Planner& p, const Shape& kernel, int groups) {
  return !p.bf16() && p.options().conv_algorithm == ConvAlgorithm::kAuto && groups == 1 && kernel[2] % 16 == 0 &&
         kernel[3] % 16 == 0;
}

// make(algorithm) -> a primitive descriptor: Winograd's when tried and implemented, else direct's.
template <class Make>
auto WinogradOrDirect(bool try_winograd, const Make& make) -> decltype(make(algorithm::convolution_direct)) {
  if (try_winograd) {
    try {
      return make(algorithm::convolution_winograd);
    } catch (const dnnl::error&) {  // not implemented for this shape: direct below
    }
  }
  return make(algorithm::convolution_direct);
}

Result<dnnl::convolution_forward::primitive_desc> ConvForwardPd(Planner& p, int fwd, const Shape& xs, const Shape& ks,
                                                                const Shape& ys, const graph::Conv2DOptions& o,
                                                                bool bias, dt out, const dnnl::primitive_attr& attr,
                                                                prop_kind prop) {
  const dt ct = ComputeType(p);
  const ConvGeo geo = Geometry(xs, ks, o);
  const md src = Any(Dims(xs), ct), wei = Any(WeightsDims(ks, o.groups), ct), dst = Any(Dims(ys), out);
  auto pd = [&](algorithm alg) {
    auto d = bias ? dnnl::convolution_forward::desc(prop, alg, src, wei, md({ks[3]}, dt::f32, tag::a), dst,
                                                    geo.strides, geo.dilates, geo.pad_l, geo.pad_r)
                  : dnnl::convolution_forward::desc(prop, alg, src, wei, dst, geo.strides, geo.dilates, geo.pad_l,
                                                    geo.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, attr, p.engine());
  };
  return WinogradOrDirect(TryWinograd(p, ks, o.groups), pd);
}

// ---- Strata's AVX2 Winograd (winograd.h) --------------------------------------------------
//
// oneDNN 2.6 has Winograd only for AVX-512: on an AVX2 host every 3x3 convolution would run
// direct. Under kAuto, an f32 3x3 / stride 1 / dilation 1 / one-group convolution with
// channels in blocks of 8, for which oneDNN's Winograd descriptor throws (unimplemented), on a
// host with AVX2, runs Strata's F(4x4, 3x3) forward and backward-data instead, in the
// nChw8c layout oneDNN's AVX2 direct convolution would have used (so its neighbours, and
// the backward-weights convolution that takes the direct forward descriptor as its hint,
// see the same layouts as without it).

// The winograd.h geometry of a convolution whose forward takes xs to ys, if Strata's
// Winograd may run it and pays (everything but the oneDNN and layout checks).
std::optional<winograd::Geometry> HandWinograd(Planner& p, const Shape& xs, const Shape& ks, const Shape& ys,
                                               const graph::Conv2DOptions& o) {
  if (p.bf16() || p.options().conv_algorithm != ConvAlgorithm::kAuto || !HostIsa().avx2) return std::nullopt;
  // Single-threaded: a program given more threads keeps oneDNN's (parallel) direct convolution.
  if (p.options().threads > 1) return std::nullopt;
  if (xs.rank() != 4 || ks[0] != 3 || ks[1] != 3 || o.stride_h != 1 || o.stride_w != 1 || o.dilation_h != 1 ||
      o.dilation_w != 1 || o.groups != 1)
    return std::nullopt;
  const ConvGeo geo = Geometry(xs, ks, o);
  winograd::Geometry g;
  g.batch = xs[0];
  g.in_channels = ks[2];
  g.out_channels = ks[3];
  g.in_h = xs[1];
  g.in_w = xs[2];
  g.out_h = ys[1];
  g.out_w = ys[2];
  g.pad_top = static_cast<int>(geo.pad_l[0]);
  g.pad_left = static_cast<int>(geo.pad_l[1]);
  if (!winograd::Supported(g) || !winograd::Profitable(g)) return std::nullopt;
  return g;
}

// Whether oneDNN implements Winograd for this f32 convolution (its descriptor does not throw).
bool OneDnnHasWinograd(Planner& p, const Shape& xs, const Shape& ks, const Shape& ys, const graph::Conv2DOptions& o) {
  const ConvGeo geo = Geometry(xs, ks, o);
  try {
    dnnl::convolution_forward::desc d(prop_kind::forward_training, algorithm::convolution_winograd,
                                      Any(Dims(xs), dt::f32), Any(WeightsDims(ks, o.groups), dt::f32),
                                      Any(Dims(ys), dt::f32), geo.strides, geo.dilates, geo.pad_l, geo.pad_r);
    dnnl::convolution_forward::primitive_desc pd(d, p.Attr(), p.engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

md Blocked8(const Shape& s) { return md(Dims(s), dt::f32, tag::aBcd8b); }

// Appends the Winograd kernel: src (blocked), plain HWIO weights, optional plain bias -> out.
Status AppendWinograd(Planner& p, KernelInfo info, const winograd::Geometry& geo, winograd::Pass pass, bool relu,
                      Value src, Value weights, std::optional<Value> bias, Value out) {
  auto conv = std::make_shared<const winograd::Conv3x3>(geo, pass, winograd::Isa::kAvx2, relu);
  Kernel k;
  k.info = std::move(info);
  k.info.impl = "strata:avx2-winograd";
  STRATA_ASSIGN_OR_RETURN(int sb, p.Use(src, Blocked8(src.shape())));
  STRATA_ASSIGN_OR_RETURN(int wb, p.Use(weights, PlainDesc(weights.shape(), dt::f32)));
  k.bufs = {sb, wb};
  if (bias) {
    STRATA_ASSIGN_OR_RETURN(int bb, p.Use(*bias, PlainDesc(bias->shape(), dt::f32)));
    k.bufs.push_back(bb);
  }
  const int scratch = p.NewBuffer(conv->scratch_bytes());  // live at this kernel only: shared
  p.Touch(scratch);
  k.bufs.push_back(scratch);
  k.bufs.push_back(p.Define(out, Blocked8(out.shape())));
  const bool has_bias = bias.has_value();
  k.fn = [conv, has_bias](Kernel& k, uint64_t) {
    const float* b = has_bias ? reinterpret_cast<const float*>(k.ptrs[2]) : nullptr;
    const size_t s = has_bias ? 3 : 2;
    conv->Run(reinterpret_cast<const float*>(k.ptrs[0]), reinterpret_cast<const float*>(k.ptrs[1]), b,
              reinterpret_cast<float*>(k.ptrs[s + 1]), k.ptrs[s]);
    return Status::OK();
  };
  p.Append(std::move(k));
  return p.FinishOutputs();
}

bool HasBackward(Planner& p, int fwd) {
  const graph::Graph& g = p.graph();
  for (int j : p.schedule.order)
    if (g.node(j).attrs.forward_node == fwd) return true;
  return false;
}


// ---- convolution ---------------------------------------------------------------------------

Status PlanConv(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0], w = n.inputs[1];
  const int bias_node = p.fusion.bias[i], act_node = p.fusion.activation[i];
  const Value out = act_node >= 0 ? g.output(act_node) : bias_node >= 0 ? g.output(bias_node) : g.output(i);
  dnnl::primitive_attr attr = p.Attr();
  std::string fused = "Conv2D";
  if (bias_node >= 0) fused += "+BiasAdd";
  if (act_node >= 0) {
    const EltwiseAlg a = ForwardAlg(g.node(act_node).attrs.activation, false);
    dnnl::post_ops po;
    po.append_eltwise(1.0f, a.alg, a.alpha, a.beta);
    attr.set_post_ops(po);
    fused += std::string("+") + graph::ActivationName(g.node(act_node).attrs.activation);
  }
  const prop_kind prop = HasBackward(p, i) ? prop_kind::forward_training : prop_kind::forward_inference;
  STRATA_ASSIGN_OR_RETURN(auto pd, ConvForwardPd(p, i, x.shape(), w.shape(), n.out_shapes[0], n.attrs.conv,
                                                 bias_node >= 0, OutType(p, out), attr, prop));
  p.conv_pd[i] = std::make_shared<dnnl::convolution_forward::primitive_desc>(pd);  // also the backward hint
  Kernel k;
  k.info = Info(p, i, "conv_fwd", pd.impl_info_str());
  k.info.name = n.name + " (" + fused + ")";
  // Strata's Winograd where oneDNN has none; its epilogue does bias and ReLU only.
  const bool relu_or_none = act_node < 0 || g.node(act_node).attrs.activation == Activation::kRelu;
  if (auto geo = HandWinograd(p, x.shape(), w.shape(), n.out_shapes[0], n.attrs.conv);
      geo && relu_or_none && pd.src_desc() == Blocked8(x.shape()) && pd.dst_desc() == Blocked8(out.shape()) &&
      !OneDnnHasWinograd(p, x.shape(), w.shape(), n.out_shapes[0], n.attrs.conv)) {
    if (bias_node >= 0) k.info.other_flops += g.OtherFlops(bias_node);
    if (act_node >= 0) k.info.other_flops += g.OtherFlops(act_node);
    std::optional<Value> bias;
    if (bias_node >= 0) bias = g.node(bias_node).inputs[1];
    return AppendWinograd(p, k.info, *geo, winograd::Pass::kForward, act_node >= 0, x, w, bias, out);
  }
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int wb, p.Use(w, pd.weights_desc(), WeightsView(w.shape(), n.attrs.conv.groups, dt::f32)));
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_WEIGHTS, wb, pd.weights_desc()}};
  if (bias_node >= 0) {
    STRATA_ASSIGN_OR_RETURN(int bb, p.Use(g.node(bias_node).inputs[1], pd.bias_desc()));
    k.dnnl_args.push_back({DNNL_ARG_BIAS, bb, pd.bias_desc()});
    k.info.other_flops += g.OtherFlops(bias_node);
  }
  if (act_node >= 0) k.info.other_flops += g.OtherFlops(act_node);
  const int yb = p.Define(out, pd.dst_desc());
  k.dnnl_args.push_back({DNNL_ARG_DST, yb, pd.dst_desc()});
  AddPrim(k, pd, p);
  k.prim = dnnl::convolution_forward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Result<std::shared_ptr<dnnl::convolution_forward::primitive_desc>> ConvHint(Planner& p, const Node& n, int fwd,
                                                                            const Shape& xs, const Shape& ks,
                                                                            const Shape& ys) {
  auto it = p.conv_pd.find(fwd);
  if (it != p.conv_pd.end()) return it->second;
  STRATA_ASSIGN_OR_RETURN(auto pd, ConvForwardPd(p, fwd, xs, ks, ys, n.attrs.conv, false, ComputeType(p), p.Attr(),
                                                 prop_kind::forward_training));
  return std::make_shared<dnnl::convolution_forward::primitive_desc>(pd);
}

Status PlanConvBackpropInput(Planner& p, int i) {  // inputs dy, kernel
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value dy = n.inputs[0], w = n.inputs[1];
  const Shape& xs = n.out_shapes[0];
  const ConvGeo geo = Geometry(xs, w.shape(), n.attrs.conv);
  const dt ct = ComputeType(p);
  STRATA_ASSIGN_OR_RETURN(auto hint, ConvHint(p, n, n.attrs.forward_node, xs, w.shape(), dy.shape()));
  auto make = [&](algorithm alg) {
    auto d = dnnl::convolution_backward_data::desc(alg, Any(Dims(xs), OutType(p, g.output(i))),
                                                   Any(WeightsDims(w.shape(), n.attrs.conv.groups), ct),
                                                   Any(Dims(dy.shape()), ct), geo.strides, geo.dilates, geo.pad_l,
                                                   geo.pad_r);
    return dnnl::convolution_backward_data::primitive_desc(d, p.Attr(), p.engine(), *hint);
  };
  const dnnl::convolution_backward_data::primitive_desc pd =
      WinogradOrDirect(TryWinograd(p, w.shape(), n.attrs.conv.groups), make);
  Kernel k;
  k.info = Info(p, i, "conv_bwd_data", pd.impl_info_str());
  if (auto geo = HandWinograd(p, xs, w.shape(), dy.shape(), n.attrs.conv);
      geo && pd.diff_dst_desc() == Blocked8(dy.shape()) && pd.diff_src_desc() == Blocked8(xs) &&
      !OneDnnHasWinograd(p, xs, w.shape(), dy.shape(), n.attrs.conv))
    return AppendWinograd(p, k.info, *geo, winograd::Pass::kBackwardData, false, dy, w, std::nullopt, g.output(i));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  STRATA_ASSIGN_OR_RETURN(int wb, p.Use(w, pd.weights_desc(), WeightsView(w.shape(), n.attrs.conv.groups, dt::f32)));
  const int xb = p.Define(g.output(i), pd.diff_src_desc());
  k.dnnl_args = {{DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()}, {DNNL_ARG_WEIGHTS, wb, pd.weights_desc()},
                 {DNNL_ARG_DIFF_SRC, xb, pd.diff_src_desc()}};
  AddPrim(k, pd, p);
  k.prim = dnnl::convolution_backward_data(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanConvBackpropFilter(Planner& p, int i) {  // inputs x, dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0], dy = n.inputs[1];
  const Shape& ks = n.out_shapes[0];
  const int bias_grad = p.fusion.bias_grad[i];
  const ConvGeo geo = Geometry(x.shape(), ks, n.attrs.conv);
  const dt ct = ComputeType(p);
  STRATA_ASSIGN_OR_RETURN(auto hint, ConvHint(p, n, n.attrs.forward_node, x.shape(), ks, dy.shape()));
  const md src = Any(Dims(x.shape()), ct), dwei = Any(WeightsDims(ks, n.attrs.conv.groups), dt::f32),
           ddst = Any(Dims(dy.shape()), ct);
  auto d = bias_grad >= 0
               ? dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, src, dwei,
                                                          md({ks[3]}, dt::f32, tag::a), ddst, geo.strides, geo.dilates,
                                                          geo.pad_l, geo.pad_r)
               : dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, src, dwei, ddst, geo.strides,
                                                          geo.dilates, geo.pad_l, geo.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(d, p.Attr(), p.engine(), *hint);
  Kernel k;
  k.info = Info(p, i, "conv_bwd_weights", pd.impl_info_str());
  if (bias_grad >= 0) {
    k.info.name = n.name + " (Conv2DBackpropFilter+BiasAddGrad)";
    k.info.other_flops += g.OtherFlops(bias_grad);
  }
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  const int wb = p.Define(g.output(i), pd.diff_weights_desc(), WeightsView(ks, n.attrs.conv.groups, dt::f32));
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
                 {DNNL_ARG_DIFF_WEIGHTS, wb, pd.diff_weights_desc()}};
  if (bias_grad >= 0) {
    const int bb = p.Define(g.output(bias_grad), pd.diff_bias_desc());
    k.dnnl_args.push_back({DNNL_ARG_DIFF_BIAS, bb, pd.diff_bias_desc()});
  }
  AddPrim(k, pd, p);
  k.prim = dnnl::convolution_backward_weights(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// ---- matmul ----------------------------------------------------------------------------------

md MatrixView(const Shape& s, bool transpose) {
  const int64_t r = s[0], c = s[1];
  return transpose ? md({c, r}, dt::f32, dims{1, c}) : md({r, c}, dt::f32, dims{c, 1});
}

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

// ---- batch norm ------------------------------------------------------------------------------

// Synchronized batch norm: statistics of the global batch. Strata's own kernels over the plain
// [M, C] layout (oneDNN's batch norm computes statistics of its own input only): per-channel
// sums in f64, then the program's cross-replica sum adds every replica's (replica order:
// deterministic), then normalization with the global mean and (biased) variance. Without a
// cross-replica sum this is the ordinary batch norm of the local batch.

template <typename T>
T* Ptr(Kernel& k, int j);
Status PlanHand(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, dt>>& ins,
                const std::vector<Value>& outs, KernelFn fn);

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
  Status st = PlanHand(
      p, i, "bn_fwd_sync",
      {{x, dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}, {n.inputs[3], dt::f32}, {n.inputs[4], dt::f32}},
      {g.output(i, 0), g.output(i, 1), g.output(i, 2)}, [=](Kernel& k, uint64_t) -> Status {
        const float* xp = Ptr<float>(k, 0);  // [M, C]
        const float* gamma = Ptr<float>(k, 1);
        const float* beta = Ptr<float>(k, 2);
        float* mm = Ptr<float>(k, 3);  // moving statistics, updated in place
        float* mv = Ptr<float>(k, 4);
        float* y = Ptr<float>(k, 5);  // [M, C]
        float* mean = Ptr<float>(k, 6);
        float* var = Ptr<float>(k, 7);
        double* s1 = acc->data();
        double* s2 = s1 + C;
        std::fill(acc->begin(), acc->end(), 0.0);
        for (int64_t m = 0; m < M; ++m) {
          const float* row = xp + m * C;
          for (int64_t c = 0; c < C; ++c) {
            const double v = row[c];
            s1[c] += v;
            s2[c] += v * v;
          }
        }
        s1[2 * C] = static_cast<double>(M);
        if (*sum) STRATA_RETURN_IF_ERROR((*sum)(s1, 2 * C + 1));
        const double total = s1[2 * C];
        const float unbias = total > 1 ? static_cast<float>(total / (total - 1)) : 1.0f;
        for (int64_t c = 0; c < C; ++c) {
          const double mu = s1[c] / total;
          mean[c] = static_cast<float>(mu);
          var[c] = static_cast<float>(std::max(s2[c] / total - mu * mu, 0.0));
          // Kernel-local per-channel affine form: y = x * a + b.
          const double a = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
          s1[c] = a;
          s2[c] = beta[c] - mu * a;
          mm[c] = mm[c] * mom + mean[c] * (1 - mom);
          mv[c] = mv[c] * mom + var[c] * unbias * (1 - mom);
        }
        for (int64_t m = 0; m < M; ++m) {
          const float* row = xp + m * C;
          float* out = y + m * C;
          for (int64_t c = 0; c < C; ++c) out[c] = static_cast<float>(row[c] * s1[c] + s2[c]);
        }
        return Status::OK();
      });
  return st;
}

// Backward: inputs x [M, C], gamma, batch mean, batch variance [C], dy [M, C]; outputs
// dx [M, C], dgamma, dbeta [C]. dgamma and dbeta are this replica's sums (the model averages
// gradients over replicas, like every other parameter's); dx uses the global sums:
//   dx = gamma / sigma * (dy - sum(dy) / N - x_hat * sum(dy * x_hat) / N)   (sums over all N).
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
      {g.output(i, 0), g.output(i, 1), g.output(i, 2)}, [=](Kernel& k, uint64_t) -> Status {
        const float* xp = Ptr<float>(k, 0);  // [M, C]
        const float* gamma = Ptr<float>(k, 1);
        const float* mean = Ptr<float>(k, 2);
        const float* var = Ptr<float>(k, 3);
        const float* dy = Ptr<float>(k, 4);  // [M, C]
        float* dx = Ptr<float>(k, 5);        // [M, C]
        float* dgamma = Ptr<float>(k, 6);
        float* dbeta = Ptr<float>(k, 7);
        double* s1 = acc->data();
        double* s2 = s1 + C;
        double* istd = s1 + 2 * C + 1;
        std::fill(s1, s1 + 2 * C + 1, 0.0);
        for (int64_t c = 0; c < C; ++c) istd[c] = 1 / std::sqrt(static_cast<double>(var[c]) + eps);
        for (int64_t m = 0; m < M; ++m) {
          const float* xr = xp + m * C;
          const float* dr = dy + m * C;
          for (int64_t c = 0; c < C; ++c) {
            s1[c] += dr[c];
            s2[c] += dr[c] * ((xr[c] - static_cast<double>(mean[c])) * istd[c]);
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          dbeta[c] = static_cast<float>(s1[c]);
          dgamma[c] = static_cast<float>(s2[c]);
        }
        s1[2 * C] = static_cast<double>(M);
        if (*sum) STRATA_RETURN_IF_ERROR((*sum)(s1, 2 * C + 1));
        const double total = s1[2 * C];
        for (int64_t c = 0; c < C; ++c) {
          s1[c] /= total;  // mean dy
          s2[c] /= total;  // mean dy * x_hat
        }
        for (int64_t m = 0; m < M; ++m) {
          const float* xr = xp + m * C;
          const float* dr = dy + m * C;
          float* out = dx + m * C;
          for (int64_t c = 0; c < C; ++c) {
            const double xhat = (xr[c] - static_cast<double>(mean[c])) * istd[c];
            out[c] = static_cast<float>(gamma[c] * istd[c] * (dr[c] - s1[c] - xhat * s2[c]));
          }
        }
        return Status::OK();
      });
}


Status PlanBatchNorm(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const bool training = n.kind == OpKind::kBatchNorm;
  if (training && n.attrs.bn.synchronized) return PlanSyncBatchNorm(p, i);
  const Value x = n.inputs[0];
  const int act_node = p.fusion.activation[i];
  const Value out = act_node >= 0 ? g.output(act_node) : g.output(i);
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (act_node >= 0) flags |= dnnl::normalization_flags::fuse_norm_relu;
  if (!training) flags |= dnnl::normalization_flags::use_global_stats;
  md data = p.PrimaryDesc(x);
  if (data.data_type() != dt::f32 && data.data_type() != dt::bf16) data = PlainDesc(x.shape(), dt::f32);
  auto d = dnnl::batch_normalization_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference,
                                                   data, n.attrs.bn.epsilon, flags);
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
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_SHIFT, bb, cdesc}};
  if (training) {
    STRATA_ASSIGN_OR_RETURN(int mmb, p.Use(n.inputs[3], cdesc));
    STRATA_ASSIGN_OR_RETURN(int mvb, p.Use(n.inputs[4], cdesc));
    const int meanb = p.Define(g.output(i, 1), cdesc), varb = p.Define(g.output(i, 2), cdesc);
    k.dnnl_args.push_back({DNNL_ARG_MEAN, meanb, cdesc});
    k.dnnl_args.push_back({DNNL_ARG_VARIANCE, varb, cdesc});
    if (act_node >= 0) {
      const int ws = p.NewScratchBuffer(pd.workspace_desc());
      p.workspace[i] = {ws, pd.workspace_desc()};
      k.dnnl_args.push_back({DNNL_ARG_WORKSPACE, ws, pd.workspace_desc()});
    }
    // Moving statistics, after the primitive: Keras's momentum, unbiased variance.
    const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
    const float mom = n.attrs.bn.momentum;
    const float unbias = M > 1 ? static_cast<float>(M) / static_cast<float>(M - 1) : 1.0f;
    k.bufs = {meanb, varb, mmb, mvb};
    k.fn = [C, mom, unbias](Kernel& kk, uint64_t) {
      const float* mean = reinterpret_cast<const float*>(kk.ptrs[0]);
      const float* var = reinterpret_cast<const float*>(kk.ptrs[1]);
      float* mm = reinterpret_cast<float*>(kk.ptrs[2]);
      float* mv = reinterpret_cast<float*>(kk.ptrs[3]);
      for (int64_t c = 0; c < C; ++c) {
        mm[c] = mm[c] * mom + mean[c] * (1 - mom);
        mv[c] = mv[c] * mom + var[c] * unbias * (1 - mom);
      }
      return Status::OK();
    };
  } else {
    STRATA_ASSIGN_OR_RETURN(int mmb, p.Use(n.inputs[3], cdesc));
    STRATA_ASSIGN_OR_RETURN(int mvb, p.Use(n.inputs[4], cdesc));
    k.dnnl_args.push_back({DNNL_ARG_MEAN, mmb, cdesc});
    k.dnnl_args.push_back({DNNL_ARG_VARIANCE, mvb, cdesc});
  }
  const int yb = p.Define(out, pd.dst_desc());
  k.dnnl_args.push_back({DNNL_ARG_DST, yb, pd.dst_desc()});
  AddPrim(k, pd, p);
  k.prim = dnnl::batch_normalization_forward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanBatchNormGrad(Planner& p, int i) {  // inputs x, gamma, mean, var, dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  if (n.attrs.bn.synchronized) return PlanSyncBatchNormGrad(p, i);
  const int fwd = n.attrs.forward_node;
  const int act_grad = p.fusion.act_grad[i];
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
  Kernel k;
  k.info = Info(p, i, "bn_bwd", pd.impl_info_str());
  if (act_grad >= 0) k.info.name = n.name + " (ReluGrad+BatchNormGrad)";
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int mb, p.Use(n.inputs[2], cdesc));
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(n.inputs[3], cdesc));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  // oneDNN 2.6 validates a shift argument under use_shift even backward, where it is never
  // read: it gets a scratch buffer.
  const int unused_shift = p.NewScratchBuffer(cdesc);
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_MEAN, mb, cdesc},
                 {DNNL_ARG_VARIANCE, vb, cdesc}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
                 {DNNL_ARG_SHIFT, unused_shift, cdesc}};
  if (act_grad >= 0) {
    auto ws = p.workspace.find(fwd);
    if (ws == p.workspace.end()) return Internal("fused batch norm + relu backward without a forward workspace");
    k.dnnl_args.push_back({DNNL_ARG_WORKSPACE, ws->second.first, ws->second.second});
  }
  const int dxb = p.Define(g.output(i, 0), pd.diff_src_desc());
  const int dgb = p.Define(g.output(i, 1), cdesc);
  const int dbb = p.Define(g.output(i, 2), cdesc);
  k.dnnl_args.push_back({DNNL_ARG_DIFF_SRC, dxb, pd.diff_src_desc()});
  k.dnnl_args.push_back({DNNL_ARG_DIFF_SCALE, dgb, cdesc});
  k.dnnl_args.push_back({DNNL_ARG_DIFF_SHIFT, dbb, cdesc});
  AddPrim(k, pd, p);
  k.prim = dnnl::batch_normalization_backward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// ---- pooling ---------------------------------------------------------------------------------


struct PoolGeo {
  dims strides, kernel, pad_l, pad_r;
};
PoolGeo PoolGeometry(const Shape& x, const graph::PoolOptions& o) {
  const graph::WindowDim h = graph::ComputeWindow(x[1], o.window_h, o.stride_h, 1, o.padding);
  const graph::WindowDim w = graph::ComputeWindow(x[2], o.window_w, o.stride_w, 1, o.padding);
  return {{o.stride_h, o.stride_w}, {o.window_h, o.window_w}, {h.pad_before, w.pad_before}, {h.pad_after, w.pad_after}};
}

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
  Kernel k;
  k.info = Info(p, i, max ? "maxpool_fwd" : "avgpool_fwd", pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  const int yb = p.Define(g.output(i), pd.dst_desc());
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DST, yb, pd.dst_desc()}};
  if (max && training) {
    const int ws = p.NewScratchBuffer(pd.workspace_desc());
    p.workspace[i] = {ws, pd.workspace_desc()};
    k.dnnl_args.push_back({DNNL_ARG_WORKSPACE, ws, pd.workspace_desc()});
  }
  AddPrim(k, pd, p);
  k.prim = dnnl::pooling_forward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
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
  const dt type = hint.src_desc().data_type();
  auto d = dnnl::pooling_backward::desc(max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding,
                                        Any(Dims(xs), type), Any(Dims(dy.shape()), type), geo.strides, geo.kernel,
                                        geo.pad_l, geo.pad_r);
  dnnl::pooling_backward::primitive_desc pd(d, p.Attr(), p.engine(), hint);
  Kernel k;
  k.info = Info(p, i, max ? "maxpool_bwd" : "avgpool_bwd", pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  k.dnnl_args = {{DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()}};
  if (max) {
    auto ws = p.workspace.find(n.attrs.forward_node);
    if (ws == p.workspace.end()) return Internal("max pooling backward without a forward workspace");
    k.dnnl_args.push_back({DNNL_ARG_WORKSPACE, ws->second.first, ws->second.second});
  }
  const int xb = p.Define(g.output(i), pd.diff_src_desc());
  k.dnnl_args.push_back({DNNL_ARG_DIFF_SRC, xb, pd.diff_src_desc()});
  AddPrim(k, pd, p);
  k.prim = dnnl::pooling_backward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// ---- element-wise ----------------------------------------------------------------------------

md DataDesc(Planner& p, Value v) {
  md d = p.PrimaryDesc(v);
  if (d.data_type() != dt::f32 && d.data_type() != dt::bf16) return PlainDesc(v.shape(), dt::f32);
  return d;
}

Status PlanActivation(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const EltwiseAlg a = ForwardAlg(n.attrs.activation, HasBackward(p, i));
  auto d = dnnl::eltwise_forward::desc(prop_kind::forward_training, a.alg, DataDesc(p, x), a.alpha, a.beta);
  dnnl::eltwise_forward::primitive_desc pd(d, p.Attr(), p.engine());
  Kernel k;
  k.info = Info(p, i, std::string("eltwise_") + graph::ActivationName(n.attrs.activation), pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  const int yb = p.Define(g.output(i), pd.dst_desc());
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DST, yb, pd.dst_desc()}};
  AddPrim(k, pd, p);
  k.prim = dnnl::eltwise_forward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
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
  Kernel k;
  k.info = Info(p, i, std::string("eltwise_bwd_") + graph::ActivationName(n.attrs.activation), pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(v, data));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  const int xb = p.Define(g.output(i), pd.diff_src_desc());
  k.dnnl_args = {{a.uses_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, vb, data}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
                 {DNNL_ARG_DIFF_SRC, xb, pd.diff_src_desc()}};
  AddPrim(k, pd, p);
  k.prim = dnnl::eltwise_backward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanScale(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  auto d = dnnl::eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear,
                                       DataDesc(p, n.inputs[0]), n.attrs.scalar, 0.0f);
  dnnl::eltwise_forward::primitive_desc pd(d, p.Attr(), p.engine());
  Kernel k;
  k.info = Info(p, i, "scale", pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(n.inputs[0], pd.src_desc()));
  const int yb = p.Define(g.output(i), pd.dst_desc());
  k.dnnl_args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DST, yb, pd.dst_desc()}};
  AddPrim(k, pd, p);
  k.prim = dnnl::eltwise_forward(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanSoftmax(Planner& p, int i, bool backward) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const md data = PlainDesc(x.shape(), dt::f32);
  const int axis = DnnlAxis(x.shape().rank(), x.shape().rank() - 1);
  dnnl::softmax_forward::primitive_desc fpd(dnnl::softmax_forward::desc(prop_kind::forward_training, data, axis),
                                            p.Attr(), p.engine());
  Kernel k;
  if (!backward) {
    k.info = Info(p, i, "softmax", fpd.impl_info_str());
    STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, data));
    const int yb = p.Define(g.output(i), data);
    k.dnnl_args = {{DNNL_ARG_SRC, xb, data}, {DNNL_ARG_DST, yb, data}};
    AddPrim(k, fpd, p);
    k.prim = dnnl::softmax_forward(fpd);
  } else {  // inputs y, dy
    dnnl::softmax_backward::primitive_desc pd(dnnl::softmax_backward::desc(data, data, axis), p.Attr(), p.engine(), fpd);
    k.info = Info(p, i, "softmax_bwd", pd.impl_info_str());
    STRATA_ASSIGN_OR_RETURN(int yb, p.Use(x, data));
    STRATA_ASSIGN_OR_RETURN(int db, p.Use(n.inputs[1], data));
    const int xb = p.Define(g.output(i), data);
    k.dnnl_args = {{DNNL_ARG_DST, yb, data}, {DNNL_ARG_DIFF_DST, db, data}, {DNNL_ARG_DIFF_SRC, xb, data}};
    AddPrim(k, pd, p);
    k.prim = dnnl::softmax_backward(pd);
  }
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanBinary(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const algorithm alg = n.kind == OpKind::kAdd ? algorithm::binary_add
                        : n.kind == OpKind::kSub ? algorithm::binary_sub : algorithm::binary_mul;
  const md a = DataDesc(p, n.inputs[0]);
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, a, a, a), p.Attr(), p.engine());
  Kernel k;
  k.info = Info(p, i, "binary", pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int ab, p.Use(n.inputs[0], a));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(n.inputs[1], a));
  const int yb = p.Define(g.output(i), a);
  k.dnnl_args = {{DNNL_ARG_SRC_0, ab, a}, {DNNL_ARG_SRC_1, bb, a}, {DNNL_ARG_DST, yb, a}};
  AddPrim(k, pd, p);
  k.prim = dnnl::binary(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// Bias [C] broadcast along every axis but the last.
md BiasBroadcastDesc(const Shape& xs) {
  std::vector<int64_t> ones(xs.rank(), 1);
  ones.back() = xs[-1];
  return PlainDesc(Shape(ones), dt::f32);
}

Status PlanBiasAdd(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const md a = DataDesc(p, x);
  const md b = BiasBroadcastDesc(x.shape());
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(algorithm::binary_add, a, b, a), p.Attr(), p.engine());
  Kernel k;
  k.info = Info(p, i, "bias_add", pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, a));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(n.inputs[1], b, b));
  const int yb = p.Define(g.output(i), a);
  k.dnnl_args = {{DNNL_ARG_SRC_0, xb, a}, {DNNL_ARG_SRC_1, bb, b}, {DNNL_ARG_DST, yb, a}};
  AddPrim(k, pd, p);
  k.prim = dnnl::binary(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
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
  const md src = DataDesc(p, x);
  const md dst = PlainDesc(Shape(kept), dt::f32);
  const algorithm alg = n.kind == OpKind::kReduceMean ? algorithm::reduction_mean : algorithm::reduction_sum;
  Kernel k;
  if (src.dims() == dst.dims()) {  // nothing to reduce: a copy
    dnnl::reorder::primitive_desc pd(p.engine(), src, p.engine(), dst, p.Attr());
    k.info = Info(p, i, "reduce(copy)", pd.impl_info_str());
    STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, src));
    const int yb = p.Define(g.output(i), dst, dst);
    k.dnnl_args = {{DNNL_ARG_FROM, xb, src}, {DNNL_ARG_TO, yb, dst}};
    AddPrim(k, pd, p);
    k.prim = dnnl::reorder(pd);
  } else {
    dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(alg, src, dst, 0.0f, 0.0f), p.Attr(), p.engine());
    k.info = Info(p, i, "reduction", pd.impl_info_str());
    STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, src));
    const int yb = p.Define(g.output(i), dst, dst);
    k.dnnl_args = {{DNNL_ARG_SRC, xb, src}, {DNNL_ARG_DST, yb, dst}};
    AddPrim(k, pd, p);
    k.prim = dnnl::reduction(pd);
  }
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanConcat(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const dt type = DataDesc(p, n.inputs[0]).data_type();
  std::vector<md> srcs;
  for (const Value& v : n.inputs) srcs.push_back(PlainDesc(v.shape(), type));
  const md dst = PlainDesc(n.out_shapes[0], type);
  dnnl::concat::primitive_desc pd(dst, DnnlAxis(n.out_shapes[0].rank(), n.attrs.axis), srcs, p.engine(), p.Attr());
  Kernel k;
  k.info = Info(p, i, "concat", pd.impl_info_str());
  for (size_t j = 0; j < n.inputs.size(); ++j) {
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(n.inputs[j], srcs[j]));
    k.dnnl_args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(j), b, srcs[j]});
  }
  const int yb = p.Define(g.output(i), dst);
  k.dnnl_args.push_back({DNNL_ARG_DST, yb, dst});
  AddPrim(k, pd, p);
  k.prim = dnnl::concat(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanSlice(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const dt type = DataDesc(p, x).data_type();
  const md full = PlainDesc(x.shape(), type);
  dims sub = Dims(n.out_shapes[0]), offsets(sub.size(), 0);
  offsets[DnnlAxis(x.shape().rank(), n.attrs.axis)] = n.attrs.begin;
  const md src = full.submemory_desc(sub, offsets);
  const md dst = PlainDesc(n.out_shapes[0], type);
  dnnl::reorder::primitive_desc pd(p.engine(), src, p.engine(), dst, p.Attr());
  Kernel k;
  k.info = Info(p, i, "slice", pd.impl_info_str());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, full));
  const int yb = p.Define(g.output(i), dst);
  k.dnnl_args = {{DNNL_ARG_FROM, xb, src}, {DNNL_ARG_TO, yb, dst}};
  AddPrim(k, pd, p);
  k.prim = dnnl::reorder(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
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
  Kernel k;
  k.info = Info(p, i, "copy", pd.impl_info_str());
  const int yb = p.Define(y, ydesc);
  k.dnnl_args = {{DNNL_ARG_FROM, xb, from}, {DNNL_ARG_TO, yb, ydesc}};
  AddPrim(k, pd, p);
  k.prim = dnnl::reorder(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// ---- hand-written kernels --------------------------------------------------------------------

template <typename T>
T* Ptr(Kernel& k, int j) { return reinterpret_cast<T*>(k.ptrs[j]); }

Status PlanHand(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, dt>>& ins,
                const std::vector<Value>& outs, KernelFn fn) {
  Kernel k;
  k.info = Info(p, i, op, "strata:scalar");
  for (const auto& [v, type] : ins) {
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(v, PlainDesc(v.shape(), type)));
    k.bufs.push_back(b);
  }
  for (const Value& v : outs) k.bufs.push_back(p.Define(v, PlainDesc(v.shape(), dt::f32)));
  k.fn = std::move(fn);
  p.Append(std::move(k));
  return p.FinishOutputs();
}

Status PlanDropout(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t count = n.out_shapes[0].num_elements();
  const float rate = n.attrs.scalar, keep_scale = 1.0f / (1.0f - rate);
  const uint64_t seed = n.attrs.seed;
  return PlanHand(p, i, "dropout", {{n.inputs[0], dt::f32}}, {g.output(i, 0), g.output(i, 1)},
                  [=](Kernel& k, uint64_t step) {
                    const float* x = Ptr<float>(k, 0);
                    float* y = Ptr<float>(k, 1);
                    float* mask = Ptr<float>(k, 2);
                    for (int64_t e = 0; e < count; ++e) {
                      mask[e] = DropoutUniform(seed, step, static_cast<uint64_t>(e)) < rate ? 0.0f : keep_scale;
                      y[e] = x[e] * mask[e];
                    }
                    return Status::OK();
                  });
}

Status PlanBroadcast(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Shape ys = n.out_shapes[0];
  // Precomputed source index of every output element: no shape work per step.
  auto map = std::make_shared<std::vector<int32_t>>(ys.num_elements());
  for (int64_t e = 0; e < ys.num_elements(); ++e) {
    int64_t lin = e, r = 0, mul = 1;
    for (int d = ys.rank() - 1; d >= 0; --d) {
      const int64_t idx = lin % ys[d];
      lin /= ys[d];
      if (std::find(n.attrs.axes.begin(), n.attrs.axes.end(), d) == n.attrs.axes.end()) {
        r += idx * mul;
        mul *= ys[d];
      }
    }
    (*map)[e] = static_cast<int32_t>(r);
  }
  return PlanHand(p, i, "broadcast", {{n.inputs[0], dt::f32}}, {g.output(i)}, [map](Kernel& k, uint64_t) {
    const float* x = Ptr<float>(k, 0);
    float* y = Ptr<float>(k, 1);
    const int32_t* m = map->data();
    for (size_t e = 0; e < map->size(); ++e) y[e] = x[m[e]];
    return Status::OK();
  });
}

Status PlanConstant(Planner& p, int i) { return Status::OK(); }

Status PlanSoftmaxCrossEntropy(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t N = n.inputs[0].shape()[0], K = n.inputs[0].shape()[1];
  const float eps = n.attrs.label_smoothing;
  const std::string label = graph::OpLabel(n.name, n.kind);
  // Computes the loss and keeps the probabilities, from which the gradient is one pass.
  return PlanHand(p, i, "softmax_xent", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::s32}}, {g.output(i, 0), g.output(i, 1)},
                  [=](Kernel& k, uint64_t) {
                    const float* logits = Ptr<float>(k, 0);  // [N, K]
                    const int32_t* labels = Ptr<int32_t>(k, 1);  // [N]
                    float* loss = Ptr<float>(k, 2);
                    float* prob = Ptr<float>(k, 3);  // [N, K]
                    double total = 0;
                    for (int64_t r = 0; r < N; ++r) {
                      const int32_t lab = labels[r];
                      if (lab < 0 || lab >= K)
                        return InvalidArgument(label + "label " + std::to_string(lab) + " of example " +
                                               std::to_string(r) + " is outside [0, " + std::to_string(K) + ")");
                      const float* z = logits + r * K;
                      float mx = -std::numeric_limits<float>::infinity();
                      for (int64_t c = 0; c < K; ++c) mx = std::max(mx, z[c]);
                      float s = 0;
                      for (int64_t c = 0; c < K; ++c) s += (prob[r * K + c] = std::exp(z[c] - mx));
                      const float lse = mx + std::log(s), inv = 1.0f / s;
                      float row = 0;
                      for (int64_t c = 0; c < K; ++c) {
                        prob[r * K + c] *= inv;
                        const float q = (c == lab ? 1 - eps : 0) + eps / static_cast<float>(K);
                        row -= q * (z[c] - lse);
                      }
                      total += row;
                    }
                    *loss = static_cast<float>(total / static_cast<double>(N));
                    return Status::OK();
                  });
}

Status PlanSoftmaxCrossEntropyGrad(Planner& p, int i) {  // inputs probabilities, labels, dloss
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t N = n.inputs[0].shape()[0], K = n.inputs[0].shape()[1];
  const float eps = n.attrs.label_smoothing;
  return PlanHand(p, i, "softmax_xent_grad", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::s32}, {n.inputs[2], dt::f32}},
                  {g.output(i)}, [=](Kernel& k, uint64_t) {
                    const float* prob = Ptr<float>(k, 0);
                    const int32_t* labels = Ptr<int32_t>(k, 1);
                    const float scale = *Ptr<float>(k, 2) / static_cast<float>(N);
                    float* dz = Ptr<float>(k, 3);
                    const float off = eps / static_cast<float>(K);
                    for (int64_t r = 0; r < N; ++r)
                      for (int64_t c = 0; c < K; ++c)
                        dz[r * K + c] = (prob[r * K + c] - off - (c == labels[r] ? 1 - eps : 0)) * scale;
                    return Status::OK();
                  });
}

Status PlanMse(Planner& p, int i, bool grad) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t count = n.inputs[0].shape().num_elements();
  if (!grad)
    return PlanHand(p, i, "mse", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}}, {g.output(i)},
                    [=](Kernel& k, uint64_t) {
                      const float* a = Ptr<float>(k, 0);
                      const float* b = Ptr<float>(k, 1);
                      double s = 0;
                      for (int64_t e = 0; e < count; ++e) s += static_cast<double>(a[e] - b[e]) * (a[e] - b[e]);
                      *Ptr<float>(k, 2) = static_cast<float>(s / static_cast<double>(count));
                      return Status::OK();
                    });
  return PlanHand(p, i, "mse_grad", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}},
                  {g.output(i)}, [=](Kernel& k, uint64_t) {
                    const float* a = Ptr<float>(k, 0);
                    const float* b = Ptr<float>(k, 1);
                    const float s = 2 * *Ptr<float>(k, 2) / static_cast<float>(count);
                    float* d = Ptr<float>(k, 3);
                    for (int64_t e = 0; e < count; ++e) d[e] = (a[e] - b[e]) * s;
                    return Status::OK();
                  });
}

Status PlanUpdate(Planner& p, int i) {  // inputs var, grad, lr, slots...
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  std::vector<std::pair<Value, dt>> ins;
  for (const Value& v : n.inputs) ins.push_back({v, dt::f32});
  const int64_t count = n.inputs[0].shape().num_elements();
  const graph::Attrs a = n.attrs;
  const OpKind kind = n.kind;
  return PlanHand(p, i, kind == OpKind::kSgdUpdate ? "sgd" : kind == OpKind::kAdamUpdate ? "adam" : "rmsprop", ins, {},
                  [=](Kernel& k, uint64_t) {
                    float* w = Ptr<float>(k, 0);
                    const float* gr = Ptr<float>(k, 1);
                    const float lr = *Ptr<float>(k, 2);
                    if (kind == OpKind::kSgdUpdate) {
                      SgdUpdate(w, gr, a.sgd.momentum != 0 ? Ptr<float>(k, 3) : nullptr, count,
                                {lr, a.sgd.momentum, a.sgd.nesterov});
                    } else if (kind == OpKind::kAdamUpdate) {
                      float* t = Ptr<float>(k, 5);
                      *t += 1;
                      AdamUpdate(w, gr, Ptr<float>(k, 3), Ptr<float>(k, 4), count,
                                 {lr, a.adam.beta_1, a.adam.beta_2, a.adam.epsilon, a.adam.weight_decay, *t});
                    } else {
                      RmsPropUpdate(w, gr, Ptr<float>(k, 3), a.rmsprop.momentum != 0 ? Ptr<float>(k, 4) : nullptr,
                                    count, {lr, a.rmsprop.rho, a.rmsprop.momentum, a.rmsprop.epsilon});
                    }
                    return Status::OK();
                  });
}

}  // namespace


Status PlanNode(Planner& p, int i) {
  const Node& n = p.graph().node(i);
  switch (n.kind) {
    case OpKind::kConv2D: return PlanConv(p, i);
    case OpKind::kConv2DBackpropInput: return PlanConvBackpropInput(p, i);
    case OpKind::kConv2DBackpropFilter: return PlanConvBackpropFilter(p, i);
    case OpKind::kMatMul: return PlanMatMul(p, i);
    case OpKind::kBiasAdd: return PlanBiasAdd(p, i);
    case OpKind::kBiasAddGrad: case OpKind::kReduceSum: case OpKind::kReduceMean: return PlanReduce(p, i);
    case OpKind::kBatchNorm: case OpKind::kBatchNormInference: return PlanBatchNorm(p, i);
    case OpKind::kBatchNormGrad: return PlanBatchNormGrad(p, i);
    case OpKind::kActivation: return PlanActivation(p, i);
    case OpKind::kActivationGrad: return PlanActivationGrad(p, i);
    case OpKind::kSoftmax: return PlanSoftmax(p, i, false);
    case OpKind::kSoftmaxGrad: return PlanSoftmax(p, i, true);
    case OpKind::kMaxPool: case OpKind::kAvgPool: return PlanPool(p, i);
    case OpKind::kMaxPoolGrad: case OpKind::kAvgPoolGrad: return PlanPoolGrad(p, i);
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kMultiply: return PlanBinary(p, i);
    case OpKind::kScale: return PlanScale(p, i);
    case OpKind::kConcat: return PlanConcat(p, i);
    case OpKind::kSlice: return PlanSlice(p, i);
    case OpKind::kReshape: return PlanAliasOrCopy(p, i, DataDesc(p, n.inputs[0]).data_type());
    case OpKind::kIdentity: return PlanAliasOrCopy(p, i, ToDnnl(n.out_dtypes[0]));
    case OpKind::kCast: return PlanAliasOrCopy(p, i, ToDnnl(n.attrs.dtype));
    case OpKind::kDropout: return PlanDropout(p, i);
    case OpKind::kBroadcast: return PlanBroadcast(p, i);
    case OpKind::kSoftmaxCrossEntropy: return PlanSoftmaxCrossEntropy(p, i);
    case OpKind::kSoftmaxCrossEntropyGrad: return PlanSoftmaxCrossEntropyGrad(p, i);
    case OpKind::kMeanSquaredError: return PlanMse(p, i, false);
    case OpKind::kMeanSquaredErrorGrad: return PlanMse(p, i, true);
    case OpKind::kSgdUpdate: case OpKind::kAdamUpdate: case OpKind::kRmsPropUpdate: return PlanUpdate(p, i);
    case OpKind::kConstant: return PlanConstant(p, i);
    default:
      return Unimplemented(graph::OpLabel(n.name, n.kind) + "no cpu kernel");
  }
}

}  // namespace strata::backend::cpu
