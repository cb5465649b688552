// Rotation of float HWC images about their centre, bilinear, with a constant fill for
// the corners that come from outside (Keras RandomRotation with fill_mode="constant").
#pragma once

#include "strata/core/status.h"
#include "strata/image/random.h"

namespace strata::image {

// src, dst: [H, W, C] f32, C 1..4, no overlap. Positive angles turn the content
// counter-clockwise (as Keras). `fill` holds C values (nullptr: zeros).
Status Rotate(const float* src, int height, int width, int channels, float angle_radians, const float* fill,
              float* dst);
// Angle drawn uniformly from [-max_radians, max_radians].
Status RandomRotate(const float* src, int height, int width, int channels, float max_radians, const float* fill,
                    SeedStream& rng, float* dst);

}  // namespace strata::image
