#include "strata/backend/cpu/norm_kernels.h"

#include <algorithm>
#include <cmath>

namespace strata::backend::cpu {

void UpdateMovingStatistics(const float* mean, const float* var, int64_t channels, float momentum, float unbias,
                            float* moving_mean, float* moving_var) {
  const float mom = momentum;
  for (int64_t c = 0; c < channels; ++c) {
    moving_mean[c] = moving_mean[c] * mom + mean[c] * (1 - mom);
    moving_var[c] = moving_var[c] * mom + var[c] * unbias * (1 - mom);
  }
}

Status SyncBatchNormForward(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t channels,
                            float epsilon, float momentum, const CrossReplicaSum& sum, double* acc,
                            float* moving_mean, float* moving_var, float* y, float* mean, float* var) {
  const int64_t M = rows, C = channels;
  double* s1 = acc;     // sum x [C], then the affine scale a; s1[2 * C]: the count
  double* s2 = s1 + C;  // sum x^2 [C], then the affine shift b
  std::fill(acc, acc + 2 * C + 1, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * C;
    for (int64_t c = 0; c < C; ++c) {
      const double v = row[c];
      s1[c] += v;
      s2[c] += v * v;
    }
  }
  s1[2 * C] = static_cast<double>(M);
  if (sum) STRATA_RETURN_IF_ERROR(sum(s1, 2 * C + 1));
  const double total = s1[2 * C];
  const float unbias = total > 1 ? static_cast<float>(total / (total - 1)) : 1.0f;
  for (int64_t c = 0; c < C; ++c) {
    const double mu = s1[c] / total;
    mean[c] = static_cast<float>(mu);
    var[c] = static_cast<float>(std::max(s2[c] / total - mu * mu, 0.0));
    // Kernel-local per-channel affine form: y = x * a + b.
    const double a = gamma[c] / std::sqrt(static_cast<double>(var[c]) + epsilon);
    s1[c] = a;
    s2[c] = beta[c] - mu * a;
  }
  UpdateMovingStatistics(mean, var, C, momentum, unbias, moving_mean, moving_var);
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * C;
    float* out = y + m * C;
    for (int64_t c = 0; c < C; ++c) out[c] = static_cast<float>(row[c] * s1[c] + s2[c]);
  }
  return Status::OK();
}

Status SyncBatchNormBackward(const float* x, const float* gamma, const float* mean, const float* var, const float* dy,
                             int64_t rows, int64_t channels, float epsilon, const CrossReplicaSum& sum, double* acc,
                             float* dx, float* dgamma, float* dbeta) {
  const int64_t M = rows, C = channels;
  double* s1 = acc;               // sum dy [C], then its mean; s1[2 * C]: the count
  double* s2 = s1 + C;            // sum dy * x_hat [C], then its mean
  double* istd = s1 + 2 * C + 1;  // 1 / sigma [C]
  std::fill(s1, s1 + 2 * C + 1, 0.0);
  for (int64_t c = 0; c < C; ++c) istd[c] = 1 / std::sqrt(static_cast<double>(var[c]) + epsilon);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * C;
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
  if (sum) STRATA_RETURN_IF_ERROR(sum(s1, 2 * C + 1));
  const double total = s1[2 * C];
  for (int64_t c = 0; c < C; ++c) {
    s1[c] /= total;  // mean dy
    s2[c] /= total;  // mean dy * x_hat
  }
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * C;
    const float* dr = dy + m * C;
    float* out = dx + m * C;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (xr[c] - static_cast<double>(mean[c])) * istd[c];
      out[c] = static_cast<float>(gamma[c] * istd[c] * (dr[c] - s1[c] - xhat * s2[c]));
    }
  }
  return Status::OK();
}

}  // namespace strata::backend::cpu
