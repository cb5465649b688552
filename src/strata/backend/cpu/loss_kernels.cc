#include "strata/backend/cpu/loss_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace strata::backend::cpu {

Status SoftmaxCrossEntropyForward(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                                  float smoothing, float* probs, float* loss) {
  const int64_t N = rows, K = classes;
  const float eps = smoothing;
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    const int32_t lab = labels[r];
    if (lab < 0 || lab >= K)
      return InvalidArgument("label " + std::to_string(lab) + " of example " + std::to_string(r) + " is outside [0, " +
                             std::to_string(K) + ")");
    const float* z = logits + r * K;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < K; ++c) mx = std::max(mx, z[c]);
    float s = 0;
    for (int64_t c = 0; c < K; ++c) s += (probs[r * K + c] = std::exp(z[c] - mx));
    const float lse = mx + std::log(s), inv = 1.0f / s;
    float row = 0;
    for (int64_t c = 0; c < K; ++c) {
      probs[r * K + c] *= inv;
      const float q = (c == lab ? 1 - eps : 0) + eps / static_cast<float>(K);
      row -= q * (z[c] - lse);
    }
    total += row;
  }
  *loss = static_cast<float>(total / static_cast<double>(N));
  return Status::OK();
}

void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, int64_t rows, int64_t classes,
                                 float smoothing, float dloss, float* dlogits) {
  const int64_t N = rows, K = classes;
  const float eps = smoothing;
  const float scale = dloss / static_cast<float>(N);
  const float off = eps / static_cast<float>(K);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < K; ++c)
      dlogits[r * K + c] = (probs[r * K + c] - off - (c == labels[r] ? 1 - eps : 0)) * scale;
}

float MeanSquaredError(const float* a, const float* b, int64_t count) {
  double s = 0;
  for (int64_t e = 0; e < count; ++e) s += static_cast<double>(a[e] - b[e]) * (a[e] - b[e]);
  return static_cast<float>(s / static_cast<double>(count));
}

void MeanSquaredErrorBackward(const float* a, const float* b, int64_t count, float dloss, float* da) {
  const float s = 2 * dloss / static_cast<float>(count);
  for (int64_t e = 0; e < count; ++e) da[e] = (a[e] - b[e]) * s;
}

}  // namespace strata::backend::cpu
