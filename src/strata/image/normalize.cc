#include "strata/image/normalize.h"

#include <atomic>
#include <string>

#include "strata/core/thread_pool.h"
#include "strata/image/kernels.h"

namespace strata::image {

void Normalization::AffineForm(int channels, float* scale, float* bias) const {
  for (int c = 0; c < channels; ++c) {
    scale[c] = 1.0f / std[c];
    bias[c] = -mean[c] / std[c];
  }
}

void NormalizeInPlace(float* x, int64_t pixels, int channels, const Normalization& n) {
  float scale[4], bias[4];
  n.AffineForm(channels, scale, bias);
  kernels::Kernels().affine_f32(x, pixels, channels, scale, bias);
}

void NormalizeToBF16(const float* x, int64_t pixels, int channels, const Normalization& n, bf16* out) {
  float scale[4], bias[4];
  n.AffineForm(channels, scale, bias);
  kernels::Kernels().affine_f32_to_bf16(x, pixels, channels, scale, bias, reinterpret_cast<uint16_t*>(out));
}

Status NormalizeImage(const ImageView& src, const Normalization& n, DType dtype, void* out) {
  if (src.channels < 1 || src.channels > 4) return InvalidArgument("normalize: image is " + src.ShapeString());
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return InvalidArgument("normalize: output dtype must be f32 or bf16, not " + std::string(DTypeName(dtype)));
  }
  float scale[4], bias[4];
  n.AffineForm(src.channels, scale, bias);
  const kernels::KernelTable& kt = kernels::Kernels();
  const int64_t row = static_cast<int64_t>(src.width) * src.channels;
  const bool contiguous = src.row_stride == row;
  const int rows = contiguous ? 1 : src.height;
  const int64_t pixels = contiguous ? static_cast<int64_t>(src.height) * src.width : src.width;
  for (int y = 0; y < rows; ++y) {
    if (dtype == DType::kF32) {
      kt.affine_u8_to_f32(src.row(y), pixels, src.channels, scale, bias, static_cast<float*>(out) + y * row);
    } else {
      kt.affine_u8_to_bf16(src.row(y), pixels, src.channels, scale, bias, static_cast<uint16_t*>(out) + y * row);
    }
  }
  return Status::OK();
}

Status StackBatch(const std::vector<ImageView>& images, const Normalization& n, Tensor* batch, ThreadPool* pool) {
  const Shape& s = batch->shape();
  if (s.rank() != 4 || s[0] != static_cast<int64_t>(images.size()) || !batch->is_contiguous()) {
    return InvalidArgument("stack batch: tensor " + s.ToString() + " is not a contiguous [" +
                           std::to_string(images.size()) + ", H, W, C] batch");
  }
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageView& v = images[i];
    if (v.height != s[1] || v.width != s[2] || v.channels != s[3]) {
      return InvalidArgument("stack batch: image " + std::to_string(i) + " is " + v.ShapeString() +
                             ", batch wants [" + std::to_string(s[1]) + ", " + std::to_string(s[2]) + ", " +
                             std::to_string(s[3]) + "]");
    }
  }
  const int64_t per_image = s[1] * s[2] * s[3];
  const size_t elem = DTypeSize(batch->dtype());
  char* base = static_cast<char*>(batch->raw_data());
  std::atomic<bool> failed{false};
  Status first_error;
  auto one = [&](int64_t i) {
    Status st = NormalizeImage(images[i], n, batch->dtype(), base + i * per_image * elem);
    if (!st.ok() && !failed.exchange(true)) first_error = st;
  };
  if (pool && images.size() > 1) pool->ParallelFor(static_cast<int64_t>(images.size()), one);
  else
    for (size_t i = 0; i < images.size(); ++i) one(static_cast<int64_t>(i));
  return failed ? first_error : Status::OK();
}

}  // namespace strata::image
