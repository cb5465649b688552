// ONNX translation of the pool family: MaxPool and AvgPool, as GlobalMaxPool /
// GlobalAveragePool where the window is the whole image (GlobalAveragePooling2D's pool).
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

Status Pool(Exporter& e, const Node& n) {
  const Shape& xs = n.inputs[0].shape();
  const auto& o = n.attrs.pool;
  const int sh = o.stride_h > 0 ? o.stride_h : o.window_h, sw = o.stride_w > 0 ? o.stride_w : o.window_w;
  const bool max = n.kind == OpKind::kMaxPool;
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  const auto hd = graph::ComputeWindow(xs[1], o.window_h, sh, 1, o.padding);
  const auto wd = graph::ComputeWindow(xs[2], o.window_w, sw, 1, o.padding);
  if (o.window_h == xs[1] && o.window_w == xs[2] && hd.out == 1 && wd.out == 1 && hd.pad_before + hd.pad_after == 0 &&
      wd.pad_before + wd.pad_after == 0) {
    e.Set(n, e.Op(max ? "GlobalMaxPool" : "GlobalAveragePool", {x}, n.name));
    return Status::OK();
  }
  std::vector<Attr> attrs = {AttrInts("kernel_shape", {o.window_h, o.window_w}), AttrInts("strides", {sh, sw}),
                             AttrInts("pads", {hd.pad_before, wd.pad_before, hd.pad_after, wd.pad_after})};
  if (!max) attrs.push_back(AttrInt("count_include_pad", 0));  // Strata and TF average the window's real cells
  e.Set(n, e.Op(max ? "MaxPool" : "AveragePool", {x}, n.name, attrs));
  return Status::OK();
}

}  // namespace

void RegisterPoolOnnx(OnnxTable& t) {
  t.SetAll({{OpKind::kMaxPool, Pool}, {OpKind::kAvgPool, Pool}});
}

}  // namespace strata::keras::onnx
