// Cast and normalise: out = (x - mean[c]) / std[c], to f32 or bf16, one image or a
// batch stacked NHWC. Means and stds are on the 0..255 pixel scale, so mean 0 and std
// 255 give the usual x / 255 in [0, 1], and ImageNet's (0.485, 0.456, 0.406) *
// 255 / (0.229, 0.224, 0.225) * 255 give torchvision's normalisation.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/status.h"
#include "strata/core/tensor.h"
#include "strata/image/image.h"

namespace strata {
class ThreadPool;
}

namespace strata::image {

struct Normalization {
  float mean[4] = {0, 0, 0, 0};
  float std[4] = {255, 255, 255, 255};
  // scale = 1 / std, bias = -mean / std: the affine form the kernels take.
  void AffineForm(int channels, float* scale, float* bias) const;
};

// f32 [pixels, C] in place.
void NormalizeInPlace(float* x, int64_t pixels, int channels, const Normalization& n);
// f32 -> bf16 (round to nearest even).
void NormalizeToBF16(const float* x, int64_t pixels, int channels, const Normalization& n, bf16* out);
// u8 image (any row stride) -> f32 or bf16 [H, W, C] at `out`.
Status NormalizeImage(const ImageView& src, const Normalization& n, DType dtype, void* out);

// Stacks same-shaped u8 images into `batch`, a [B, H, W, C] f32 or bf16 tensor that
// already has that shape. Errors name the image whose shape differs. With a pool, the
// images are spread over its threads.
Status StackBatch(const std::vector<ImageView>& images, const Normalization& n, Tensor* batch,
                  ThreadPool* pool = nullptr);

}  // namespace strata::image
