// Crop rectangles. A crop itself is a view (ImageView::Crop) and copies nothing; these
// functions only decide where it goes, the random ones from a SeedStream.
#pragma once

#include "strata/core/status.h"
#include "strata/image/random.h"

namespace strata::image {

struct CropRect {
  int y = 0, x = 0, height = 0, width = 0;
  bool operator==(const CropRect&) const = default;
};

// tf.image.central_crop: the centred rectangle keeping `fraction` (0, 1] of each side.
CropRect CentralCropRect(int height, int width, float fraction);
// A uniformly placed crop_h x crop_w window; InvalidArgument when it does not fit.
Result<CropRect> RandomCropRect(int height, int width, int crop_h, int crop_w, SeedStream& rng);

// Inception-style random resized crop (torchvision RandomResizedCrop, Keras
// RandomCrop-and-resize recipes): area fraction in [area_min, area_max], aspect ratio
// log-uniform in [ratio_min, ratio_max]; after 10 misses, the central crop with the
// ratio clamped into range.
struct RandomResizedCropOptions {
  float area_min = 0.08f, area_max = 1.0f;
  float ratio_min = 3.0f / 4, ratio_max = 4.0f / 3;
};
CropRect RandomResizedCropRect(int height, int width, const RandomResizedCropOptions& options, SeedStream& rng);

}  // namespace strata::image
