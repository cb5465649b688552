#include "strata/image/image.h"

#include <cstdlib>
#include <cstring>

namespace strata::image {

Result<ImageView> ImageView::Crop(int y, int x, int h, int w) const {
  if (y < 0 || x < 0 || h <= 0 || w <= 0 || y > height - h || x > width - w) {
    return InvalidArgument("crop [y=" + std::to_string(y) + ", x=" + std::to_string(x) +
                           ", h=" + std::to_string(h) + ", w=" + std::to_string(w) +
                           "] does not fit in image " + ShapeString());
  }
  ImageView v = *this;
  v.data = row(y) + static_cast<int64_t>(x) * channels;
  v.height = h;
  v.width = w;
  return v;
}

std::string ImageView::ShapeString() const {
  return "[" + std::to_string(height) + ", " + std::to_string(width) + ", " + std::to_string(channels) + "]";
}

void Image::Free::operator()(uint8_t* p) const { std::free(p); }

uint8_t* Image::Reset(int height, int width, int channels) {
  const size_t need = static_cast<size_t>(height) * width * channels;
  if (need > capacity_) {
    // 64-byte aligned, rounded to whole cache lines so vector tails may over-read safely.
    const size_t bytes = (need + 64 + 63) & ~size_t{63};
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
    capacity_ = data_ ? bytes - 64 : 0;
  }
  height_ = height;
  width_ = width;
  channels_ = channels;
  return data_.get();
}

void CopyToImage(const ImageView& src, Image* out) {
  uint8_t* dst = out->Reset(src.height, src.width, src.channels);
  const size_t row_bytes = static_cast<size_t>(src.width) * src.channels;
  for (int y = 0; y < src.height; ++y) std::memcpy(dst + y * row_bytes, src.row(y), row_bytes);
}

}  // namespace strata::image
