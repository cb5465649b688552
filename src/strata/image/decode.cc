#include "strata/image/decode.h"

#include <cstring>

#include "strata/image/jpeg.h"
#include "strata/image/png.h"

namespace strata::image {

ImageFormat SniffFormat(std::string_view b) {
  if (b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF && static_cast<uint8_t>(b[1]) == 0xD8 &&
      static_cast<uint8_t>(b[2]) == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

const char* FormatName(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    default: return "unknown";
  }
}

namespace {
Status UnknownFormat(std::string_view b) {
  static const char* hex = "0123456789abcdef";
  std::string first;
  for (size_t i = 0; i < b.size() && i < 8; ++i) {
    first += hex[static_cast<uint8_t>(b[i]) >> 4];
    first += hex[static_cast<uint8_t>(b[i]) & 15];
  }
  return Unimplemented("not a JPEG or PNG image (" + std::to_string(b.size()) + " bytes, starting " +
                       (first.empty() ? "<empty>" : first) + ")");
}
}  // namespace

Result<ImageInfo> ReadImageInfo(std::string_view bytes) {
  switch (SniffFormat(bytes)) {
    case ImageFormat::kJpeg: {
      STRATA_ASSIGN_OR_RETURN(JpegHeader h, ReadJpegHeader(bytes));
      return ImageInfo{ImageFormat::kJpeg, h.height, h.width, h.channels};
    }
    case ImageFormat::kPng: {
      STRATA_ASSIGN_OR_RETURN(PngHeader h, ReadPngHeader(bytes));
      return ImageInfo{ImageFormat::kPng, h.height, h.width, h.channels};
    }
    default: return UnknownFormat(bytes);
  }
}

Status DecodeImage(std::string_view bytes, const DecodeOptions& o, Image* out) {
  switch (SniffFormat(bytes)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(bytes,
                        {.channels = o.channels, .min_height = o.min_height, .min_width = o.min_width,
                         .fast_dct = o.fast_dct, .max_pixels = o.max_pixels},
                        out);
    case ImageFormat::kPng: return DecodePng(bytes, {.channels = o.channels, .max_pixels = o.max_pixels}, out);
    default: return UnknownFormat(bytes);
  }
}

}  // namespace strata::image
