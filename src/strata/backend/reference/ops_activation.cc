// Reference kernels of the activation family: Activation, Softmax and MaskedSoftmax and their gradients.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

// GELU's tanh approximation: 0.5 x (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³).
constexpr double kGeluCubic = 0.044715;
double GeluTanhInner(double x) { return std::sqrt(2 / M_PI) * (x + kGeluCubic * x * x * x); }

double Act(Activation a, double x) {
  switch (a) {
    case Activation::kRelu: return x > 0 ? x : 0;
    case Activation::kRelu6: return std::min(std::max(x, 0.0), 6.0);
    case Activation::kGelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh: return 0.5 * x * (1 + std::tanh(GeluTanhInner(x)));
    case Activation::kSwish: return x / (1 + std::exp(-x));
    case Activation::kSigmoid: return 1 / (1 + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kLinear: return x;
    case Activation::kHardSigmoid: return std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case Activation::kHardSwish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
  }
  return x;
}

// d act / d x, given x or y as the forward op stored (graph/ops/activation.cc: ActivationGradUsesOutput).
double ActGrad(Activation a, double v) {
  switch (a) {
    case Activation::kRelu: return v > 0 ? 1 : 0;                 // v = y
    case Activation::kRelu6: return v > 0 && v < 6 ? 1 : 0;       // v = y
    case Activation::kSigmoid: return v * (1 - v);                // v = y
    case Activation::kTanh: return 1 - v * v;                     // v = y
    case Activation::kGelu: {                                     // v = x
      const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
      const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      return cdf + v * pdf;
    }
    case Activation::kGeluTanh: {                                 // v = x
      const double t = std::tanh(GeluTanhInner(v));
      return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * std::sqrt(2 / M_PI) * (1 + 3 * kGeluCubic * v * v);
    }
    case Activation::kSwish: {                                    // v = x
      const double s = 1 / (1 + std::exp(-v));
      return s + v * s * (1 - s);
    }
    case Activation::kLinear: return 1;
    case Activation::kHardSigmoid: return v > 0 && v < 1 ? 1.0 / 6 : 0;  // v = y
    case Activation::kHardSwish: return v < -3 ? 0 : v > 3 ? 1 : (2 * v + 3) / 6;  // v = x
  }
  return 1;
}

Status ActivationOp(const KernelContext& c) {
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  for (size_t e = 0; e < y.size(); ++e) y[e] = Act(c.node.attrs.activation, x[e]);
  return Status::OK();
}

Status ActivationGrad(const KernelContext& c) {  // inputs x or y (ActGrad), dy
  const Vec &v = c.in(0), &dy = c.in(1);
  Vec& dx = c.out(0);
  for (size_t e = 0; e < dx.size(); ++e) dx[e] = dy[e] * ActGrad(c.node.attrs.activation, v[e]);
  return Status::OK();
}

Status Softmax(const KernelContext& c) {
  const Vec& x = c.in(0);
  Vec& y = c.out(0);
  const Shape& xs = c.in_shape(0);
  const int64_t K = xs[-1], rows = xs.num_elements() / K;
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t k = 0; k < K; ++k) mx = std::max(mx, x[r * K + k]);
    for (int64_t k = 0; k < K; ++k) s += (y[r * K + k] = std::exp(x[r * K + k] - mx));
    for (int64_t k = 0; k < K; ++k) y[r * K + k] /= s;
  }
  return Status::OK();
}

// x [B, G..., T, S], mask [B, T, S]: row (b, g, t) of x takes row (b, t) of the mask.
Status MaskedSoftmax(const KernelContext& c) {
  const Vec &x = c.in(0), &m = c.in(1);
  Vec& y = c.out(0);
  const Shape& xs = c.in_shape(0);
  const int64_t S = xs[-1], T = xs[-2], B = xs[0], G = xs.num_elements() / (B * T * S);
  std::vector<double> z(static_cast<size_t>(S));
  for (int64_t r = 0; r < B * G * T; ++r) {
    const double* mrow = &m[static_cast<size_t>((r / (G * T) * T + r % T) * S)];
    double mx = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t k = 0; k < S; ++k) mx = std::max(mx, z[k] = x[r * S + k] + (1 - mrow[k]) * graph::kMaskedScore);
    for (int64_t k = 0; k < S; ++k) s += (y[r * S + k] = std::exp(z[k] - mx));
    for (int64_t k = 0; k < S; ++k) y[r * S + k] /= s;
  }
  return Status::OK();
}

Status SoftmaxGrad(const KernelContext& c) {  // inputs y, dy
  const Vec &y = c.in(0), &dy = c.in(1);
  Vec& dx = c.out(0);
  const Shape& ys = c.in_shape(0);
  const int64_t K = ys[-1], rows = ys.num_elements() / K;
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t k = 0; k < K; ++k) dot += y[r * K + k] * dy[r * K + k];
    for (int64_t k = 0; k < K; ++k) dx[r * K + k] = y[r * K + k] * (dy[r * K + k] - dot);
  }
  return Status::OK();
}

}  // namespace

void RegisterActivationOps(KernelTable& t) {
  t.SetAll({{OpKind::kActivation, ActivationOp}, {OpKind::kActivationGrad, ActivationGrad}, {OpKind::kSoftmax, Softmax},
            {OpKind::kMaskedSoftmax, MaskedSoftmax}, {OpKind::kSoftmaxGrad, SoftmaxGrad}});
}

}  // namespace strata::backend::reference
