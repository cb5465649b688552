// Colour adjustments on float HWC images (values on the 0..255 scale), in place.
// The definitions are TensorFlow's tf.image.adjust_*; the random_* forms draw their
// factor from a SeedStream (random.h) so a seed reproduces the same pixels.
#pragma once

#include <cstdint>

#include "strata/core/status.h"
#include "strata/image/random.h"

namespace strata::image {

// A float image: `pixels` pixels of `channels` interleaved values.            // [H*W, C]
struct FloatPixels {
  float* data = nullptr;
  int64_t pixels = 0;
  int channels = 0;
};

// x + delta (delta on the 0..255 scale). No clipping, as tf.image.adjust_brightness.
void AdjustBrightness(FloatPixels img, float delta);
// (x - mean_c) * factor + mean_c with mean_c the image's per-channel mean.
void AdjustContrast(FloatPixels img, float factor);
// HSV saturation scaled by factor >= 0 and clipped to [0, 1]. RGB (3 channels) only.
Status AdjustSaturation(FloatPixels img, float factor);
// HSV hue rotated by delta turns, delta in [-1, 1]. RGB only.
Status AdjustHue(FloatPixels img, float delta);

// Random forms: the factor is drawn uniformly from the given range.
void RandomBrightness(FloatPixels img, float max_delta, SeedStream& rng);        // [-max_delta, max_delta]
void RandomContrast(FloatPixels img, float lower, float upper, SeedStream& rng);
Status RandomSaturation(FloatPixels img, float lower, float upper, SeedStream& rng);  // flowers: [0, 2]
Status RandomHue(FloatPixels img, float max_delta, SeedStream& rng);             // [-max_delta, max_delta]

}  // namespace strata::image
