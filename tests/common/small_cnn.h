// A small conv -> batch norm -> ReLU network and images for it, shared by the keras tests that
// need every kind of kernel the applications run, small (freezing, predict over replicas).
// Header-only: it uses gtest's EXPECT, so only gtest binaries include it.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "strata/data/element.h"
#include "strata/keras/model.h"

namespace strata::keras::test_models {

// conv1 -> bn1 -> relu1 -> conv2 -> bn2 -> relu2 -> gap -> head: a backbone and a head.
inline std::unique_ptr<Model> SmallCnn() {
  using namespace layers;  // NOLINT
  auto m = Sequential({InputLayer({6, 6, 2}), Conv2D(4, 3, {.padding = "same", .name = "conv1"}),
                       BatchNormalization({.name = "bn1"}), ReLU("relu1"),
                       Conv2D(4, 3, {.padding = "same", .name = "conv2"}), BatchNormalization({.name = "bn2"}),
                       ReLU("relu2"), GlobalAveragePooling2D("gap"), Dense(3, {.name = "head"})},
                      "small_cnn");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// n images [6, 6, 2] whose mean is far from 0 (so batch statistics differ from the initial
// moving ones), and labels 0..2.
inline data::Element SmallCnnImages(int64_t n, uint64_t seed) {
  Tensor x(DType::kF32, {n, 6, 6, 2}), y(DType::kI64, {n});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(1.5f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    y.data<int64_t>()[i] = i % 3;
    for (int64_t j = 0; j < 72; ++j) x.data<float>()[i * 72 + j] = noise(rng) + (j % 3 == i % 3 ? 1.0f : 0.0f);
  }
  return data::Element({x, y});
}

}  // namespace strata::keras::test_models
