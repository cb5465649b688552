// JPEG decode and encode through libjpeg-turbo's TurboJPEG API.
//
// Decode produces u8 HWC with 1 (gray) or 3 (RGB) channels. When the caller only needs
// `min_height` x `min_width` pixels, the decoder runs at the smallest DCT scale among
// 1/8, 1/4, 1/2 whose output is still at least that large (IDCT and colour conversion
// shrink with the scale; entropy decoding does not), and the caller resizes the rest.
//
// Each thread keeps one decompressor and one compressor handle for its whole life
// (thread_local), so decoding allocates nothing after the first image of a size.
//
// Errors are values: a corrupt or truncated stream is Corruption/Truncated, a valid but
// unsupported one (CMYK to RGB, arithmetic coding where unsupported, 12-bit) is
// Unimplemented, and an image larger than `max_pixels` is InvalidArgument, checked from
// the header before anything is allocated. Messages carry libjpeg's reason; callers
// prefix the record they read (Status::WithContext).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/image/image.h"

namespace strata::image {

struct JpegHeader {
  int height = 0;
  int width = 0;
  int channels = 0;     // 1 for grayscale files, 3 otherwise (CMYK files report 4)
  int subsampling = 0;  // TurboJPEG's TJSAMP_* value
  int colorspace = 0;   // TurboJPEG's TJCS_* value
};

Result<JpegHeader> ReadJpegHeader(std::string_view bytes);

struct JpegDecodeOptions {
  int channels = 3;           // 1 or 3; 0 = as stored (1 for gray files, else 3)
  int min_height = 0;         // > 0: decode at the smallest DCT scale with height >= this
  int min_width = 0;          // > 0: ... and width >= this
  // TJFLAG_FASTDCT (JDCT_IFAST). On by default because it is TensorFlow's default
  // (`tf.io.decode_jpeg(dct_method='')` means INTEGER_FAST); false = INTEGER_ACCURATE.
  bool fast_dct = true;
  bool fast_upsample = false; // TJFLAG_FASTUPSAMPLE: nearest chroma upsampling
  bool allow_warnings = false;  // accept streams libjpeg only warns about (extra bytes)
  // 4:2:0 and 4:2:2 colour at full scale: take libjpeg-turbo's Y/Cb/Cr planes and upsample + convert
  // them with Strata's fused pass (ycc.h), the same bytes ~15 % faster. false = always
  // tjDecompress2 (the reference the tests compare against).
  bool fused_color = true;
  int64_t max_pixels = int64_t{1} << 28;  // refuse larger images before allocating
};

// The DCT scale (numerator over 8: 1, 2, 4 or 8) that DecodeJpeg picks for an image of
// `height` x `width` when at least `min_height` x `min_width` pixels are wanted.
int JpegScaleEighths(int height, int width, int min_height, int min_width);
// ceil(dim * eighths / 8), the size libjpeg produces at that scale.
inline int JpegScaledDim(int dim, int eighths) { return (dim * eighths + 7) / 8; }

Status DecodeJpeg(std::string_view bytes, const JpegDecodeOptions& options, Image* out);

// Whether DecodeJpeg takes the fused path (planes + ycc.h) for this header and options:
// 3-channel output of a YCbCr 4:2:0 or 4:2:2 file at full scale with fancy upsampling, wider than
// 4 pixels (libjpeg-turbo box-filters narrower chroma), on a host with AVX2 or better.
bool JpegUsesFusedColor(const JpegHeader& header, const JpegDecodeOptions& options);

struct JpegEncodeOptions {
  int quality = 90;         // 1..100
  int subsampling = 420;    // 444, 422 or 420 for colour; gray images are always gray
  bool progressive = false;
};

// `src` must have 1 or 3 channels.
Status EncodeJpeg(const ImageView& src, const JpegEncodeOptions& options, std::string* out);

}  // namespace strata::image
