// Reference kernels of the conv family: Conv2D and its two gradients, all three as the same
// multiply-add taps read in a different direction.
#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

// Visits every (x index, w index, y index) multiply-add of a grouped, strided, dilated,
// padded 2-D convolution over NHWC input, HWIO kernel and NHWC output.
template <typename F>
void ForEachConvTap(const Shape& xs, const Shape& ks, const Shape& ys, const Conv2DOptions& o, F&& f) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const int64_t KH = ks[0], KW = ks[1], CG = ks[2], O = ks[3];
  const int64_t OH = ys[1], OW = ys[2], OG = O / o.groups;
  const WindowDim wh = ComputeWindow(H, KH, o.stride_h, o.dilation_h, o.padding);
  const WindowDim ww = ComputeWindow(W, KW, o.stride_w, o.dilation_w, o.padding);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t oc = 0; oc < O; ++oc) {
          const int64_t g = oc / OG;
          const int64_t yi = ((n * OH + oh) * OW + ow) * O + oc;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * o.stride_h - wh.pad_before + kh * o.dilation_h;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * o.stride_w - ww.pad_before + kw * o.dilation_w;
              if (iw < 0 || iw >= W) continue;
              for (int64_t ci = 0; ci < CG; ++ci) {
                const int64_t xi = ((n * H + ih) * W + iw) * C + g * CG + ci;
                const int64_t wi = ((kh * KW + kw) * CG + ci) * O + oc;
                f(xi, wi, yi);
              }
            }
          }
        }
}

Status Conv2D(const KernelContext& c) {  // inputs x, kernel
  const Vec &x = c.in(0), &w = c.in(1);
  Vec& y = c.out(0);
  ForEachConvTap(c.in_shape(0), c.in_shape(1), c.out_shape(0), c.node.attrs.conv,
                 [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
  return Status::OK();
}

Status Conv2DBackpropInput(const KernelContext& c) {  // inputs dy, kernel
  const Vec &dy = c.in(0), &w = c.in(1);
  Vec& dx = c.out(0);
  ForEachConvTap(c.out_shape(0), c.in_shape(1), c.in_shape(0), c.node.attrs.conv,
                 [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
  return Status::OK();
}

Status Conv2DBackpropFilter(const KernelContext& c) {  // inputs x, dy
  const Vec &x = c.in(0), &dy = c.in(1);
  Vec& dw = c.out(0);
  ForEachConvTap(c.in_shape(0), c.out_shape(0), c.in_shape(1), c.node.attrs.conv,
                 [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += x[xi] * dy[yi]; });
  return Status::OK();
}

}  // namespace

void RegisterConvOps(KernelTable& t) {
  t.SetAll({{OpKind::kConv2D, Conv2D}, {OpKind::kConv2DBackpropInput, Conv2DBackpropInput},
            {OpKind::kConv2DBackpropFilter, Conv2DBackpropFilter}});
}

}  // namespace strata::backend::reference
