// Reference kernels of the pool family: MaxPool, AvgPool and their gradients over NHWC data.
#include <algorithm>
#include <limits>

#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

using Taps = std::vector<int64_t>;  // input indices of one window's valid taps

// Visits every (output index, input index) pair of a pooling window over NHWC data, with
// the count of valid (unpadded) taps of the window.
template <typename F>
void ForEachPoolWindow(const Shape& xs, const Shape& ys, const PoolOptions& o, F&& f) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3], OH = ys[1], OW = ys[2];
  const WindowDim wh = ComputeWindow(H, o.window_h, o.stride_h, 1, o.padding);
  const WindowDim ww = ComputeWindow(W, o.window_w, o.stride_w, 1, o.padding);
  Taps taps;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          taps.clear();
          for (int64_t kh = 0; kh < o.window_h; ++kh) {
            const int64_t ih = oh * o.stride_h - wh.pad_before + kh;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < o.window_w; ++kw) {
              const int64_t iw = ow * o.stride_w - ww.pad_before + kw;
              if (iw < 0 || iw >= W) continue;
              taps.push_back(((n * H + ih) * W + iw) * C + c);
            }
          }
          f(((n * OH + oh) * OW + ow) * C + c, taps);
        }
}

Status MaxPool(const KernelContext& c) {
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  ForEachPoolWindow(c.in_shape(0), c.out_shape(0), c.node.attrs.pool, [&](int64_t yi, const Taps& taps) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t t : taps) m = std::max(m, x[t]);
    y[yi] = m;
  });
  return Status::OK();
}

Status MaxPoolGrad(const KernelContext& c) {  // inputs x, dy: the gradient goes to the first maximum
  const Vec &x = c.in(0), &dy = c.in(1);
  Vec& dx = c.out(0);
  ForEachPoolWindow(c.in_shape(0), c.in_shape(1), c.node.attrs.pool, [&](int64_t yi, const Taps& taps) {
    int64_t best = taps[0];
    for (int64_t t : taps)
      if (x[t] > x[best]) best = t;
    dx[best] += dy[yi];
  });
  return Status::OK();
}

Status AvgPool(const KernelContext& c) {
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  ForEachPoolWindow(c.in_shape(0), c.out_shape(0), c.node.attrs.pool, [&](int64_t yi, const Taps& taps) {
    double s = 0;
    for (int64_t t : taps) s += x[t];
    y[yi] = s / static_cast<double>(taps.size());
  });
  return Status::OK();
}

Status AvgPoolGrad(const KernelContext& c) {  // input dy
  const Vec& dy = c.in(0);
  Vec& dx = c.out(0);
  ForEachPoolWindow(c.out_shape(0), c.in_shape(0), c.node.attrs.pool, [&](int64_t yi, const Taps& taps) {
    for (int64_t t : taps) dx[t] += dy[yi] / static_cast<double>(taps.size());
  });
  return Status::OK();
}

}  // namespace

void RegisterPoolOps(KernelTable& t) {
  t.SetAll({{OpKind::kMaxPool, MaxPool}, {OpKind::kAvgPool, AvgPool}, {OpKind::kMaxPoolGrad, MaxPoolGrad},
            {OpKind::kAvgPoolGrad, AvgPoolGrad}});
}

}  // namespace strata::backend::reference
