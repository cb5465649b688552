// Counter-based random numbers for augmentation: Philox4x32-10 (Salmon et al., SC'11,
// the generator TensorFlow's stateless random ops use).
//
// A SeedStream is keyed by (seed, element index, purpose): the numbers an image gets
// depend only on which element it is, never on which thread decoded it or in what
// order, so the same seed gives the same pixels for any number of threads.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata::image {

class SeedStream {
 public:
  SeedStream(uint64_t seed, uint64_t element, uint32_t purpose = 0)
      : key0_(static_cast<uint32_t>(seed)), key1_(static_cast<uint32_t>(seed >> 32)),
        ctr_{0, purpose, static_cast<uint32_t>(element), static_cast<uint32_t>(element >> 32)} {}

  uint32_t NextU32() {
    if (used_ == 4) Refill();
    return out_[used_++];
  }
  // Uniform in [0, 1) with 24 random bits.
  float Uniform() { return static_cast<float>(NextU32() >> 8) * (1.0f / 16777216.0f); }
  float Uniform(float lo, float hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n) (n > 0), by 64-bit multiply (Lemire; bias < n / 2^32).
  uint32_t UniformInt(uint32_t n) { return static_cast<uint32_t>((static_cast<uint64_t>(NextU32()) * n) >> 32); }
  bool Bernoulli(float p) { return Uniform() < p; }

  // One Philox4x32-10 block: 10 rounds of multiply-xor over the counter.
  static void Philox(const uint32_t in[4], uint32_t key0, uint32_t key1, uint32_t out[4]) {
    uint32_t c0 = in[0], c1 = in[1], c2 = in[2], c3 = in[3];
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ key0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ key1;
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
  }

 private:
  void Refill() {
    Philox(ctr_, key0_, key1_, out_);
    ++ctr_[0];
    used_ = 0;
  }

  uint32_t key0_, key1_;
  uint32_t ctr_[4];
  uint32_t out_[4] = {};
  int used_ = 4;
};

}  // namespace strata::image
