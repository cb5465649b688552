#include "strata/image/jpeg.h"

#include <turbojpeg.h>

#include <cstring>

#include "strata/image/ycc.h"

namespace strata::image {
namespace {

// One handle per thread and kind, destroyed when the thread ends. After a failed call
// libjpeg-turbo 2.1 can leave a handle in a state where every later call fails with the
// same message, so an error also replaces the handle (errors are rare; decodes are not).
class TjHandle {
 public:
  explicit TjHandle(bool compress) : compress_(compress) { Recreate(); }
  ~TjHandle() {
    if (h_) tjDestroy(h_);
  }
  tjhandle get() const { return h_; }
  void Recreate() {
    if (h_) tjDestroy(h_);
    h_ = compress_ ? tjInitCompress() : tjInitDecompress();
  }

 private:
  bool compress_;
  tjhandle h_ = nullptr;
};

TjHandle& Decompressor() {
  thread_local TjHandle handle(false);
  return handle;
}
TjHandle& Compressor() {
  thread_local TjHandle handle(true);
  return handle;
}

int ChannelsOf(int colorspace) {
  switch (colorspace) {
    case TJCS_GRAY: return 1;
    case TJCS_CMYK:
    case TJCS_YCCK: return 4;
    default: return 3;
  }
}

// A whole JPEG stream ends with its EOI marker (FF D9).
bool EndsWithEoi(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[bytes.size() - 2]) == 0xFF && static_cast<uint8_t>(bytes.back()) == 0xD9;
}

// libjpeg reports every problem as text; sort the ones we can into codes, then replace
// the handle (see TjHandle).
// A stream without its EOI marker (FF D9) at the end was cut short: whatever libjpeg
// tripped over, report it as truncated.
Status TjError(TjHandle& handle, const char* what, std::string_view bytes) {
  std::string msg = tjGetErrorStr2(handle.get());
  handle.Recreate();
  std::string full = std::string("JPEG ") + what + ": " + msg;
  auto has = [&](const char* s) { return msg.find(s) != std::string::npos; };
  const bool has_eoi = EndsWithEoi(bytes);
  if (has("Premature end") || has("premature end")) return Truncated(full);
  if (!has_eoi) return Truncated(full + " (stream of " + std::to_string(bytes.size()) + " bytes has no EOI marker)");
  if (has("Unsupported") || has("unsupported") || has("not supported") || has("Sorry")) return Unimplemented(full);
  return Corruption(full);
}

}  // namespace

Result<JpegHeader> ReadJpegHeader(std::string_view bytes) {
  TjHandle& handle = Decompressor();
  tjhandle h = handle.get();
  if (!h) return Internal("JPEG: tjInitDecompress failed");
  if (bytes.size() < 4) return Truncated("JPEG header: only " + std::to_string(bytes.size()) + " bytes");
  int w = 0, hgt = 0, samp = 0, cs = 0;
  if (tjDecompressHeader3(h, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), &w, &hgt, &samp,
                          &cs) != 0) {
    return TjError(handle, "header", bytes);
  }
  if (w <= 0 || hgt <= 0) {
    // libjpeg-turbo can return a 0x0 header from a stream cut inside its first marker: cut
    // short (no EOI at the end) is Truncated, as every other error of a cut stream.
    const bool has_eoi = EndsWithEoi(bytes);
    const std::string what = "JPEG header: empty image " + std::to_string(hgt) + "x" + std::to_string(w);
    if (!has_eoi) return Truncated(what + " (stream of " + std::to_string(bytes.size()) + " bytes has no EOI marker)");
    return Corruption(what);
  }
  return JpegHeader{hgt, w, ChannelsOf(cs), samp, cs};
}

int JpegScaleEighths(int height, int width, int min_height, int min_width) {
  if (min_height <= 0 && min_width <= 0) return 8;
  for (int e : {1, 2, 4}) {
    if (JpegScaledDim(height, e) >= min_height && JpegScaledDim(width, e) >= min_width) return e;
  }
  return 8;
}

