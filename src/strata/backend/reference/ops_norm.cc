// Reference kernels of the norm family: training BatchNorm (batch statistics, and the moving
// statistics updated in place), BatchNormInference (the moving statistics) and BatchNormGrad;
// LayerNorm over the last axis and LayerNormGrad.
#include <cmath>

#include "strata/backend/reference/ops.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is a list of ops

namespace {

// Inputs x, gamma, beta, moving mean, moving variance; outputs y, batch mean, batch variance.
Status BatchNorm(const KernelContext& c) {
  const Node& n = c.node;
  const Vec &x = c.in(0), &gamma = c.in(1), &beta = c.in(2);
  const Shape& xs = c.in_shape(0);
  const int64_t C = xs[-1], M = xs.num_elements() / C;
  Vec& y = c.out(0);
  Vec& mean = c.out(1);
  Vec& var = c.out(2);
  for (int64_t e = 0; e < M * C; ++e) mean[e % C] += x[e] / static_cast<double>(M);
  for (int64_t e = 0; e < M * C; ++e) {
    const double d = x[e] - mean[e % C];
    var[e % C] += d * d / static_cast<double>(M);
  }
  for (int64_t e = 0; e < M * C; ++e) {
    const int64_t ch = e % C;
    y[e] = gamma[ch] * (x[e] - mean[ch]) / std::sqrt(var[ch] + n.attrs.bn.epsilon) + beta[ch];
  }
  // Moving statistics (variables, updated in place); the variance update is unbiased.
  Vec& mm = c.leaves[n.inputs[3].node];
  Vec& mv = c.leaves[n.inputs[4].node];
  const double mom = n.attrs.bn.momentum;
  const double unbias = M > 1 ? static_cast<double>(M) / static_cast<double>(M - 1) : 1.0;
  for (int64_t ch = 0; ch < C; ++ch) {
    mm[ch] = mm[ch] * mom + mean[ch] * (1 - mom);
    mv[ch] = mv[ch] * mom + var[ch] * unbias * (1 - mom);
  }
  return Status::OK();
}

// Inputs x, gamma, beta, moving mean, moving variance.
Status BatchNormInference(const KernelContext& c) {
  const Vec &x = c.in(0), &gamma = c.in(1), &beta = c.in(2), &mean = c.in(3), &var = c.in(4);
  Vec& y = c.out(0);
  const int64_t C = c.in_shape(0)[-1];
  for (size_t e = 0; e < y.size(); ++e) {
    const int64_t ch = static_cast<int64_t>(e) % C;
    y[e] = gamma[ch] * (x[e] - mean[ch]) / std::sqrt(var[ch] + c.node.attrs.bn.epsilon) + beta[ch];
  }
  return Status::OK();
}

// Inputs x, gamma, batch mean, batch variance, dy; outputs dx, dgamma, dbeta.
Status BatchNormGrad(const KernelContext& c) {
  const Vec &x = c.in(0), &gamma = c.in(1), &mean = c.in(2), &var = c.in(3), &dy = c.in(4);
  const Shape& xs = c.in_shape(0);
  const int64_t C = xs[-1], M = xs.num_elements() / C;
  Vec& dx = c.out(0);
  Vec& dg = c.out(1);
  Vec& db = c.out(2);
  Vec istd(C);
  for (int64_t ch = 0; ch < C; ++ch) istd[ch] = 1 / std::sqrt(var[ch] + c.node.attrs.bn.epsilon);
  for (int64_t e = 0; e < M * C; ++e) {
    const int64_t ch = e % C;
    const double xhat = (x[e] - mean[ch]) * istd[ch];
    db[ch] += dy[e];
    dg[ch] += dy[e] * xhat;
  }
  for (int64_t e = 0; e < M * C; ++e) {
    const int64_t ch = e % C;
    const double xhat = (x[e] - mean[ch]) * istd[ch];
    dx[e] = gamma[ch] * istd[ch] / static_cast<double>(M) * (static_cast<double>(M) * dy[e] - db[ch] - xhat * dg[ch]);
  }
  return Status::OK();
}

// Inputs x, gamma, beta; outputs y, and each row's mean and variance (rows: all axes but the last).
Status LayerNorm(const KernelContext& c) {
  const Vec &x = c.in(0), &gamma = c.in(1), &beta = c.in(2);
  const int64_t C = c.in_shape(0)[-1], rows = c.in_shape(0).num_elements() / C;
  Vec &y = c.out(0), &mean = c.out(1), &var = c.out(2);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * C];
    for (int64_t k = 0; k < C; ++k) mean[r] += xr[k] / static_cast<double>(C);
    for (int64_t k = 0; k < C; ++k) var[r] += (xr[k] - mean[r]) * (xr[k] - mean[r]) / static_cast<double>(C);
    const double istd = 1 / std::sqrt(var[r] + c.node.attrs.ln.epsilon);
    for (int64_t k = 0; k < C; ++k) y[r * C + k] = gamma[k] * (xr[k] - mean[r]) * istd + beta[k];
  }
  return Status::OK();
}

// Inputs x, gamma, mean, var, dy; outputs dx, dgamma, dbeta. With g = gamma dy along a row,
// dx = (g - mean(g) - x̂ mean(g x̂)) / σ.
Status LayerNormGrad(const KernelContext& c) {
  const Vec &x = c.in(0), &gamma = c.in(1), &mean = c.in(2), &var = c.in(3), &dy = c.in(4);
  const int64_t C = c.in_shape(0)[-1], rows = c.in_shape(0).num_elements() / C;
  Vec &dx = c.out(0), &dgamma = c.out(1), &dbeta = c.out(2);
  for (int64_t r = 0; r < rows; ++r) {
    const double istd = 1 / std::sqrt(var[r] + c.node.attrs.ln.epsilon);
    double g_mean = 0, gx_mean = 0;
    for (int64_t k = 0; k < C; ++k) {
      const int64_t e = r * C + k;
      const double xhat = (x[e] - mean[r]) * istd;
      dbeta[k] += dy[e];
      dgamma[k] += dy[e] * xhat;
      g_mean += gamma[k] * dy[e] / static_cast<double>(C);
      gx_mean += gamma[k] * dy[e] * xhat / static_cast<double>(C);
    }
    for (int64_t k = 0; k < C; ++k) {
      const int64_t e = r * C + k;
      const double xhat = (x[e] - mean[r]) * istd;
      dx[e] = (gamma[k] * dy[e] - g_mean - xhat * gx_mean) * istd;
    }
  }
  return Status::OK();
}

}  // namespace

void RegisterNormOps(KernelTable& t) {
  t.SetAll({{OpKind::kLayerNorm, LayerNorm}, {OpKind::kLayerNormGrad, LayerNormGrad}, {OpKind::kBatchNorm, BatchNorm},
            {OpKind::kBatchNormInference, BatchNormInference}, {OpKind::kBatchNormGrad, BatchNormGrad}});
}

}  // namespace strata::backend::reference
