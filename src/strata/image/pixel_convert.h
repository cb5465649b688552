// Channel-count conversion between 8-bit pixel layouts (1 gray, 2 gray+alpha, 3 RGB,
// 4 RGBA). Colour to gray uses the ITU-R 601 luma weights (0.299, 0.587, 0.114) in
// 16-bit fixed point; a missing alpha becomes 255; a dropped alpha is dropped.
#pragma once

#include <cstdint>

namespace strata::image {

// src: [n, src_channels] -> dst: [n, dst_channels]. Channels are 1..4.
void ConvertChannels(const uint8_t* src, int src_channels, uint8_t* dst, int dst_channels, int64_t n);

inline uint8_t Luma601(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

}  // namespace strata::image
