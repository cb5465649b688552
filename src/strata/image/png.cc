#include "strata/image/png.h"

#include <spng.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "strata/image/pixel_convert.h"

namespace strata::image {
namespace {

struct CtxFree {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};
using Ctx = std::unique_ptr<spng_ctx, CtxFree>;

Status SpngError(int err, const char* what) {
  std::string msg = std::string("PNG ") + what + ": " + spng_strerror(err);
  if (err == SPNG_EOF || err == SPNG_IO_EOF) return Truncated(msg);
  if (err == SPNG_EWIDTH || err == SPNG_EHEIGHT || err == SPNG_EUSER_WIDTH || err == SPNG_EUSER_HEIGHT ||
      err == SPNG_EOVERFLOW || err == SPNG_ECHUNK_LIMITS) {
    return InvalidArgument(msg);
  }
  return Corruption(msg);
}

int StoredChannels(const spng_ihdr& ihdr, bool has_trns) {
  switch (ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: return 1;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: return 2;
    case SPNG_COLOR_TYPE_TRUECOLOR: return 3;
    case SPNG_COLOR_TYPE_INDEXED: return has_trns ? 4 : 3;
    default: return 4;
  }
}

// Opens a decoder over `bytes` with limits that keep a hostile file from allocating.
Result<Ctx> OpenDecoder(std::string_view bytes, spng_ihdr* ihdr, bool* has_trns) {
  Ctx ctx(spng_ctx_new(0));
  if (!ctx) return Internal("PNG: spng_ctx_new failed");
  spng_set_image_limits(ctx.get(), 1u << 24, 1u << 24);
  spng_set_chunk_limits(ctx.get(), 1u << 24, 1u << 26);  // ancillary chunks: 16 MiB each, 64 MiB total
  if (int e = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size())) return SpngError(e, "open");
  if (int e = spng_get_ihdr(ctx.get(), ihdr)) return SpngError(e, "header");
  spng_trns trns;
  *has_trns = ihdr->color_type == SPNG_COLOR_TYPE_INDEXED && spng_get_trns(ctx.get(), &trns) == 0;
  return ctx;
}

// libspng stops after the last image row; reading the remaining chunks up to IEND
// checks the last CRCs and catches a file cut short after its pixel data.
// libspng does not check IEND's own CRC, so a file missing its last bytes would pass:
// IEND's CRC is a constant, look for it.
Status ReadToEnd(spng_ctx* ctx, std::string_view bytes) {
  if (int e = spng_decode_chunks(ctx)) return SpngError(e, "after image data");
  static constexpr std::string_view kIend("IEND\xae\x42\x60\x82", 8);
  if (bytes.rfind(kIend) == std::string_view::npos) {
    return Truncated("PNG: file of " + std::to_string(bytes.size()) + " bytes ends inside its IEND chunk");
  }
  return Status::OK();
}

}  // namespace

Result<PngHeader> ReadPngHeader(std::string_view bytes) {
  spng_ihdr ihdr;
  bool has_trns = false;
  STRATA_ASSIGN_OR_RETURN(Ctx ctx, OpenDecoder(bytes, &ihdr, &has_trns));
  return PngHeader{static_cast<int>(ihdr.height), static_cast<int>(ihdr.width), StoredChannels(ihdr, has_trns),
                   ihdr.bit_depth, ihdr.color_type};
}

