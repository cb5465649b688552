#include "strata/record/tfrecord_format.h"

#include <cctype>

#include "strata/record/crc32c.h"

namespace strata::record {

Result<Compression> ParseCompression(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "none") return Compression::kNone;
  if (lower == "zlib") return Compression::kZlib;
  if (lower == "gzip") return Compression::kGzip;
  if (lower == "auto") return Compression::kAuto;
  return InvalidArgument("unknown compression '" + std::string(name) + "' (expected none, zlib, gzip or auto)");
}

std::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kZlib: return "zlib";
    case Compression::kGzip: return "gzip";
    case Compression::kAuto: return "auto";
  }
  return "?";
}

Compression DetectCompression(std::string_view b) {
  auto u = [&](size_t i) { return static_cast<uint8_t>(b[i]); };
  if (b.size() >= kHeaderSize &&
      crc32c::Unmask(DecodeFixed32(b.data() + kLengthSize)) == crc32c::Value(b.data(), kLengthSize))
    return Compression::kNone;
  if (b.size() >= 2 && u(0) == 0x1f && u(1) == 0x8b) return Compression::kGzip;
  // RFC 1950: CM = 8 (deflate), CINFO <= 7, and the 16-bit header is a multiple of 31.
  if (b.size() >= 2 && (u(0) & 0x0f) == 8 && (u(0) >> 4) <= 7 && ((u(0) << 8) | u(1)) % 31 == 0)
    return Compression::kZlib;
  return Compression::kNone;
}

void EncodeHeader(uint64_t length, char out[kHeaderSize]) {
  EncodeFixed64(length, out);
  EncodeFixed32(crc32c::Mask(crc32c::Value(out, kLengthSize)), out + kLengthSize);
}

void EncodeFooter(std::string_view data, char out[kFooterSize]) {
  EncodeFixed32(crc32c::Mask(crc32c::Value(data)), out);
}

}  // namespace strata::record
