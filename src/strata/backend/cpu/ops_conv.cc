// Convolution: forward (with a fused bias and activation), backward-data and backward-filter
// (with a fused bias gradient) as oneDNN primitives, and the choice of Winograd: oneDNN's where
// it has one, Strata's AVX2 Winograd (winograd.h) where it has none.
#include <memory>
#include <optional>

#include "strata/backend/cpu/depthwise_kernels.h"
#include "strata/backend/cpu/ops_internal.h"
#include "strata/backend/cpu/winograd.h"
#include "strata/core/cpu.h"

namespace strata::backend::cpu::ops {

namespace {

// The ZeroPadding2D folded into conv node i's padding (graph/fusion.h), or null.
const graph::ZeroPadFold* FoldOf(Planner& p, int i) {
  const int z = i >= 0 ? p.fusion.zero_pad[i] : -1;
  return z >= 0 ? &p.fusion.zero_pads[z] : nullptr;
}

// Conv geometry in oneDNN terms. x: the input as the graph has it (padded, when a ZeroPadding2D
// is folded in: its pads then add to the convolution's own).
struct ConvGeo {
  dims strides, dilates, pad_l, pad_r;
};
ConvGeo Geometry(const Shape& x, const Shape& k, const graph::Conv2DOptions& o,
                 const graph::ZeroPadFold* fold = nullptr) {
  const graph::WindowDim h = graph::ComputeWindow(x[1], k[0], o.stride_h, o.dilation_h, o.padding);
  const graph::WindowDim w = graph::ComputeWindow(x[2], k[1], o.stride_w, o.dilation_w, o.padding);
  ConvGeo geo{{o.stride_h, o.stride_w}, {o.dilation_h - 1, o.dilation_w - 1}, {h.pad_before, w.pad_before},
              {h.pad_after, w.pad_after}};
  if (fold != nullptr) {
    geo.pad_l[0] += fold->top;
    geo.pad_l[1] += fold->left;
    geo.pad_r[0] += fold->bottom;
    geo.pad_r[1] += fold->right;
  }
  return geo;
}
// The shape the convolution reads: the unpadded source of a folded ZeroPadding2D, else x.
const Shape& ReadShape(const Shape& x, const graph::ZeroPadFold* fold) { return fold ? fold->source.shape() : x; }
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
                                                                prop_kind prop, std::optional<md> src_layout = std::nullopt,
                                                                std::optional<md> dst_layout = std::nullopt) {
  const dt ct = ComputeType(p);
  const graph::ZeroPadFold* fold = FoldOf(p, fwd);
  const ConvGeo geo = Geometry(xs, ks, o, fold);
  md src = Any(Dims(ReadShape(xs, fold)), ct);
  const md wei = Any(WeightsDims(ks, o.groups), ct), dst = dst_layout ? *dst_layout : Any(Dims(ys), out);
  auto pd = [&](algorithm alg) {
    // oneDNN's inference Winograd takes its weights pre-transformed (wino_reorder, a reference
    // reorder) and Strata's weights are variables, so that reorder ran at every step: 857 of a
    // 1284 ms ResNet50 step with a frozen backbone (64x64, batch 16). The training variant
    // takes blocked weights, reordered by a jit kernel.
    const prop_kind wprop = alg == algorithm::convolution_winograd ? prop_kind::forward_training : prop;
    auto d = bias ? dnnl::convolution_forward::desc(wprop, alg, src, wei, md({ks[3]}, dt::f32, tag::a), dst,
                                                    geo.strides, geo.dilates, geo.pad_l, geo.pad_r)
                  : dnnl::convolution_forward::desc(wprop, alg, src, wei, dst, geo.strides, geo.dilates, geo.pad_l,
                                                    geo.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, attr, p.engine());
  };
  const bool winograd = TryWinograd(p, ks, o.groups) && fold == nullptr;
  if (src_layout && fold == nullptr) {
    const md any = src;
    src = *src_layout;
    try {
      auto given = WinogradOrDirect(winograd, pd);
      const std::string impl = given.impl_info_str();
      if (impl.find("ref") == std::string::npos && impl.find("gemm") == std::string::npos) return given;
    } catch (const dnnl::error&) {  // no kernel for that layout: oneDNN's choice below
    }
    src = any;
  }
  return WinogradOrDirect(winograd, pd);
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

// A oneDNN Winograd kernel ("jit_wino_4x3:...") executes F(4x4, 3x3)'s tile products, not the
// direct count: `out` is the grid its tiles cover (NHWC: y forward, dx backward-data, dy for the
// weight gradient), `w` HWIO.
void CountWinogradAsExecuted(KernelInfo* info, const Shape& out, const Shape& w) {
  if (info->impl.find("wino") == std::string::npos || out.rank() != 4 || w.rank() != 4) return;
  info->executed_matrix_flops = winograd::ExecutedFlops(out.dim(0), out.dim(1), out.dim(2), w.dim(2), w.dim(3));
}

// Appends the Winograd kernel: src (blocked), plain HWIO weights, optional plain bias -> out
// (or, when `into` is a buffer, into that: a residual sum's first part).
Status AppendWinograd(Planner& p, KernelInfo info, const winograd::Geometry& geo, winograd::Pass pass, bool relu,
                      Value src, Value weights, std::optional<Value> bias, Value out, int into = -1) {
  auto conv = std::make_shared<const winograd::Conv3x3>(geo, pass, winograd::Isa::kAvx2, relu);
  Kernel k;
  k.info = std::move(info);
  k.info.impl = "strata:avx2-winograd";
  k.info.executed_matrix_flops = pass == winograd::Pass::kForward
                                     ? winograd::ExecutedFlops(geo.batch, geo.out_h, geo.out_w, geo.in_channels, geo.out_channels)
                                     : winograd::ExecutedFlops(geo.batch, geo.in_h, geo.in_w, geo.in_channels, geo.out_channels);
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
  k.bufs.push_back(into >= 0 ? into : p.Define(out, Blocked8(out.shape())));
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

Result<std::shared_ptr<dnnl::convolution_forward::primitive_desc>> ConvHint(Planner& p, const Node& n, int fwd,
                                                                            const Shape& xs, const Shape& ks,
                                                                            const Shape& ys) {
  auto it = p.conv_pd.find(fwd);
  if (it != p.conv_pd.end()) return it->second;
  STRATA_ASSIGN_OR_RETURN(auto pd, ConvForwardPd(p, fwd, xs, ks, ys, n.attrs.conv, false, ComputeType(p), p.Attr(),
                                                 prop_kind::forward_training));
  return std::make_shared<dnnl::convolution_forward::primitive_desc>(pd);
}

// ---- Strata's depthwise weight gradient (depthwise_kernels.h) ------------------------------
//
// oneDNN 2.6 runs the backward-weights of a depthwise convolution as its jit_dw kernel for 3x3
// only (and not all of those: some tiny AVX2 shapes too go to gemm); every other size
// (EfficientNet's 5x5) as im2col + gemm (x64:gemm:jit), 15-40x slower than Strata's kernel on
// EfficientNetB0's shapes. A one-thread program (replicas run one thread each; a wider program
// keeps oneDNN's parallel primitive), f32 or mixed bf16, with depth multiplier 1 and dilation 1 runs
// Strata's kernel wherever oneDNN did not pick jit_dw, reading x and dy in the channel blocks
// they already have. jit_dw stays: against it, Strata's kernel measured 1.5x faster on large
// 3x3 images but 1.5-2x slower on the small ones (12x12, 6x6), no gain over a step.

bool DepthwiseKernelApplies(Planner& p, const Node& n, const Value& x, const Value& dy, const Shape& ks) {
  const graph::Conv2DOptions& o = n.attrs.conv;
  return p.options().depthwise_kernels && p.options().threads == 1 && x.dtype() == DType::kF32 &&
         dy.dtype() == DType::kF32 && x.shape().rank() == 4 && ks[2] == 1 && o.groups == ks[3] && o.groups > 1 &&
         o.dilation_h == 1 && o.dilation_w == 1;
}

Status AppendDepthwiseBackwardWeights(Planner& p, int i, const Value& x, const Value& dy, const Shape& ks,
                                      const ConvGeo& geo, int bias_grad) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Shape& xs = x.shape();
  const Shape& ys = dy.shape();
  // x and dy in the type oneDNN's primitive would read them in (bf16 in a mixed precision
  // program) and x's block where it has one already, else the host's vector width (a reorder
  // then runs first).
  const dt type = ComputeType(p);
  const KernelIsa isa = BestKernelIsa();
  const md have = DataDesc(p, x);
  const std::optional<ChannelBlockFormat> blocks = have.data_type() == type ? ChannelBlocksOf(have, xs) : std::nullopt;
  const int block = blocks ? static_cast<int>(blocks->block) : isa == KernelIsa::kAvx512 ? 16 : 8;
  const tag format = block == 16 ? tag::nChw16c : tag::nChw8c;
  DepthwiseGeometry dg;
  dg.batch = xs[0];
  dg.channels = xs[3];
  dg.in_h = xs[1];
  dg.in_w = xs[2];
  dg.out_h = ys[1];
  dg.out_w = ys[2];
  dg.kernel_h = static_cast<int>(ks[0]);
  dg.kernel_w = static_cast<int>(ks[1]);
  dg.stride_h = n.attrs.conv.stride_h;
  dg.stride_w = n.attrs.conv.stride_w;
  dg.pad_top = static_cast<int>(geo.pad_l[0]);
  dg.pad_left = static_cast<int>(geo.pad_l[1]);
  const ChannelBlocks xl = BlockedChannelBlocks(xs[1], xs[2], xs[3], block);
  const ChannelBlocks dl = BlockedChannelBlocks(ys[1], ys[2], ys[3], block);

  Kernel k;
  k.info = Info(p, i, "conv_bwd_weights", KernelImplName(isa));
  if (bias_grad >= 0) {
    k.info.name = n.name + " (Conv2DBackpropFilter+BiasAddGrad)";
    k.info.other_flops += g.OtherFlops(bias_grad);
  }
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, md(Dims(xs), type, format)));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, md(Dims(ys), type, format)));
  k.bufs = {xb, db, p.Define(g.output(i), PlainDesc(ks, dt::f32))};
  if (bias_grad >= 0) k.bufs.push_back(p.Define(g.output(bias_grad), PlainDesc(g.output(bias_grad).shape(), dt::f32)));
  const bool has_bias = bias_grad >= 0;
  const bool bf16 = type == dt::bf16;
  k.fn = [dg, xl, dl, isa, has_bias, bf16](Kernel& k, uint64_t) {
    float* db = has_bias ? Ptr<float>(k, 3) : nullptr;
    if (bf16) {
      DepthwiseConvBackwardWeightsBf16(dg, Ptr<const uint16_t>(k, 0), xl, Ptr<const uint16_t>(k, 1), dl,
                                       Ptr<float>(k, 2), db, isa);
    } else {
      DepthwiseConvBackwardWeights(dg, Ptr<const float>(k, 0), xl, Ptr<const float>(k, 1), dl, Ptr<float>(k, 2), db,
                                   isa);
    }
    return Status::OK();
  };
  p.Append(std::move(k));
  return p.FinishOutputs();
}

