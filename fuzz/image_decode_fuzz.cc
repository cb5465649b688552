// libFuzzer target over the image decode wrappers: sniffing, header reads, JPEG decode
// at every DCT scale and channel count, PNG decode to every channel count, and the
// augmenter's decode-crop-resize path. Any input must give an image or a Status, never
// a crash, a leak, undefined behaviour or an allocation beyond max_pixels; an image that
// decodes has at most max_pixels pixels and the channels asked for (checked with abort(), so
// the corpus replay in ctest fails on it).
//
// The first byte picks the options; the rest is the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/image/augment.h"
#include "strata/image/decode.h"
#include "strata/image/jpeg.h"
#include "strata/image/png.h"
#include "strata/image/resize.h"

namespace si = strata::image;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t sel = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr int64_t kMaxPixels = int64_t{1} << 22;  // keeps each run fast under ASan
  thread_local si::Image img;

  (void)si::ReadImageInfo(bytes);
  const int channels = sel & 3 ? (sel & 3) : 0;  // 0..3
  const int min_side = (sel >> 2) & 3 ? 8 << ((sel >> 2) & 3) : 0;  // 0, 16, 32, 64
  si::DecodeOptions o{.channels = channels, .min_height = min_side, .min_width = min_side,
                      .fast_dct = (sel & 0x10) != 0, .max_pixels = kMaxPixels};
  strata::Status st = si::DecodeImage(bytes, o, &img);
  if (st.ok()) {
    if (static_cast<int64_t>(img.height()) * img.width() > kMaxPixels) std::abort();
    if (img.height() <= 0 || img.width() <= 0 || (channels != 0 && img.channels() != channels)) std::abort();
    // Touch every decoded byte so ASan sees any short write by the decoder.
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < img.size_bytes(); ++i) sink = sink ^ img.data()[i];
    (void)sink;
    si::Image small;
    (void)si::Resize(img.view(), 7, 5, {.method = (sel & 0x20) ? si::ResizeMethod::kArea : si::ResizeMethod::kBilinear,
                                        .flip_left_right = (sel & 0x40) != 0},
                     &small);
  }
  if (sel & 0x80) {
    const int png_channels = (sel >> 5) & 3 ? 4 : 2;
    if (si::DecodePng(bytes, {.channels = png_channels, .max_pixels = kMaxPixels}, &img).ok() &&
        (static_cast<int64_t>(img.height()) * img.width() > kMaxPixels || img.channels() != png_channels))
      std::abort();
    static const auto aug = si::Augmenter::Make(
        {.height = 12, .width = 12, .crop = si::CropMode::kRandomResized, .flip_left_right = 0.5f,
         .saturation_lower = 0, .saturation_upper = 2},
        7);
    float out[12 * 12 * 3];
    if (si::ReadImageInfo(bytes).ok()) (void)aug->Run(bytes, sel, out);
  }
  return 0;
}
