#include "strata/image/pad_crop.h"

#include <algorithm>
#include <cstring>

namespace strata::image {

void PadCropFlip(const float* src, int height, int width, int channels, PadCropPlacement p, float* dst) {
  const size_t row = static_cast<size_t>(width) * channels;
  // The output columns that read inside the input: x + dx in [0, width).
  const int x0 = std::max(0, -p.dx), x1 = std::min(width, width - p.dx);
  for (int y = 0; y < height; ++y) {
    float* out = dst + y * row;
    const int sy = y + p.dy;
    if (sy < 0 || sy >= height || x0 >= x1) {
      std::fill(out, out + row, 0.0f);
      continue;
    }
    std::fill(out, out + static_cast<size_t>(x0) * channels, 0.0f);
    std::fill(out + static_cast<size_t>(x1) * channels, out + row, 0.0f);
    const float* in = src + sy * row;
    if (!p.flip) {
      std::memcpy(out + static_cast<size_t>(x0) * channels, in + static_cast<size_t>(x0 + p.dx) * channels,
                  static_cast<size_t>(x1 - x0) * channels * sizeof(float));
      continue;
    }
    // Mirrored: input column sx of the flipped image is width - 1 - sx of the stored one.
    for (int x = x0; x < x1; ++x) {
      const float* pixel = in + static_cast<size_t>(width - 1 - (x + p.dx)) * channels;
      std::copy(pixel, pixel + channels, out + static_cast<size_t>(x) * channels);
    }
  }
}

}  // namespace strata::image