// The residual sum of a fused convolution (and the activation after it) as a oneDNN binary
// kernel of its own: `sum_in` (layout d) + the other operand -> the fused group's output.
Status AppendResidualSum(Planner& p, const FusedEpilogue& fused, int sum_in, const md& d, KernelInfo info) {
  const graph::Graph& g = p.graph();
  dnnl::primitive_attr attr = p.Attr();
  if (fused.act_node >= 0) attr.set_post_ops(ActivationPostOp(g.node(fused.act_node).attrs.activation));
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(algorithm::binary_add, d, d, d), attr, p.engine());
  STRATA_ASSIGN_OR_RETURN(int ob, p.Use(fused.other, d));
  const int yb = p.Define(fused.out, d);
  info.op = "binary";
  info.impl = pd.impl_info_str();
  info.matrix_flops = 0;
  info.executed_matrix_flops = -1;
  info.other_flops = g.OtherFlops(fused.residual_node) + (fused.act_node >= 0 ? g.OtherFlops(fused.act_node) : 0);
  return AppendPrimitive<dnnl::binary>(p, std::move(info), pd,
                                       {{DNNL_ARG_SRC_0, sum_in, d}, {DNNL_ARG_SRC_1, ob, d}, {DNNL_ARG_DST, yb, d}});
}

