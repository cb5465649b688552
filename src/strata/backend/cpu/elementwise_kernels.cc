#include "strata/backend/cpu/elementwise_kernels.h"

#include <algorithm>

#include "strata/backend/dropout_mask.h"

namespace strata::backend::cpu {

void DropoutForward(const float* x, int64_t count, float rate, uint64_t seed, uint64_t step, float* y, float* mask) {
  const float keep_scale = 1.0f / (1.0f - rate);
  for (int64_t e = 0; e < count; ++e) {
    mask[e] = DropoutUniform(seed, step, static_cast<uint64_t>(e)) < rate ? 0.0f : keep_scale;
    y[e] = x[e] * mask[e];
  }
}

std::vector<int32_t> BroadcastSourceIndex(const Shape& out, const std::vector<int>& axes) {
  // The source's stride along each output axis: 0 along the broadcast axes.
  std::vector<int64_t> stride(out.rank(), 0);
  int64_t mul = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
    stride[d] = mul;
    mul *= out[d];
  }
  std::vector<int32_t> index(out.num_elements());
  for (int64_t e = 0; e < out.num_elements(); ++e) {
    int64_t lin = e, r = 0;
    for (int d = out.rank() - 1; d >= 0; --d) {
      r += lin % out[d] * stride[d];
      lin /= out[d];
    }
    index[e] = static_cast<int32_t>(r);
  }
  return index;
}

void Gather(const float* x, const int32_t* index, int64_t count, float* y) {
  for (int64_t e = 0; e < count; ++e) y[e] = x[index[e]];
}

void SumMiddleAxis(const float* x, int64_t a, int64_t r, int64_t b, double scale, float* y) {
  if (b == 1) {  // a sum over the innermost axes: four independent f64 partial sums
    for (int64_t i = 0; i < a; ++i) {
      const float* row = x + i * r;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t j = 0;
      for (; j + 4 <= r; j += 4) {
        s0 += row[j];
        s1 += row[j + 1];
        s2 += row[j + 2];
        s3 += row[j + 3];
      }
      for (; j < r; ++j) s0 += row[j];
      y[i] = static_cast<float>((s0 + s1 + s2 + s3) * scale);
    }
    return;
  }
  thread_local std::vector<double> acc;
  acc.resize(static_cast<size_t>(b));
  for (int64_t i = 0; i < a; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    double* s = acc.data();
    for (int64_t j = 0; j < r; ++j) {
      const float* row = x + (i * r + j) * b;
      for (int64_t k = 0; k < b; ++k) s[k] += row[k];
    }
    for (int64_t k = 0; k < b; ++k) y[i * b + k] = static_cast<float>(s[k] * scale);
  }
}

}  // namespace strata::backend::cpu
