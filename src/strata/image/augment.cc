#include "strata/image/augment.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "strata/core/thread_pool.h"
#include "strata/image/color.h"
#include "strata/image/decode.h"
#include "strata/image/rotate.h"

namespace strata::image {

Result<Augmenter> Augmenter::Make(const AugmentOptions& o, uint64_t seed) {
  if (o.height <= 0 || o.width <= 0 || o.height > 16384 || o.width > 16384) {
    return InvalidArgument("augment: output size " + std::to_string(o.height) + "x" + std::to_string(o.width));
  }
  if (o.channels < 1 || o.channels > 4) return InvalidArgument("augment: channels must be 1..4");
  const bool colour = o.saturation_lower != 1 || o.saturation_upper != 1 || o.hue != 0;
  if (colour && o.channels != 3) return InvalidArgument("augment: saturation and hue need 3 channels");
  if (o.saturation_lower < 0 || o.saturation_upper < o.saturation_lower)
    return InvalidArgument("augment: saturation range must be 0 <= lower <= upper");
  if (o.contrast_upper < o.contrast_lower) return InvalidArgument("augment: contrast range lower > upper");
  if (o.hue < 0 || o.hue > 0.5f) return InvalidArgument("augment: hue max delta must be in [0, 0.5]");
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16) return InvalidArgument("augment: dtype must be f32 or bf16");
  if ((o.crop == CropMode::kCentral && !(o.central_fraction > 0 && o.central_fraction <= 1)) ||
      (o.crop == CropMode::kRandom && !(o.random_crop_fraction > 0 && o.random_crop_fraction <= 1))) {
    return InvalidArgument("augment: crop fraction must be in (0, 1]");
  }
  for (int c = 0; c < o.channels; ++c)
    if (o.normalization.std[c] == 0) return InvalidArgument("augment: std of channel " + std::to_string(c) + " is 0");
  return Augmenter(o, seed);
}

size_t Augmenter::output_bytes() const {
  return static_cast<size_t>(options_.height) * options_.width * options_.channels * DTypeSize(options_.dtype);
}

CropRect Augmenter::ChooseCrop(int h, int w, SeedStream& rng) const {
  switch (options_.crop) {
    case CropMode::kCentral: return CentralCropRect(h, w, options_.central_fraction);
    case CropMode::kRandom: {
      const int ch = std::max(1, static_cast<int>(h * options_.random_crop_fraction));
      const int cw = std::max(1, static_cast<int>(w * options_.random_crop_fraction));
      return RandomCropRect(h, w, ch, cw, rng).value();  // fits by construction
    }
    case CropMode::kRandomResized: return RandomResizedCropRect(h, w, options_.random_resized, rng);
    default: return {0, 0, h, w};
  }
}

namespace {
struct AugmentScratch {
  Image decoded;
  std::vector<float> a, b;  // [H, W, C] float stages
};
AugmentScratch& Scratch() {
  thread_local AugmentScratch s;
  return s;
}
}  // namespace

Status Augmenter::Run(std::string_view encoded, uint64_t element_index, void* out) const {
  const AugmentOptions& o = options_;
  SeedStream rng(seed_, element_index);
  STRATA_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(encoded));
  const CropRect rect = ChooseCrop(info.height, info.width, rng);
  DecodeOptions d{.channels = o.channels};
  if (o.dct_scaling && info.format == ImageFormat::kJpeg) {
    // The crop must keep >= the output size after scaling: scaled image >= H * out / crop.
    d.min_height = static_cast<int>(std::ceil(static_cast<double>(info.height) * o.height / rect.height));
    d.min_width = static_cast<int>(std::ceil(static_cast<double>(info.width) * o.width / rect.width));
  }
  AugmentScratch& s = Scratch();
  STRATA_RETURN_IF_ERROR(DecodeImage(encoded, d, &s.decoded));
  const ImageView full = s.decoded.view();
  // Map the rectangle into the decoded (possibly scaled) image.
  CropRect r = rect;
  if (full.height != info.height || full.width != info.width) {
    const double fy = static_cast<double>(full.height) / info.height, fx = static_cast<double>(full.width) / info.width;
    r.y = static_cast<int>(std::floor(rect.y * fy));
    r.x = static_cast<int>(std::floor(rect.x * fx));
    r.height = std::clamp(static_cast<int>(std::lround(rect.height * fy)), 1, full.height - r.y);
    r.width = std::clamp(static_cast<int>(std::lround(rect.width * fx)), 1, full.width - r.x);
  }
  STRATA_ASSIGN_OR_RETURN(ImageView cropped, full.Crop(r.y, r.x, r.height, r.width));
  return Finish(cropped, rng, out);
}