// Convolution node i fused with the residual sum after it (and the activation after that):
// `pd` is the convolution with its bias alone. The sum runs as a binary post-op reading the
// other operand in the layout the convolution writes, when that leaves oneDNN's choice of
// kernel as it was (a post-op it cannot take would turn jit_wino_4x3 into direct, or a jit
// kernel into gemm); otherwise (and after Strata's own Winograd) as a binary kernel right
// after the convolution, with the activation as its post-op. Either way the sum is never a
// separate pass over plain memory after a reorder of the convolution's blocked output
// (ResNet50's inference: 15 % of its time).
Status AppendResidualConv(Planner& p, int i, Value x, Value w, const FusedEpilogue& fused, prop_kind prop,
                          const dnnl::convolution_forward::primitive_desc& pd,
                          const std::optional<winograd::Geometry>& hand, KernelInfo info) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  std::optional<Value> bias;
  if (fused.bias_node >= 0) {
    bias = g.node(fused.bias_node).inputs[1];
    info.other_flops += g.OtherFlops(fused.bias_node);
  }
  if (hand) {
    const md d = Blocked8(fused.out.shape());
    const int sum_in = p.NewScratchBuffer(d);
    STRATA_RETURN_IF_ERROR(AppendWinograd(p, info, *hand, winograd::Pass::kForward, false, x, w, bias, fused.out, sum_in));
    return AppendResidualSum(p, fused, sum_in, d, std::move(info));
  }
  const md dst = pd.dst_desc();
  dnnl::post_ops chain;
  chain.append_binary(algorithm::binary_add, dst);
  if (fused.act_node >= 0) chain = ActivationPostOp(g.node(fused.act_node).attrs.activation, chain);
  dnnl::primitive_attr attr = p.Attr();
  attr.set_post_ops(chain);
  std::optional<dnnl::convolution_forward::primitive_desc> with_sum;
  try {
    auto candidate = ConvForwardPd(p, i, n.inputs[0].shape(), w.shape(), n.out_shapes[0], n.attrs.conv,
                                   fused.bias_node >= 0, dst.data_type(), attr, prop, pd.src_desc(), dst);
    if (candidate.ok() && std::string(candidate->impl_info_str()) == pd.impl_info_str() &&
        candidate->src_desc() == pd.src_desc())
      with_sum = *candidate;
  } catch (const dnnl::error&) {  // no kernel takes the post-op here: a binary kernel below
  }
  const dnnl::convolution_forward::primitive_desc& conv = with_sum ? *with_sum : pd;
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, conv.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int wb, p.Use(w, conv.weights_desc(), WeightsView(w.shape(), n.attrs.conv.groups, dt::f32)));
  DnnlArgs args = {{DNNL_ARG_SRC, xb, conv.src_desc()}, {DNNL_ARG_WEIGHTS, wb, conv.weights_desc()}};
  if (bias) {
    STRATA_ASSIGN_OR_RETURN(int bb, p.Use(*bias, conv.bias_desc()));
    args.push_back({DNNL_ARG_BIAS, bb, conv.bias_desc()});
  }
  if (with_sum) {
    STRATA_ASSIGN_OR_RETURN(int ob, p.Use(fused.other, dst));
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, ob, dst});
    args.push_back({DNNL_ARG_DST, p.Define(fused.out, dst), dst});
    info.other_flops += g.OtherFlops(fused.residual_node);
    if (fused.act_node >= 0) info.other_flops += g.OtherFlops(fused.act_node);
    return AppendPrimitive<dnnl::convolution_forward>(p, std::move(info), conv, std::move(args));
  }
  const int sum_in = p.NewScratchBuffer(dst);  // live from the convolution to the sum
  args.push_back({DNNL_ARG_DST, sum_in, dst});
  STRATA_RETURN_IF_ERROR(AppendPrimitive<dnnl::convolution_forward>(p, info, conv, std::move(args)));
  return AppendResidualSum(p, fused, sum_in, dst, std::move(info));
}

}  // namespace

