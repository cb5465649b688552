#include "strata/image/pixel_convert.h"

#include <cstring>

namespace strata::image {

void ConvertChannels(const uint8_t* src, int sc, uint8_t* dst, int dc, int64_t n) {
  if (sc == dc) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sc);
    return;
  }
  for (int64_t i = 0; i < n; ++i, src += sc, dst += dc) {
    // Normalise the source pixel to (gray, r, g, b, a).
    uint8_t r, g, b, a = 255;
    if (sc <= 2) {
      r = g = b = src[0];
      if (sc == 2) a = src[1];
    } else {
      r = src[0], g = src[1], b = src[2];
      if (sc == 4) a = src[3];
    }
    switch (dc) {
      case 1: dst[0] = sc <= 2 ? r : Luma601(r, g, b); break;
      case 2: dst[0] = sc <= 2 ? r : Luma601(r, g, b), dst[1] = a; break;
      case 3: dst[0] = r, dst[1] = g, dst[2] = b; break;
      default: dst[0] = r, dst[1] = g, dst[2] = b, dst[3] = a; break;
    }
  }
}

}  // namespace strata::image
