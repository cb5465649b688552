// Resize u8 HWC images, bilinear or area, optionally flipped on the way.
//
// Both methods are separable filters evaluated in two passes: each output row first
// blends the few input rows it needs (contiguous, vectorised), then each output element
// gathers its taps from that float row (vector gathers). Flips only reverse the tap
// tables, and a crop is just a strided source view, so crop + flip + resize + cast to
// float is a single pass over the pixels.
//
// Bilinear matches tf.image.resize(method="bilinear", antialias=False): half-pixel
// centres, edge pixels repeated. Area matches tf.image.resize(method="area"): every
// output pixel is the coverage-weighted mean of the input box it covers.
// Output values stay on the 0..255 scale.
#pragma once

#include "strata/core/status.h"
#include "strata/image/image.h"

namespace strata::image {

enum class ResizeMethod { kBilinear, kArea };
const char* ResizeMethodName(ResizeMethod m);

struct ResizeOptions {
  ResizeMethod method = ResizeMethod::kBilinear;
  bool flip_left_right = false;  // output column x comes from source column W-1-x's place
  bool flip_up_down = false;
};

// src [H, W, C] (any row stride, C 1..4) -> dst [out_h, out_w, C] f32, contiguous.
Status ResizeToFloat(const ImageView& src, int out_h, int out_w, const ResizeOptions& options, float* dst);
// The same, rounded to u8 into `dst`.
Status Resize(const ImageView& src, int out_h, int out_w, const ResizeOptions& options, Image* dst);

// Scalar reference, computed per output pixel straight from the definitions above.
void ResizeToFloatReference(const ImageView& src, int out_h, int out_w, const ResizeOptions& options, float* dst);

}  // namespace strata::image
