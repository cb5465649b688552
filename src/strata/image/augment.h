// Decode + augment one image into a float or bf16 [H, W, C] slot: the per-element work
// of an image input pipeline, in one pass where it can be.
//
//   encoded bytes ─► header ─► crop rectangle (random/central, from the element's
//   SeedStream) ─► JPEG decode at the smallest DCT scale that keeps the crop >= the
//   output ─► crop view ─► resize with flips folded in, straight to f32 ─► brightness,
//   contrast, saturation, hue ─► rotation ─► (x - mean) / std, f32 or bf16.
//
// Every random choice comes from SeedStream(seed, element_index), drawn in the fixed
// order above, so an element's pixels do not depend on threads or order. Run() is
// thread-safe and allocation-free in steady state (per-thread scratch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/status.h"
#include "strata/core/tensor.h"
#include "strata/image/crop.h"
#include "strata/image/image.h"
#include "strata/image/normalize.h"
#include "strata/image/resize.h"

namespace strata {
class ThreadPool;
}

namespace strata::image {

enum class CropMode { kNone, kCentral, kRandom, kRandomResized };

struct AugmentOptions {
  int height = 224, width = 224;  // output size
  int channels = 3;               // 1 or 3 (JPEG), 1..4 (PNG)
  CropMode crop = CropMode::kNone;
  float central_fraction = 0.875f;             // kCentral: tf.image.central_crop fraction
  float random_crop_fraction = 0.875f;         // kRandom: crop side = fraction of each side
  RandomResizedCropOptions random_resized{};   // kRandomResized
  ResizeMethod resize = ResizeMethod::kBilinear;
  bool dct_scaling = true;        // decode JPEGs at the smallest DCT scale that suffices
  float flip_left_right = 0;      // probability
  float flip_up_down = 0;         // probability
  float brightness = 0;           // max delta, 0..1 scale as tf.image.random_brightness
  float contrast_lower = 1, contrast_upper = 1;
  float saturation_lower = 1, saturation_upper = 1;  // flowers recipes: 0 and 2
  float hue = 0;                  // max delta in turns, <= 0.5
  float rotation = 0;             // max angle in radians
  float rotation_fill = 0;        // constant fill, 0..255 scale
  Normalization normalization{};  // default x / 255
  DType dtype = DType::kF32;      // f32 or bf16
};

class Augmenter {
 public:
  // InvalidArgument for inconsistent options (colour jitter on gray, bad sizes, dtype).
  static Result<Augmenter> Make(const AugmentOptions& options, uint64_t seed);

  const AugmentOptions& options() const { return options_; }
  size_t output_bytes() const;  // H * W * C * sizeof(dtype)

  // Decodes `encoded` (JPEG or PNG) and writes element `element_index` to `out`.
  Status Run(std::string_view encoded, uint64_t element_index, void* out) const;
  // The same from already decoded pixels.
  Status RunDecoded(const ImageView& image, uint64_t element_index, void* out) const;
  // encoded[i] becomes element first_element + i of `batch` ([B, H, W, C], dtype as
  // options). The first error is returned, prefixed with its batch index.
  Status RunBatch(const std::vector<std::string_view>& encoded, uint64_t first_element, Tensor* batch,
                  ThreadPool* pool = nullptr) const;

 private:
  Augmenter(const AugmentOptions& o, uint64_t seed) : options_(o), seed_(seed) {}
  CropRect ChooseCrop(int height, int width, SeedStream& rng) const;
  Status Finish(const ImageView& cropped, SeedStream& rng, void* out) const;

  AugmentOptions options_;
  uint64_t seed_;
};

}  // namespace strata::image
