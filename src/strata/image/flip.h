// Flips of HWC images. In the augmentation path flips are folded into the resize tap
// tables (resize.h) and cost nothing; these stand-alone forms serve images that are not
// resized. Float flips are vector gathers; u8 flips copy whole pixels.
#pragma once

#include "strata/core/status.h"
#include "strata/image/image.h"

namespace strata::image {

// src, dst: [H, W, C] f32 contiguous; dst must not overlap src.
void FlipLeftRight(const float* src, int height, int width, int channels, float* dst);
void FlipUpDown(const float* src, int height, int width, int channels, float* dst);
// u8 into a new image.
void FlipLeftRight(const ImageView& src, Image* dst);
void FlipUpDown(const ImageView& src, Image* dst);

}  // namespace strata::image