Status PlanConv(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const graph::ZeroPadFold* fold = FoldOf(p, i);
  const Value x = fold ? fold->source : n.inputs[0], w = n.inputs[1];
  const FusedEpilogue fused = Epilogue(p, i, "Conv2D");
  const int bias_node = fused.bias_node, act_node = fused.act_node;
  const Value out = fused.out;
  const prop_kind prop = HasBackward(p, i) ? prop_kind::forward_training : prop_kind::forward_inference;
  // Inference: a convolution reads an input that is already in whole channel blocks as it is.
  // oneDNN's own choice there is often brgconv's channels-last layout, which cost a reorder of
  // the input to plain and of the output back to blocks (DenseNet's 1x1 convolutions between
  // its blocked batch norms and Winograd 3x3s). Training's choice is the blocked layout anyway.
  std::optional<md> src_layout;
  if (const md have = DataDesc(p, x); prop == prop_kind::forward_inference && have.data_type() == ComputeType(p) &&
                                      WholeChannelBlocks(have, x.shape()))
    src_layout = have;
  STRATA_ASSIGN_OR_RETURN(auto pd, ConvForwardPd(p, i, n.inputs[0].shape(), w.shape(), n.out_shapes[0], n.attrs.conv,
                                                 bias_node >= 0, OutType(p, out), fused.attr, prop, src_layout));
  p.conv_pd[i] = std::make_shared<dnnl::convolution_forward::primitive_desc>(pd);  // also the backward hint
  KernelInfo info = Info(p, i, "conv_fwd", pd.impl_info_str());
  CountWinogradAsExecuted(&info, n.out_shapes[0], w.shape());
  info.name = n.name + " (" + (fold ? "ZeroPadding2D+" : "") + fused.name + ")";
  // Strata's Winograd where oneDNN has none; its epilogue does bias and ReLU only (a residual
  // sum's activation comes after the sum, in the sum's kernel).
  const bool relu_or_none =
      act_node < 0 || fused.residual_node >= 0 || g.node(act_node).attrs.activation == Activation::kRelu;
  std::optional<winograd::Geometry> hand = HandWinograd(p, x.shape(), w.shape(), n.out_shapes[0], n.attrs.conv);
  if (!(hand && fold == nullptr && relu_or_none && pd.src_desc() == Blocked8(x.shape()) &&
        pd.dst_desc() == Blocked8(out.shape()) && !OneDnnHasWinograd(p, x.shape(), w.shape(), n.out_shapes[0], n.attrs.conv)))
    hand.reset();
  if (fused.residual_node >= 0) return AppendResidualConv(p, i, x, w, fused, prop, pd, hand, std::move(info));
  if (auto geo = hand) {
    if (bias_node >= 0) info.other_flops += g.OtherFlops(bias_node);
    if (act_node >= 0) info.other_flops += g.OtherFlops(act_node);
    std::optional<Value> bias;
    if (bias_node >= 0) bias = g.node(bias_node).inputs[1];
    return AppendWinograd(p, info, *geo, winograd::Pass::kForward, act_node >= 0, x, w, bias, out);
  }
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int wb, p.Use(w, pd.weights_desc(), WeightsView(w.shape(), n.attrs.conv.groups, dt::f32)));
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_WEIGHTS, wb, pd.weights_desc()}};
  if (bias_node >= 0) {
    STRATA_ASSIGN_OR_RETURN(int bb, p.Use(g.node(bias_node).inputs[1], pd.bias_desc()));
    args.push_back({DNNL_ARG_BIAS, bb, pd.bias_desc()});
    info.other_flops += g.OtherFlops(bias_node);
  }
  if (act_node >= 0) info.other_flops += g.OtherFlops(act_node);
  args.push_back({DNNL_ARG_DST, p.Define(out, pd.dst_desc()), pd.dst_desc()});
  return AppendPrimitive<dnnl::convolution_forward>(p, std::move(info), pd, std::move(args));
}

