#include "strata/image/crop.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace strata::image {

CropRect CentralCropRect(int height, int width, float fraction) {
  fraction = std::clamp(fraction, 1e-6f, 1.0f);
  const int h = std::max(1, static_cast<int>(height * fraction)), w = std::max(1, static_cast<int>(width * fraction));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Result<CropRect> RandomCropRect(int height, int width, int crop_h, int crop_w, SeedStream& rng) {
  if (crop_h <= 0 || crop_w <= 0 || crop_h > height || crop_w > width) {
    return InvalidArgument("random crop " + std::to_string(crop_h) + "x" + std::to_string(crop_w) +
                           " does not fit in " + std::to_string(height) + "x" + std::to_string(width));
  }
  const int y = static_cast<int>(rng.UniformInt(height - crop_h + 1));
  const int x = static_cast<int>(rng.UniformInt(width - crop_w + 1));
  return CropRect{y, x, crop_h, crop_w};
}

CropRect RandomResizedCropRect(int height, int width, const RandomResizedCropOptions& o, SeedStream& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.Uniform(o.area_min, o.area_max);
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * rng.Uniform());
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int y = static_cast<int>(rng.UniformInt(height - h + 1));
      const int x = static_cast<int>(rng.UniformInt(width - w + 1));
      return {y, x, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < o.ratio_min) h = std::max(1, static_cast<int>(std::lround(w / o.ratio_min)));
  else if (in_ratio > o.ratio_max) w = std::max(1, static_cast<int>(std::lround(h * o.ratio_max)));
  h = std::min(h, height);
  w = std::min(w, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace strata::image
