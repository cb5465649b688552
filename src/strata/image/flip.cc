#include "strata/image/flip.h"

#include <cstring>
#include <vector>

#include "strata/image/kernels.h"

namespace strata::image {

void FlipLeftRight(const float* src, int height, int width, int channels, float* dst) {
  thread_local std::vector<int32_t> index;  // [W * C]: element j reads (W-1-j/C)*C + j%C
  const int64_t n = static_cast<int64_t>(width) * channels;
  index.resize(n);
  for (int x = 0; x < width; ++x)
    for (int c = 0; c < channels; ++c) index[x * channels + c] = (width - 1 - x) * channels + c;
  const kernels::KernelTable& kt = kernels::Kernels();
  for (int y = 0; y < height; ++y) kt.gather(src + y * n, index.data(), n, dst + y * n);
}

void FlipUpDown(const float* src, int height, int width, int channels, float* dst) {
  const int64_t n = static_cast<int64_t>(width) * channels;
  for (int y = 0; y < height; ++y) std::memcpy(dst + y * n, src + (height - 1 - y) * n, n * sizeof(float));
}

void FlipLeftRight(const ImageView& src, Image* dst) {
  uint8_t* out = dst->Reset(src.height, src.width, src.channels);
  const int c = src.channels, w = src.width;
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* o = out + static_cast<int64_t>(y) * w * c;
    for (int x = 0; x < w; ++x) std::memcpy(o + x * c, in + (w - 1 - x) * c, c);
  }
}

void FlipUpDown(const ImageView& src, Image* dst) {
  uint8_t* out = dst->Reset(src.height, src.width, src.channels);
  const size_t n = static_cast<size_t>(src.width) * src.channels;
  for (int y = 0; y < src.height; ++y) std::memcpy(out + y * n, src.row(src.height - 1 - y), n);
}

}  // namespace strata::image
