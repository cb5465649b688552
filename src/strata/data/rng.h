// Rng: the pipeline's random numbers. One 64-bit word of state (SplitMix64), so a shuffle
// buffer's generator is saved with the iterator in 8 bytes, and seeds derived with
// MixSeed() make every per-element generator independent of thread scheduling.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>

namespace strata::data {

// A well-mixed combination of two 64-bit values (SplitMix64 finaliser over a ^ golden*b).
inline uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t NextU64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; bias < n / 2^64).
  uint64_t Below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(NextU64()) * n) >> 64); }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  float UniformFloat(float lo, float hi) { return lo + static_cast<float>(Uniform()) * (hi - lo); }
  bool Bernoulli(double p) { return Uniform() < p; }

  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

}  // namespace strata::data

#pragma GCC visibility pop
