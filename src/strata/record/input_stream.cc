#include "strata/record/input_stream.h"

#include <zlib.h>

#include <string>

namespace strata::record {
namespace {

class RawInputStream final : public InputStream {
 public:
  RawInputStream(const RandomAccessFile* file, uint64_t size) : file_(file), size_(size) {}
  Result<size_t> Read(char* dst, size_t n) override {
    if (offset_ >= size_) return size_t{0};
    STRATA_ASSIGN_OR_RETURN(size_t got, file_->Read(offset_, n, dst));
    offset_ += got;
    return got;
  }

 private:
  const RandomAccessFile* file_;
  uint64_t size_;
  uint64_t offset_ = 0;
};

class InflateInputStream final : public InputStream {
 public:
  InflateInputStream(const RandomAccessFile* file, uint64_t size, Compression c, size_t chunk)
      : file_(file), size_(size), gzip_(c == Compression::kGzip), in_(chunk, '\0') {}
  ~InflateInputStream() override {
    if (init_) inflateEnd(&z_);
  }

  Result<size_t> Read(char* dst, size_t n) override {
    if (!pending_.ok()) return pending_;
    if (!init_) {
      z_ = {};
      if (inflateInit2(&z_, gzip_ ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK)
        return Internal("zlib inflateInit2 failed for " + file_->name());
      init_ = true;
    }
    size_t produced = 0;
    while (produced < n) {
      if (finished_) {
        // Another gzip member may follow; anything else after a zlib stream is an error.
        if (z_.avail_in == 0 && offset_ >= size_) break;
        if (!gzip_) {
          pending_ = Corruption("bytes after the end of the zlib stream in " + file_->name() + " at compressed byte " +
                                std::to_string(InputOffset()));
          break;
        }
        inflateReset(&z_);
        finished_ = false;
      }
      if (z_.avail_in == 0) {
        if (offset_ >= size_) {
          pending_ = Truncated("compressed stream of " + file_->name() + " ends before its end marker at compressed byte " +
                               std::to_string(offset_));
          break;
        }
        auto got = file_->Read(offset_, in_.size(), in_.data());
        if (!got.ok()) {
          pending_ = got.status();
          break;
        }
        if (*got == 0) {  // the file shrank under us
          size_ = offset_;
          continue;
        }
        offset_ += *got;
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(*got);
      }
      size_t want = n - produced;
      if (want > (1u << 30)) want = 1u << 30;
      z_.next_out = reinterpret_cast<Bytef*>(dst + produced);
      z_.avail_out = static_cast<uInt>(want);
      int rc = inflate(&z_, Z_NO_FLUSH);
      produced += want - z_.avail_out;
      if (rc == Z_STREAM_END) {
        finished_ = true;
      } else if (rc == Z_BUF_ERROR) {
        // No progress possible: only legal when output space ran out (loop ends) or input
        // is needed (next iteration reads more).
        continue;
      } else if (rc != Z_OK) {
        pending_ = Corruption(std::string(gzip_ ? "gzip" : "zlib") + " stream of " + file_->name() +
                              " is corrupt near compressed byte " + std::to_string(InputOffset()) + " (" +
                              (z_.msg ? z_.msg : "zlib error " + std::to_string(rc)) + ")");
        break;
      }
    }
    if (produced > 0) return produced;
    if (!pending_.ok()) return pending_;
    return size_t{0};
  }

 private:
  uint64_t InputOffset() const { return offset_ - z_.avail_in; }

  const RandomAccessFile* file_;
  uint64_t size_;
  bool gzip_;
  std::string in_;
  z_stream z_{};
  bool init_ = false;
  bool finished_ = false;
  uint64_t offset_ = 0;  // compressed bytes read from the file
  Status pending_;
};

}  // namespace

std::unique_ptr<InputStream> NewRawInputStream(const RandomAccessFile* file, uint64_t size) {
  return std::make_unique<RawInputStream>(file, size);
}

std::unique_ptr<InputStream> NewInflateInputStream(const RandomAccessFile* file, uint64_t size,
                                                   Compression compression, size_t chunk) {
  return std::make_unique<InflateInputStream>(file, size, compression, chunk < 4096 ? 4096 : chunk);
}

}  // namespace strata::record