Status PlanConvBackpropInput(Planner& p, int i) {  // inputs dy, kernel
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value dy = n.inputs[0], w = n.inputs[1];
  const Shape& xs = n.out_shapes[0];
  // A folded ZeroPadding2D: this writes the unpadded gradient, the value of the slices it absorbed.
  const graph::ZeroPadFold* fold = FoldOf(p, i);
  Value dx = g.output(i);
  if (fold != nullptr)
    for (const auto& [node, v] : fold->source_grads)
      if (node == i) dx = v;
  const ConvGeo geo = Geometry(xs, w.shape(), n.attrs.conv, fold);
  const dt ct = ComputeType(p);
  STRATA_ASSIGN_OR_RETURN(auto hint, ConvHint(p, n, n.attrs.forward_node, xs, w.shape(), dy.shape()));
  auto make = [&](algorithm alg) {
    auto d = dnnl::convolution_backward_data::desc(alg, Any(Dims(ReadShape(xs, fold)), OutType(p, dx)),
                                                   Any(WeightsDims(w.shape(), n.attrs.conv.groups), ct),
                                                   Any(Dims(dy.shape()), ct), geo.strides, geo.dilates, geo.pad_l,
                                                   geo.pad_r);
    return dnnl::convolution_backward_data::primitive_desc(d, p.Attr(), p.engine(), *hint);
  };
  const dnnl::convolution_backward_data::primitive_desc pd =
      WinogradOrDirect(TryWinograd(p, w.shape(), n.attrs.conv.groups) && fold == nullptr, make);
  KernelInfo info = Info(p, i, "conv_bwd_data", pd.impl_info_str());
  CountWinogradAsExecuted(&info, xs, w.shape());
  if (fold != nullptr) info.name = n.name + " (Conv2DBackpropInput+ZeroPadding2DGrad)";
  if (auto geo = HandWinograd(p, xs, w.shape(), dy.shape(), n.attrs.conv);
      geo && fold == nullptr && pd.diff_dst_desc() == Blocked8(dy.shape()) && pd.diff_src_desc() == Blocked8(xs) &&
      !OneDnnHasWinograd(p, xs, w.shape(), dy.shape(), n.attrs.conv))
    return AppendWinograd(p, info, *geo, winograd::Pass::kBackwardData, false, dy, w, std::nullopt, g.output(i));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  STRATA_ASSIGN_OR_RETURN(int wb, p.Use(w, pd.weights_desc(), WeightsView(w.shape(), n.attrs.conv.groups, dt::f32)));
  const int xb = p.Define(dx, pd.diff_src_desc());
  return AppendPrimitive<dnnl::convolution_backward_data>(
      p, std::move(info), pd,
      {{DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()}, {DNNL_ARG_WEIGHTS, wb, pd.weights_desc()},
       {DNNL_ARG_DIFF_SRC, xb, pd.diff_src_desc()}});
}

