// Reference kernels of the loss family: SoftmaxCrossEntropy over integer labels (with label
// smoothing), MeanSquaredError, and their gradients. Labels arrive as doubles.
#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

Status SoftmaxCrossEntropy(const KernelContext& c) {  // inputs logits, labels; outputs loss, probabilities
  const Vec &x = c.in(0), &labels = c.in(1);
  Vec& p = c.out(1);
  const Shape& xs = c.in_shape(0);
  const int64_t N = xs[0], K = xs[1];
  const double eps = c.node.attrs.label_smoothing;
  double loss = 0;
  for (int64_t r = 0; r < N; ++r) {
    const double lab = labels[r];
    if (!(lab >= 0 && lab < static_cast<double>(K)))
      return InvalidArgument(c.label + "label " + std::to_string(static_cast<int64_t>(lab)) + " of example " +
                             std::to_string(r) + " is outside [0, " + std::to_string(K) + ")");
    double mx = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t k = 0; k < K; ++k) mx = std::max(mx, x[r * K + k]);
    for (int64_t k = 0; k < K; ++k) s += std::exp(x[r * K + k] - mx);
    const double lse = mx + std::log(s);
    for (int64_t k = 0; k < K; ++k) {
      p[r * K + k] = std::exp(x[r * K + k] - lse);
      const double q = (k == static_cast<int64_t>(lab) ? 1 - eps : 0) + eps / static_cast<double>(K);
      loss -= q * (x[r * K + k] - lse);
    }
  }
  c.out(0)[0] = loss / static_cast<double>(N);
  return Status::OK();
}

Status SoftmaxCrossEntropyGrad(const KernelContext& c) {  // inputs probabilities, labels, dloss
  const Vec &p = c.in(0), &labels = c.in(1);
  Vec& dx = c.out(0);
  const Shape& ps = c.in_shape(0);
  const int64_t N = ps[0], K = ps[1];
  const double eps = c.node.attrs.label_smoothing, dl = c.in(2)[0];
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const double q = (k == static_cast<int64_t>(labels[r]) ? 1 - eps : 0) + eps / static_cast<double>(K);
      dx[r * K + k] = (p[r * K + k] - q) * dl / static_cast<double>(N);
    }
  return Status::OK();
}

Status MeanSquaredError(const KernelContext& c) {
  const Vec &a = c.in(0), &b = c.in(1);
  double s = 0;
  for (size_t e = 0; e < a.size(); ++e) s += (a[e] - b[e]) * (a[e] - b[e]);
  c.out(0)[0] = s / static_cast<double>(a.size());
  return Status::OK();
}

Status MeanSquaredErrorGrad(const KernelContext& c) {  // inputs a, b, dloss: d/da mean((a - b)^2)
  const Vec &a = c.in(0), &b = c.in(1);
  Vec& da = c.out(0);
  const double dl = c.in(2)[0];
  for (size_t e = 0; e < da.size(); ++e) da[e] = 2 * (a[e] - b[e]) * dl / static_cast<double>(da.size());
  return Status::OK();
}

}  // namespace

void RegisterLossOps(KernelTable& t) {
  t.SetAll({{OpKind::kSoftmaxCrossEntropy, SoftmaxCrossEntropy},
            {OpKind::kSoftmaxCrossEntropyGrad, SoftmaxCrossEntropyGrad}, {OpKind::kMeanSquaredError, MeanSquaredError},
            {OpKind::kMeanSquaredErrorGrad, MeanSquaredErrorGrad}});
}

}  // namespace strata::backend::reference
