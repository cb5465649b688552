// Random crop with zero padding, and a mirror, of small f32 HWC images in one pass: the
// augmentation of CIFAR- and Fashion-MNIST-style recipes (pad by p, take a random H x W window,
// flip left-right with some probability), applied to decoded images, so a cached dataset
// gets a fresh view every epoch for the price of one copy.
//
//   image::PadCropFlip(src, 28, 28, 1, {.dy = -2, .dx = 1, .flip = true}, dst);
#pragma once

#include <cstdint>

namespace strata::image {

// Where the window lands: output pixel (y, x) reads input (y + dy, x + dx) of the image
// mirrored when `flip`; outside the input it is 0. dy, dx in [-pad, pad].
struct PadCropPlacement {
  int dy = 0, dx = 0;
  bool flip = false;
  bool operator==(const PadCropPlacement&) const = default;
};

// A uniformly drawn placement for padding `pad` (each offset one of 2 pad + 1) and a mirror with
// probability `flip_probability`, from `rng`, a generator with data::Rng's Below(n) and
// Bernoulli(p) (this layer does not include data): the offset first, then the mirror.
template <typename Rng>
PadCropPlacement DrawPadCrop(int pad, float flip_probability, Rng& rng) {
  PadCropPlacement p;
  const uint64_t span = 2 * static_cast<uint64_t>(pad) + 1;
  const uint64_t offset = rng.Below(span * span);
  p.dy = static_cast<int>(offset / span) - pad;
  p.dx = static_cast<int>(offset % span) - pad;
  p.flip = rng.Bernoulli(flip_probability);
  return p;
}

// src, dst: [height, width, channels] f32, contiguous, not overlapping; every dst value written.
void PadCropFlip(const float* src, int height, int width, int channels, PadCropPlacement placement, float* dst);

}  // namespace strata::image
