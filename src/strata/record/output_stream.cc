#include "strata/record/output_stream.h"

#include <zlib.h>

#include <string>

namespace strata::record {
namespace {

class RawOutputStream final : public OutputStream {
 public:
  explicit RawOutputStream(std::unique_ptr<WritableFile> f) : file_(std::move(f)) {}
  const std::string& name() const override { return file_->name(); }
  Status Append(std::string_view data) override { return file_->Append(data); }
  Status Flush() override { return file_->Flush(); }
  Status Close() override { return file_->Close(); }

 private:
  std::unique_ptr<WritableFile> file_;
};

class DeflateOutputStream final : public OutputStream {
 public:
  static constexpr size_t kOutChunk = 1 << 16;

  DeflateOutputStream(std::unique_ptr<WritableFile> f) : file_(std::move(f)), out_(kOutChunk, '\0') {}
  ~DeflateOutputStream() override {
    if (init_) deflateEnd(&z_);
  }
  Status Init(bool gzip, int level) {
    z_ = {};
    // windowBits 15 (+16 for the gzip wrapper), memLevel 8: what TensorFlow's
    // ZlibCompressionOptions use.
    if (deflateInit2(&z_, level, Z_DEFLATED, gzip ? 16 + MAX_WBITS : MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return InvalidArgument("zlib deflateInit2 failed (compression level " + std::to_string(level) + ")");
    init_ = true;
    return Status::OK();
  }
  const std::string& name() const override { return file_->name(); }
  Status Append(std::string_view data) override { return Deflate(data, Z_NO_FLUSH); }
  Status Flush() override {
    STRATA_RETURN_IF_ERROR(Deflate({}, Z_SYNC_FLUSH));
    return file_->Flush();
  }
  Status Close() override {
    STRATA_RETURN_IF_ERROR(Deflate({}, Z_FINISH));
    return file_->Close();
  }

 private:
  Status Deflate(std::string_view data, int flush) {
    const char* p = data.data();
    size_t left = data.size();
    for (;;) {
      size_t take = left > (1u << 30) ? (1u << 30) : left;
      z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
      z_.avail_in = static_cast<uInt>(take);
      int rc;
      do {
        z_.next_out = reinterpret_cast<Bytef*>(out_.data());
        z_.avail_out = static_cast<uInt>(out_.size());
        int f = (left == take) ? flush : Z_NO_FLUSH;
        rc = deflate(&z_, f);
        if (rc == Z_STREAM_ERROR) return Internal("zlib deflate failed writing " + file_->name());
        size_t have = out_.size() - z_.avail_out;
        if (have > 0) STRATA_RETURN_IF_ERROR(file_->Append(std::string_view(out_.data(), have)));
      } while (z_.avail_out == 0 || z_.avail_in > 0);
      p += take;
      left -= take;
      if (left == 0) break;
    }
    return Status::OK();
  }

  std::unique_ptr<WritableFile> file_;
  std::string out_;
  z_stream z_{};
  bool init_ = false;
};

}  // namespace

Result<std::unique_ptr<OutputStream>> NewOutputStream(std::unique_ptr<WritableFile> file, Compression compression,
                                                      int level) {
  switch (compression) {
    case Compression::kNone:
      return std::unique_ptr<OutputStream>(std::make_unique<RawOutputStream>(std::move(file)));
    case Compression::kZlib:
    case Compression::kGzip: {
      if (level < -1 || level > 9) return InvalidArgument("compression level must be -1..9, got " + std::to_string(level));
      auto s = std::make_unique<DeflateOutputStream>(std::move(file));
      STRATA_RETURN_IF_ERROR(s->Init(compression == Compression::kGzip, level));
      return std::unique_ptr<OutputStream>(std::move(s));
    }
    case Compression::kAuto:
      break;
  }
  return InvalidArgument("a record writer needs compression none, zlib or gzip, not auto");
}

}  // namespace strata::record
