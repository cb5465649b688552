#include "strata/image/color.h"

#include <string>

#include "strata/image/kernels.h"

namespace strata::image {

void AdjustBrightness(FloatPixels img, float delta) {
  const float scale[4] = {1, 1, 1, 1}, bias[4] = {delta, delta, delta, delta};
  kernels::Kernels().affine_f32(img.data, img.pixels, img.channels, scale, bias);
}

void AdjustContrast(FloatPixels img, float factor) {
  if (img.pixels == 0) return;
  double sums[4] = {0, 0, 0, 0};
  const kernels::KernelTable& kt = kernels::Kernels();
  kt.channel_sums(img.data, img.pixels, img.channels, sums);
  float scale[4], bias[4];
  for (int c = 0; c < img.channels; ++c) {
    const float mean = static_cast<float>(sums[c] / static_cast<double>(img.pixels));
    scale[c] = factor;
    bias[c] = mean * (1 - factor);
  }
  kt.affine_f32(img.data, img.pixels, img.channels, scale, bias);
}

static Status NeedRgb(const char* what, const FloatPixels& img) {
  if (img.channels == 3) return Status::OK();
  return InvalidArgument(std::string(what) + ": needs RGB (3 channels), image has " + std::to_string(img.channels));
}

Status AdjustSaturation(FloatPixels img, float factor) {
  STRATA_RETURN_IF_ERROR(NeedRgb("adjust_saturation", img));
  if (!(factor >= 0)) return InvalidArgument("adjust_saturation: factor must be >= 0, not " + std::to_string(factor));
  kernels::Kernels().saturation_rgb(img.data, img.pixels, factor);
  return Status::OK();
}

Status AdjustHue(FloatPixels img, float delta) {
  STRATA_RETURN_IF_ERROR(NeedRgb("adjust_hue", img));
  if (!(delta >= -1 && delta <= 1)) return InvalidArgument("adjust_hue: delta must be in [-1, 1], not " + std::to_string(delta));
  kernels::Kernels().hue_rgb(img.data, img.pixels, delta);
  return Status::OK();
}

void RandomBrightness(FloatPixels img, float max_delta, SeedStream& rng) {
  AdjustBrightness(img, rng.Uniform(-max_delta, max_delta));
}
void RandomContrast(FloatPixels img, float lower, float upper, SeedStream& rng) {
  AdjustContrast(img, rng.Uniform(lower, upper));
}
Status RandomSaturation(FloatPixels img, float lower, float upper, SeedStream& rng) {
  return AdjustSaturation(img, rng.Uniform(lower, upper));
}
Status RandomHue(FloatPixels img, float max_delta, SeedStream& rng) {
  return AdjustHue(img, rng.Uniform(-max_delta, max_delta));
}

}  // namespace strata::image
