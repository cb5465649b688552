// The convolution family: Conv2D (grouped and depthwise too) and its two gradient ops.
#include "strata/graph/op_checks.h"
#include "strata/graph/ops/ops.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

Result<Value> Graph::Conv2D(Value x, Value k, Conv2DOptions o, const std::string& name_in) {
  STRATA_ASSIGN_OR_RETURN(const NewOp op, Begin(OpKind::kConv2D, name_in, {x, k}, kFloatInput));
  STRATA_RETURN_IF_ERROR(CheckSameDType(op.label, x, k));
  const Shape& xs = x.shape();
  const Shape& ks = k.shape();
  if (xs.rank() != 4) return InvalidArgument(op.label + "expected input [N, H, W, C], found " + S(xs));
  if (ks.rank() != 4) return InvalidArgument(op.label + "expected kernel [KH, KW, C / groups, O], found " + S(ks));
  if (o.groups < 1 || o.stride_h < 1 || o.stride_w < 1 || o.dilation_h < 1 || o.dilation_w < 1)
    return InvalidArgument(op.label + "groups, strides and dilations must be >= 1");
  if (xs[3] % o.groups != 0 || ks[3] % o.groups != 0)
    return InvalidArgument(op.label + "groups " + std::to_string(o.groups) + " must divide input channels " +
                           std::to_string(xs[3]) + " and filters " + std::to_string(ks[3]));
  if (ks[2] != xs[3] / o.groups)
    return InvalidArgument(op.label + "input channels " + std::to_string(xs[3]) + " do not match kernel " + S(ks) +
                           " (expects " + std::to_string(ks[2]) + " = C / groups)");
  WindowDim h = ComputeWindow(xs[1], ks[0], o.stride_h, o.dilation_h, o.padding);
  WindowDim w = ComputeWindow(xs[2], ks[1], o.stride_w, o.dilation_w, o.padding);
  if (h.out <= 0 || w.out <= 0)
    return InvalidArgument(op.label + "kernel " + S(ks) + " larger than input " + S(xs) + " with valid padding");
  Node n{OpKind::kConv2D, op.name, {x, k}, {Shape{xs[0], h.out, w.out, ks[3]}}, {x.dtype()}, {}, false};
  n.attrs.conv = o;
  return Finish(std::move(n));
}

namespace ops {
namespace {

Status Conv2DGradient(GradientContext& c) {
  const Value x = c.in(0), kernel = c.in(1);
  Attrs a = c.BackwardAttrs();
  a.conv = c.n.attrs.conv;
  if (c.need(0)) {
    a.input_shape = x.shape();
    Value dx = c.Emit(OpKind::kConv2DBackpropInput, c.gname + "/input", {c.dy(), kernel}, {x.shape()}, {x.dtype()}, a);
    STRATA_RETURN_IF_ERROR(c.Accumulate(x, dx));
  }
  if (c.need(1)) {
    a.input_shape = kernel.shape();
    Value dw = c.Emit(OpKind::kConv2DBackpropFilter, c.gname + "/kernel", {x, c.dy()}, {kernel.shape()},
                      {kernel.dtype()}, a);
    STRATA_RETURN_IF_ERROR(c.Accumulate(kernel, dw));
  }
  return Status::OK();
}

// 2 FLOPs per multiply-add: every output element of the forward op takes KH * KW * C / groups.
int64_t ConvFlops(const Shape& y, const Shape& kernel) { return 2 * y.num_elements() * kernel[0] * kernel[1] * kernel[2]; }
int64_t Conv2DFlops(const Node& n) { return ConvFlops(n.out_shapes[0], n.inputs[1].shape()); }
int64_t BackpropInputFlops(const Node& n) { return ConvFlops(n.inputs[0].shape(), n.inputs[1].shape()); }   // dy, kernel
int64_t BackpropFilterFlops(const Node& n) { return ConvFlops(n.inputs[1].shape(), n.out_shapes[0]); }      // x, dy

}  // namespace

void RegisterConvOps(OpTable& t) {
  Register(t, {.kind = OpKind::kConv2D, .name = "Conv2D", .family = "conv", .gradient = Conv2DGradient,
               .matrix_flops = Conv2DFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kConv2DBackpropInput, .name = "Conv2DBackpropInput", .family = "conv",
               .no_gradient = kSecondOrder, .matrix_flops = BackpropInputFlops, .other_flops = NoFlops});
  Register(t, {.kind = OpKind::kConv2DBackpropFilter, .name = "Conv2DBackpropFilter", .family = "conv",
               .no_gradient = kSecondOrder, .matrix_flops = BackpropFilterFlops, .other_flops = NoFlops});
}

}  // namespace ops
}  // namespace strata::graph
