// TFRecord file format (TensorFlow's tensorflow/core/lib/io/record_writer.h).
//
// A file is a sequence of records, nothing before, between or after them:
//
//   record := length      uint64, little-endian: number of data bytes
//             length_crc  uint32, little-endian: Mask(CRC32C(the 8 length bytes))
//             data        `length` bytes (any payload; usually a tf.train.Example)
//             data_crc    uint32, little-endian: Mask(CRC32C(data))
//
//   Mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8   (mod 2^32), see crc32c.h
//
// The whole byte stream may be compressed as one unit (TFRecordOptions): NONE, ZLIB (RFC
// 1950 stream) or GZIP (RFC 1952 member[s]). Offsets reported by readers count bytes of
// the uncompressed stream. There is no index and no end marker: a clean end of file is
// the end of the last whole record. A file that ends inside a record is truncated (a
// writer may still be appending). docs/formats/tfrecord.md has a worked byte example.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/core/status.h"

namespace strata::record {

constexpr size_t kLengthSize = 8;
constexpr size_t kHeaderSize = kLengthSize + 4;  // length + length_crc
constexpr size_t kFooterSize = 4;                // data_crc

enum class Compression {
  kNone,
  kZlib,
  kGzip,
  kAuto,  // readers only: detect from the first bytes (gzip magic, zlib header, else none)
};

// "none" (also ""), "zlib", "gzip", "auto"; TensorFlow's names "ZLIB"/"GZIP" in any case.
Result<Compression> ParseCompression(std::string_view name);
std::string_view CompressionName(Compression c);

// Decides the compression of a stream from its first bytes (up to 16; fewer near EOF).
// A valid TFRecord header (length whose masked CRC matches) wins over a look-alike magic.
Compression DetectCompression(std::string_view first_bytes);

// Encodes the 12-byte header / 4-byte footer of a record with `data`.
void EncodeHeader(uint64_t length, char out[kHeaderSize]);
void EncodeFooter(std::string_view data, char out[kFooterSize]);

inline uint32_t DecodeFixed32(const char* p) {
  return static_cast<uint32_t>(static_cast<uint8_t>(p[0])) | (static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8) |
         (static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24);
}
inline uint64_t DecodeFixed64(const char* p) {
  return static_cast<uint64_t>(DecodeFixed32(p)) | (static_cast<uint64_t>(DecodeFixed32(p + 4)) << 32);
}
inline void EncodeFixed32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
inline void EncodeFixed64(uint64_t v, char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

}  // namespace strata::record

#pragma GCC visibility pop