Status DecodePng(std::string_view bytes, const PngDecodeOptions& options, Image* out) {
  if (options.channels < 0 || options.channels > 4) {
    return InvalidArgument("PNG decode: channels must be 0..4, not " + std::to_string(options.channels));
  }
  spng_ihdr ihdr;
  bool has_trns = false;
  STRATA_ASSIGN_OR_RETURN(Ctx ctx, OpenDecoder(bytes, &ihdr, &has_trns));
  const int h = static_cast<int>(ihdr.height), w = static_cast<int>(ihdr.width);
  if (static_cast<int64_t>(h) * w > options.max_pixels) {
    return InvalidArgument("PNG image " + std::to_string(h) + "x" + std::to_string(w) + " exceeds max_pixels " +
                           std::to_string(options.max_pixels));
  }
  const int stored = StoredChannels(ihdr, has_trns);
  const int channels = options.channels ? options.channels : stored;

  // Gray sources of <= 8 bits decode straight to G8/GA8, 8-bit sources whose stored
  // layout is the requested one decode as stored; everything else goes through RGBA8
  // (libspng expands palette, tRNS, low bit depths and 16-bit samples) and is then
  // narrowed to the requested channels in one pass.
  int fmt = SPNG_FMT_RGBA8;
  int fmt_channels = 4;
  if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8 && (channels == 1 || channels == 2)) {
    fmt = channels == 1 ? SPNG_FMT_G8 : SPNG_FMT_GA8;
    fmt_channels = channels;
  } else if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA && ihdr.bit_depth == 8 && channels == 2) {
    fmt = SPNG_FMT_PNG;  // stored gray+alpha bytes
    fmt_channels = 2;
  } else if (channels == 3 && !has_trns && ihdr.color_type != SPNG_COLOR_TYPE_TRUECOLOR_ALPHA &&
             ihdr.color_type != SPNG_COLOR_TYPE_GRAYSCALE_ALPHA) {
    fmt = SPNG_FMT_RGB8;
    fmt_channels = 3;
  }
  size_t need = 0;
  if (int e = spng_decoded_image_size(ctx.get(), fmt, &need)) return SpngError(e, "size");
  const int flags = fmt == SPNG_FMT_RGBA8 ? SPNG_DECODE_TRNS : 0;

  if (fmt_channels == channels) {
    uint8_t* dst = out->Reset(h, w, channels);
    if (!dst || need != out->size_bytes()) return Internal("PNG decode: buffer size mismatch");
    if (int e = spng_decode_image(ctx.get(), dst, need, fmt, flags)) return SpngError(e, "decode");
    return ReadToEnd(ctx.get(), bytes);
  }
  // Decode to RGBA (or GA) in a per-thread scratch buffer, then convert.
  thread_local Image scratch;
  uint8_t* tmp = scratch.Reset(h, w, fmt_channels);
  if (!tmp || need != scratch.size_bytes()) return Internal("PNG decode: buffer size mismatch");
  if (int e = spng_decode_image(ctx.get(), tmp, need, fmt, flags)) return SpngError(e, "decode");
  uint8_t* dst = out->Reset(h, w, channels);
  if (!dst) return Internal("PNG decode: out of memory");
  ConvertChannels(tmp, fmt_channels, dst, channels, static_cast<int64_t>(h) * w);
  return ReadToEnd(ctx.get(), bytes);
}

Status EncodePng(const ImageView& src, const PngEncodeOptions& options, std::string* out) {
  if (src.channels < 1 || src.channels > 4) return InvalidArgument("PNG encode: image is " + src.ShapeString());
  if (src.empty()) return InvalidArgument("PNG encode: empty image " + src.ShapeString());
  Ctx ctx(spng_ctx_new(SPNG_CTX_ENCODER));
  if (!ctx) return Internal("PNG: spng_ctx_new failed");
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_set_option(ctx.get(), SPNG_IMG_COMPRESSION_LEVEL, options.compression_level);
  static constexpr uint8_t kColorType[5] = {0, SPNG_COLOR_TYPE_GRAYSCALE, SPNG_COLOR_TYPE_GRAYSCALE_ALPHA,
                                            SPNG_COLOR_TYPE_TRUECOLOR, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA};
  spng_ihdr ihdr = {};
  ihdr.width = static_cast<uint32_t>(src.width);
  ihdr.height = static_cast<uint32_t>(src.height);
  ihdr.bit_depth = 8;
  ihdr.color_type = kColorType[src.channels];
  if (int e = spng_set_ihdr(ctx.get(), &ihdr)) return SpngError(e, "encode header");
  const size_t row_bytes = static_cast<size_t>(src.width) * src.channels;
  int e;
  if (src.row_stride == static_cast<int64_t>(row_bytes)) {
    e = spng_encode_image(ctx.get(), src.data, row_bytes * src.height, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  } else {  // a strided view (a crop): encode row by row
    e = spng_encode_image(ctx.get(), nullptr, 0, SPNG_FMT_PNG, SPNG_ENCODE_PROGRESSIVE | SPNG_ENCODE_FINALIZE);
    for (int y = 0; e == 0 && y < src.height; ++y) {
      e = spng_encode_row(ctx.get(), src.row(y), row_bytes);
    }
    if (e == SPNG_EOI) e = 0;
  }
  if (e) return SpngError(e, "encode");
  size_t len = 0;
  int err = 0;
  void* buf = spng_get_png_buffer(ctx.get(), &len, &err);
  if (!buf) return SpngError(err, "encode buffer");
  out->assign(static_cast<const char*>(buf), len);
  std::free(buf);
  return Status::OK();
}

}  // namespace strata::image
