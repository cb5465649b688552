// Decode any supported image (JPEG or PNG, recognised by its first bytes) to u8 HWC.
//
// The one entry point the input pipeline calls: it sniffs the format, forwards the
// common options, and returns errors that the caller prefixes with the record's name
// ("train-00003.tfrec record 17 feature 'image': JPEG decode: Premature end ...").
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/core/status.h"
#include "strata/image/image.h"

namespace strata::image {

enum class ImageFormat { kUnknown, kJpeg, kPng };

ImageFormat SniffFormat(std::string_view bytes);
const char* FormatName(ImageFormat f);  // "JPEG", "PNG", "unknown"

struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int height = 0, width = 0, channels = 0;  // as stored
};
// Reads only the header.
Result<ImageInfo> ReadImageInfo(std::string_view bytes);

struct DecodeOptions {
  int channels = 3;    // 0 as stored; JPEG supports 1 and 3, PNG 1..4
  int min_height = 0;  // JPEG only: decode at the smallest DCT scale still >= this ...
  int min_width = 0;   // ... and this (PNG has no scaled decode; it ignores them)
  bool fast_dct = true;  // JPEG IDCT: TensorFlow's INTEGER_FAST default; false = INTEGER_ACCURATE
  int64_t max_pixels = int64_t{1} << 28;
};

Status DecodeImage(std::string_view bytes, const DecodeOptions& options, Image* out);

}  // namespace strata::image