Status DecodeJpeg(std::string_view bytes, const JpegDecodeOptions& options, Image* out) {
  STRATA_ASSIGN_OR_RETURN(JpegHeader hdr, ReadJpegHeader(bytes));
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    return InvalidArgument("JPEG decode: channels must be 0, 1 or 3, not " + std::to_string(options.channels));
  }
  if (static_cast<int64_t>(hdr.height) * hdr.width > options.max_pixels) {
    return InvalidArgument("JPEG image " + std::to_string(hdr.height) + "x" + std::to_string(hdr.width) +
                           " exceeds max_pixels " + std::to_string(options.max_pixels));
  }
  const int channels = options.channels != 0 ? options.channels : (hdr.channels == 1 ? 1 : 3);
  const int eighths = JpegScaleEighths(hdr.height, hdr.width, options.min_height, options.min_width);
  const int oh = JpegScaledDim(hdr.height, eighths), ow = JpegScaledDim(hdr.width, eighths);
  uint8_t* dst = out->Reset(oh, ow, channels);
  if (!dst) return Internal("JPEG decode: out of memory for " + std::to_string(oh) + "x" + std::to_string(ow));

  int flags = TJFLAG_LIMITSCANS;  // a progressive file with thousands of scans is an attack
  if (!options.allow_warnings) flags |= TJFLAG_STOPONWARNING;
  if (options.fast_dct) flags |= TJFLAG_FASTDCT;
  if (options.fast_upsample) flags |= TJFLAG_FASTUPSAMPLE;
  TjHandle& handle = Decompressor();
  tjhandle h = handle.get();
  const unsigned char* src = reinterpret_cast<const unsigned char*>(bytes.data());
  if (eighths == 8 && JpegUsesFusedColor(hdr, options)) {
    // Entropy decoding + IDCT by libjpeg-turbo into per-thread planes, then one pass of
    // fancy upsampling + colour conversion (ycc.h): the bytes tjDecompress2 would write.
    thread_local ycc::YccPlaneBuffers planes;
    const bool is420 = hdr.subsampling == TJSAMP_420;
    if (!planes.Reset(oh, ow, /*chroma_half_height=*/is420)) {
      return Internal("JPEG decode: out of memory for " + std::to_string(oh) + "x" + std::to_string(ow) + " planes");
    }
    unsigned char* dst_planes[3] = {planes.plane(0), planes.plane(1), planes.plane(2)};
    int strides[3] = {planes.stride(0), planes.stride(1), planes.stride(2)};
    // Keep the buffers for the next image unless this one was unusually large (> 16 Mpx):
    // a thread should not pin ~1.5 bytes per pixel of the largest image it ever decoded.
    struct ReleaseIfLarge {
      ycc::YccPlaneBuffers& planes;
      bool large;
      ~ReleaseIfLarge() {
        if (large) planes.Release();
      }
    } release{planes, static_cast<int64_t>(oh) * ow > (int64_t{1} << 24)};
    if (tjDecompressToYUVPlanes(h, src, bytes.size(), dst_planes, ow, strides, oh, flags) != 0) {
      if (!(options.allow_warnings && tjGetErrorCode(h) == TJERR_WARNING)) return TjError(handle, "decode", bytes);
    }
    planes.ReplicateChromaEdges();
    (is420 ? ycc::Ycc420ToRgb : ycc::Ycc422ToRgb)(planes.planes(), oh, ow, dst, static_cast<ptrdiff_t>(ow) * 3,
                                                  ycc::Kernels(), planes.scratch());
    return Status::OK();
  }
  if (tjDecompress2(h, src, bytes.size(), dst, ow, ow * channels, oh, channels == 1 ? TJPF_GRAY : TJPF_RGB, flags) !=
      0) {
    if (options.allow_warnings && tjGetErrorCode(h) == TJERR_WARNING) return Status::OK();
    return TjError(handle, "decode", bytes);
  }
  return Status::OK();
}

bool JpegUsesFusedColor(const JpegHeader& header, const JpegDecodeOptions& options) {
  const int channels = options.channels != 0 ? options.channels : (header.channels == 1 ? 1 : 3);
  return options.fused_color && !options.fast_upsample && channels == 3 &&
         (header.subsampling == TJSAMP_420 || header.subsampling == TJSAMP_422) &&
         header.colorspace == TJCS_YCbCr && header.width > 4 &&
         JpegScaleEighths(header.height, header.width, options.min_height, options.min_width) == 8 &&
         ycc::Kernels().isa != kernels::Isa::kScalar;
}

Status EncodeJpeg(const ImageView& src, const JpegEncodeOptions& options, std::string* out) {
  if (src.channels != 1 && src.channels != 3) {
    return InvalidArgument("JPEG encode: needs 1 or 3 channels, image is " + src.ShapeString());
  }
  if (src.empty()) return InvalidArgument("JPEG encode: empty image " + src.ShapeString());
  if (options.quality < 1 || options.quality > 100) {
    return InvalidArgument("JPEG encode: quality must be in [1, 100], not " + std::to_string(options.quality));
  }
  int samp;
  switch (src.channels == 1 ? 0 : options.subsampling) {
    case 0: samp = TJSAMP_GRAY; break;
    case 444: samp = TJSAMP_444; break;
    case 422: samp = TJSAMP_422; break;
    case 420: samp = TJSAMP_420; break;
    default: return InvalidArgument("JPEG encode: subsampling must be 444, 422 or 420");
  }
  TjHandle& handle = Compressor();
  tjhandle h = handle.get();
  if (!h) return Internal("JPEG: tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int flags = options.progressive ? TJFLAG_PROGRESSIVE : 0;
  if (tjCompress2(h, src.data, src.width, static_cast<int>(src.row_stride), src.height,
                  src.channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size, samp, options.quality, flags) != 0) {
    Status st = TjError(handle, "encode", "\xff\xd9");
    tjFree(buf);
    return st;
  }
  out->assign(reinterpret_cast<const char*>(buf), size);
  tjFree(buf);
  // libjpeg-turbo 2.1 keeps the progressive scan script in the handle: the next
  // baseline encode with it writes a stream decoders reject ("bad Huffman code").
  if (options.progressive) handle.Recreate();
  return Status::OK();
}

}  // namespace strata::image
