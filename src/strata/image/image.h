// Images in memory: 8-bit pixels, rows of interleaved channels (HWC).
//
// ImageView is a borrowed, possibly strided window ([H, W, C] with a row stride in bytes),
// so a crop is a view and costs nothing. Image owns a buffer that only ever grows: decode
// into the same Image again and again and the steady state allocates nothing (a fresh
// page costs ~11 us on the development machine, more than decoding a 28x28 PNG).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "strata/core/status.h"

namespace strata::image {

// Channels a decoder may produce: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
constexpr int kMaxChannels = 4;

struct ImageView {
  const uint8_t* data = nullptr;  // [H, W, C], first pixel of the first row
  int height = 0;
  int width = 0;
  int channels = 0;
  int64_t row_stride = 0;  // bytes from one row to the next (>= width * channels)

  const uint8_t* row(int y) const { return data + static_cast<int64_t>(y) * row_stride; }
  bool empty() const { return height == 0 || width == 0; }
  // The rectangle [y, y + h) x [x, x + w) as a view; InvalidArgument (naming both
  // rectangles) when it does not lie inside this image.
  Result<ImageView> Crop(int y, int x, int h, int w) const;
  std::string ShapeString() const;  // "[224, 224, 3]"
};

class Image {
 public:
  Image() = default;
  Image(Image&&) = default;
  Image& operator=(Image&&) = default;

  // Sets the shape to [height, width, channels], contiguous, and returns the pixel
  // buffer. The buffer is reused when it is big enough; old contents are not kept.
  uint8_t* Reset(int height, int width, int channels);

  int height() const { return height_; }
  int width() const { return width_; }
  int channels() const { return channels_; }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size_bytes() const { return static_cast<size_t>(height_) * width_ * channels_; }
  size_t capacity() const { return capacity_; }
  ImageView view() const {
    return {data_.get(), height_, width_, channels_, static_cast<int64_t>(width_) * channels_};
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> data_;
  size_t capacity_ = 0;
  int height_ = 0, width_ = 0, channels_ = 0;
};

// Copies a (possibly strided) view into `out`.
void CopyToImage(const ImageView& src, Image* out);

}  // namespace strata::image
