// ONNX translation of the conv family: Conv2D (groups, strides, dilation; TF same padding as
// explicit pads).
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

Status Conv(Exporter& e, const Node& n) {
  const Value xv = n.inputs[0], kv = n.inputs[1];
  if (!e.IsLeaf(kv)) return e.Unsupported(n, "its kernel is computed, not a weight");
  const Shape& xs = xv.shape();
  const Shape& ks = kv.shape();  // [KH, KW, C / groups, O]
  const auto& o = n.attrs.conv;
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(xv));
  STRATA_ASSIGN_OR_RETURN(std::vector<float> k, e.LeafValues(kv));
  const int64_t KH = ks[0], KW = ks[1], CG = ks[2], O = ks[3];
  std::vector<float> w(k.size());  // ONNX: [O, C / groups, KH, KW]
  for (int64_t h = 0; h < KH; ++h)
    for (int64_t ww = 0; ww < KW; ++ww)
      for (int64_t c = 0; c < CG; ++c)
        for (int64_t oo = 0; oo < O; ++oo) w[((oo * CG + c) * KH + h) * KW + ww] = k[((h * KW + ww) * CG + c) * O + oo];
  const std::string wname = e.FloatInit(e.NodeThrough(kv).name, {O, CG, KH, KW}, w);
  const auto hd = graph::ComputeWindow(xs[1], KH, o.stride_h, o.dilation_h, o.padding);
  const auto wd = graph::ComputeWindow(xs[2], KW, o.stride_w, o.dilation_w, o.padding);
  e.Set(n, e.Op("Conv", {x, wname}, n.name,
                {AttrInts("kernel_shape", {KH, KW}), AttrInts("strides", {o.stride_h, o.stride_w}),
                 AttrInts("dilations", {o.dilation_h, o.dilation_w}), AttrInt("group", o.groups),
                 AttrInts("pads", {hd.pad_before, wd.pad_before, hd.pad_after, wd.pad_after})}));
  return Status::OK();
}

}  // namespace

void RegisterConvOnnx(OnnxTable& t) { t.Set(OpKind::kConv2D, Conv); }

}  // namespace strata::keras::onnx