Status Augmenter::RunDecoded(const ImageView& image, uint64_t element_index, void* out) const {
  if (image.channels != options_.channels) {
    return InvalidArgument("augment: image " + image.ShapeString() + " has " + std::to_string(image.channels) +
                           " channels, options want " + std::to_string(options_.channels));
  }
  SeedStream rng(seed_, element_index);
  const CropRect r = ChooseCrop(image.height, image.width, rng);
  STRATA_ASSIGN_OR_RETURN(ImageView cropped, image.Crop(r.y, r.x, r.height, r.width));
  return Finish(cropped, rng, out);
}

Status Augmenter::Finish(const ImageView& src, SeedStream& rng, void* out) const {
  const AugmentOptions& o = options_;
  AugmentScratch& s = Scratch();
  const int64_t pixels = static_cast<int64_t>(o.height) * o.width;
  const int64_t n = pixels * o.channels;
  const bool flip_lr = o.flip_left_right > 0 && rng.Bernoulli(o.flip_left_right);
  const bool flip_ud = o.flip_up_down > 0 && rng.Bernoulli(o.flip_up_down);
  // Work in `out` itself when the result is f32 and no rotation needs a second buffer.
  float* work = out && o.dtype == DType::kF32 && o.rotation == 0 ? static_cast<float*>(out) : nullptr;
  if (!work) {
    s.a.resize(n);
    work = s.a.data();
  }
  STRATA_RETURN_IF_ERROR(ResizeToFloat(
      src, o.height, o.width, {.method = o.resize, .flip_left_right = flip_lr, .flip_up_down = flip_ud}, work));
  FloatPixels img{work, pixels, o.channels};
  if (o.brightness > 0) RandomBrightness(img, o.brightness * 255.0f, rng);
  if (o.contrast_lower != 1 || o.contrast_upper != 1) RandomContrast(img, o.contrast_lower, o.contrast_upper, rng);
  if (o.saturation_lower != 1 || o.saturation_upper != 1)
    STRATA_RETURN_IF_ERROR(RandomSaturation(img, o.saturation_lower, o.saturation_upper, rng));
  if (o.hue > 0) STRATA_RETURN_IF_ERROR(RandomHue(img, o.hue, rng));
  if (o.rotation > 0) {
    const float fill[4] = {o.rotation_fill, o.rotation_fill, o.rotation_fill, o.rotation_fill};
    float* dst = o.dtype == DType::kF32 ? static_cast<float*>(out) : nullptr;
    if (!dst) {
      s.b.resize(n);
      dst = s.b.data();
    }
    STRATA_RETURN_IF_ERROR(RandomRotate(work, o.height, o.width, o.channels, o.rotation, fill, rng, dst));
    work = dst;
  }
  if (o.dtype == DType::kF32) {
    NormalizeInPlace(work, pixels, o.channels, o.normalization);  // work == out here
  } else {
    NormalizeToBF16(work, pixels, o.channels, o.normalization, static_cast<bf16*>(out));
  }
  return Status::OK();
}

Status Augmenter::RunBatch(const std::vector<std::string_view>& encoded, uint64_t first_element, Tensor* batch,
                           ThreadPool* pool) const {
  const AugmentOptions& o = options_;
  const Shape want{static_cast<int64_t>(encoded.size()), o.height, o.width, o.channels};
  if (batch->shape() != want || batch->dtype() != o.dtype || !batch->is_contiguous()) {
    return InvalidArgument("augment batch: tensor " + batch->DebugString() + " is not a contiguous " +
                           std::string(DTypeName(o.dtype)) + want.ToString());
  }
  char* base = static_cast<char*>(batch->raw_data());
  const size_t per = output_bytes();
  std::atomic<bool> failed{false};
  Status first_error;
  auto one = [&](int64_t i) {
    Status st = Run(encoded[i], first_element + i, base + i * per);
    if (!st.ok() && !failed.exchange(true)) first_error = st.WithContext("batch element " + std::to_string(i));
  };
  if (pool && encoded.size() > 1) pool->ParallelFor(static_cast<int64_t>(encoded.size()), one);
  else
    for (size_t i = 0; i < encoded.size(); ++i) one(static_cast<int64_t>(i));
  return failed ? first_error : Status::OK();
}

}  // namespace strata::image
