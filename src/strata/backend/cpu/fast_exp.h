// e^x for the vectorised loops of Strata's own kernels (softmax_kernels.h, norm_act_kernels.h):
// no call, so a loop around it vectorises for whatever target its caller is compiled for (the
// function is inlined into each ISA region). 2^(x log2 e) as an integer power of two times a
// degree-7 Taylor polynomial of e^g, |g| <= ln 2 / 2 (truncation 5e-9 relative): within 2 ulp of
// expf on [-80, 80], the range it clamps x to (e^-80 = 1.8e-35 next to a softmax row's maximum's 1;
// e^80 = 5.5e34, a sigmoid's 1 / (1 + e^80) = 1.8e-35).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace strata::backend::cpu {

inline __attribute__((always_inline)) float FastExp(float x) {
  x = std::min(std::max(x, -80.0f), 80.0f);
  const float t = x * 1.44269504088896341f;
  // n = round(t) by the 1.5 x 2^23 trick: the sum's low mantissa bits hold n.
  const float shifted = t + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  const float n = shifted - 12582912.0f;
  const int32_t ni = bits - 0x4b400000;
  const float g = (t - n) * 0.693147180559945f;
  float p = 1.0f / 5040;
  p = p * g + 1.0f / 720;
  p = p * g + 1.0f / 120;
  p = p * g + 1.0f / 24;
  p = p * g + 1.0f / 6;
  p = p * g + 0.5f;
  p = p * g + 1.0f;
  p = p * g + 1.0f;
  int32_t pb;
  std::memcpy(&pb, &p, 4);
  pb += ni * (1 << 23);
  float r;
  std::memcpy(&r, &pb, 4);
  return r;
}

}  // namespace strata::backend::cpu
