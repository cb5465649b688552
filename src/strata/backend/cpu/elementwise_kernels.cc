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

}  // namespace strata::backend::cpu
