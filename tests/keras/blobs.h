// Test data shared by the keras tests.
#pragma once

#include <random>

#include "strata/data/element.h"

namespace strata::keras::testing {

// A linearly separable 3-class problem in 8 dimensions, as (x f32 [n, 8], y i64 [n]).
inline data::Element Blobs(int64_t n, uint64_t seed) {
  Tensor x(DType::kF32, {n, 8}), y(DType::kI64, {n});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0, 0.5f);
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = i % 3;
    y.data<int64_t>()[i] = c;
    for (int j = 0; j < 8; ++j) x.data<float>()[i * 8 + j] = (j % 3 == c ? 2.0f : -1.0f) + noise(rng);
  }
  return data::Element({x, y});
}

}  // namespace strata::keras::testing
