// Sequential byte streams under the record reader: the raw file, or zlib inflating it.
// Internal to record/; the reader owns the buffering, these only fill what it asks.
#pragma once

#include <cstdint>
#include <memory>

#include "strata/core/file.h"
#include "strata/core/status.h"
#include "strata/record/tfrecord_format.h"

namespace strata::record {

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Reads up to `n` bytes into `dst`. Returns the count: 0 only at the end of the stream.
  // A compressed stream that ends before its end marker first returns what it decoded,
  // then Truncated; zlib rejecting the bytes is Corruption. Both name the compressed
  // offset.
  virtual Result<size_t> Read(char* dst, size_t n) = 0;
};

// `file` must outlive the stream. `size` is the file size.
std::unique_ptr<InputStream> NewRawInputStream(const RandomAccessFile* file, uint64_t size);
// compression is kZlib or kGzip; reads `chunk` compressed bytes at a time. Concatenated
// gzip members are read one after another, as gzip(1) does.
std::unique_ptr<InputStream> NewInflateInputStream(const RandomAccessFile* file, uint64_t size,
                                                   Compression compression, size_t chunk);

}  // namespace strata::record
