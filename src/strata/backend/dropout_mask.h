// The dropout mask, identical in every backend: element i of step `step` is dropped when a
// counter-based hash of (seed, step, i) falls below rate. No RNG state, so replicas, the
// reference backend and a re-run of a step all draw the same mask.
#pragma once

#include <cstdint>

namespace strata::backend {

inline uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform number in [0, 1) with 24 random bits.
inline float DropoutUniform(uint64_t seed, uint64_t step, uint64_t i) {
  const uint64_t h = SplitMix64(SplitMix64(seed ^ (step * 0xd1b54a32d192ed03ull)) + i);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace strata::backend
