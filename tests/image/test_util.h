// Helpers shared by the image tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "strata/image/image.h"

namespace strata::image::testing {

inline std::string ReadTestFile(const std::string& name) {
  std::ifstream in(std::string(STRATA_TESTDATA) + "/image/" + name, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

template <typename T>
std::vector<T> ReadRaw(const std::string& name) {
  std::string bytes = ReadTestFile(name);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// A smooth-plus-noise test image: smooth gradients (like photos) with some texture.
inline Image MakeTestImage(int h, int w, int c, uint32_t seed = 1) {
  Image img;
  uint8_t* p = img.Reset(h, w, c);
  std::mt19937 gen(seed);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        p[(y * w + x) * c + k] = static_cast<uint8_t>((x * 255 / (w > 1 ? w - 1 : 1) * (k + 1) / 3 +
                                                        y * 200 / (h > 1 ? h - 1 : 1) + gen() % 24) % 256);
  return img;
}

inline double MaxAbsDiff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

inline double Psnr(const uint8_t* a, const uint8_t* b, size_t n) {
  double se = 0;
  for (size_t i = 0; i < n; ++i) se += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  if (se == 0) return 99;
  return 10 * std::log10(255.0 * 255.0 / (se / n));
}

}  // namespace strata::image::testing
