// PNG decode and encode through libspng.
//
// Decode accepts every PNG colour type and bit depth (gray 1/2/4/8/16, gray+alpha 8/16,
// RGB 8/16, RGBA 8/16, palette 1/2/4/8 with or without tRNS) and produces u8 HWC with the
// requested channels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA, or 0 for "as stored" (palette
// counts as RGB, or RGBA when it has a tRNS chunk). 16-bit samples keep their high byte.
// Colour to gray uses the ITU-R 601 luma weights TensorFlow's rgb_to_grayscale uses; a
// missing alpha channel is opaque (255); a dropped alpha channel is simply dropped.
//
// CRCs are checked; a corrupt or truncated file is Corruption/Truncated with libspng's
// reason, an image above `max_pixels` is refused from its header before allocation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/image/image.h"

namespace strata::image {

struct PngHeader {
  int height = 0;
  int width = 0;
  int channels = 0;   // as stored: 1, 2, 3 or 4 (palette: 3, or 4 with tRNS)
  int bit_depth = 0;  // 1, 2, 4, 8 or 16
  int color_type = 0; // PNG colour type: 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
};

Result<PngHeader> ReadPngHeader(std::string_view bytes);

struct PngDecodeOptions {
  int channels = 0;  // 0 (as stored), 1, 2, 3 or 4
  int64_t max_pixels = int64_t{1} << 28;
};

Status DecodePng(std::string_view bytes, const PngDecodeOptions& options, Image* out);

struct PngEncodeOptions {
  int compression_level = 6;  // zlib level 0..9; TFDS uses TensorFlow's default (6)
};

// `src` may have 1, 2, 3 or 4 channels; writes an 8-bit PNG.
Status EncodePng(const ImageView& src, const PngEncodeOptions& options, std::string* out);

}  // namespace strata::image