Status PlanConvBackpropFilter(Planner& p, int i) {  // inputs x, dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const graph::ZeroPadFold* fold = FoldOf(p, i);
  const Value padded = n.inputs[0], dy = n.inputs[1];
  const Value x = fold ? fold->source : padded;
  const Shape& ks = n.out_shapes[0];
  const int bias_grad = p.fusion.bias_grad[i];
  const ConvGeo geo = Geometry(padded.shape(), ks, n.attrs.conv, fold);
  const dt ct = ComputeType(p);
  STRATA_ASSIGN_OR_RETURN(auto hint, ConvHint(p, n, n.attrs.forward_node, padded.shape(), ks, dy.shape()));
  const md src = Any(Dims(x.shape()), ct), dwei = Any(WeightsDims(ks, n.attrs.conv.groups), dt::f32),
           ddst = Any(Dims(dy.shape()), ct);
  auto make = [&](algorithm alg) {
    auto d = bias_grad >= 0
                 ? dnnl::convolution_backward_weights::desc(alg, src, dwei, md({ks[3]}, dt::f32, tag::a), ddst,
                                                            geo.strides, geo.dilates, geo.pad_l, geo.pad_r)
                 : dnnl::convolution_backward_weights::desc(alg, src, dwei, ddst, geo.strides, geo.dilates, geo.pad_l,
                                                            geo.pad_r);
    return dnnl::convolution_backward_weights::primitive_desc(d, p.Attr(), p.engine(), *hint);
  };
  // Winograd where the forward may take it: 1.2-2.2x faster than direct on every 3x3 shape of
  // DenseNet121, ResNet50 and the reference CNN on a Zen 4 core (winograd_bench, docs/engine.md).
  const dnnl::convolution_backward_weights::primitive_desc pd =
      WinogradOrDirect(TryWinograd(p, ks, n.attrs.conv.groups) && fold == nullptr, make);
  // Where oneDNN has no depthwise kernel of its own for this shape (jit_dw: 3x3 only), Strata's.
  if (DepthwiseKernelApplies(p, n, x, dy, ks) && std::string(pd.impl_info_str()).rfind("jit_dw", 0) != 0)
    return AppendDepthwiseBackwardWeights(p, i, x, dy, ks, geo, bias_grad);
  KernelInfo info = Info(p, i, "conv_bwd_weights", pd.impl_info_str());
  CountWinogradAsExecuted(&info, dy.shape(), ks);  // the weight gradient's tiles cover dy
  if (bias_grad >= 0) {
    info.name = n.name + " (Conv2DBackpropFilter+BiasAddGrad)";
    info.other_flops += g.OtherFlops(bias_grad);
  }
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  const int wb = p.Define(g.output(i), pd.diff_weights_desc(), WeightsView(ks, n.attrs.conv.groups, dt::f32));
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
                   {DNNL_ARG_DIFF_WEIGHTS, wb, pd.diff_weights_desc()}};
  if (bias_grad >= 0)
    args.push_back({DNNL_ARG_DIFF_BIAS, p.Define(g.output(bias_grad), pd.diff_bias_desc()), pd.diff_bias_desc()});
  return AppendPrimitive<dnnl::convolution_backward_weights>(p, std::move(info), pd, std::move(args));
}

void RegisterConvPlans(PlanTable& t) {
  Register(t, OpKind::kConv2D, PlanConv, kTakesBF16);
  Register(t, OpKind::kConv2DBackpropInput, PlanConvBackpropInput, kTakesBF16);
  Register(t, OpKind::kConv2DBackpropFilter, PlanConvBackpropFilter, kTakesBF16);
}

}  // namespace strata::backend::cpu::ops
