#include "strata/record/record_reader.h"

#include <algorithm>
#include <cstring>

#include "strata/io/file_system.h"
#include "strata/record/crc32c.h"
#include "strata/record/input_stream.h"

namespace strata::record {

RecordReader::RecordReader(std::unique_ptr<RandomAccessFile> file, RecordReaderOptions options)
    : file_(std::move(file)), options_(options) {}

RecordReader::~RecordReader() = default;

const std::string& RecordReader::filename() const { return file_->name(); }

Result<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path, RecordReaderOptions options) {
  STRATA_ASSIGN_OR_RETURN(auto file, io::OpenFile(path));  // local, https://, s3://, gs://
  return Open(std::move(file), options);
}

Result<std::unique_ptr<RecordReader>> RecordReader::Open(std::unique_ptr<RandomAccessFile> file,
                                                         RecordReaderOptions options) {
  std::unique_ptr<RecordReader> r(new RecordReader(std::move(file), options));
  STRATA_RETURN_IF_ERROR(r->Init());
  return r;
}

Status RecordReader::Init() {
  STRATA_ASSIGN_OR_RETURN(file_size_, file_->Size());
  compression_ = options_.compression;
  if (compression_ == Compression::kAuto) {
    char head[16];
    STRATA_ASSIGN_OR_RETURN(size_t n, file_->Read(0, sizeof(head), head));
    compression_ = DetectCompression(std::string_view(head, n));
  }
  size_t want = std::max<size_t>(options_.buffer_bytes, 4096);
  if (compression_ == Compression::kNone) {
    // Small files get a small buffer; 16 spare bytes so Fill never needs to grow it.
    want = static_cast<size_t>(std::min<uint64_t>(want, file_size_ + 16));
    in_ = NewRawInputStream(file_.get(), file_size_);
  } else {
    in_ = NewInflateInputStream(file_.get(), file_size_, compression_, std::min<size_t>(want, 1 << 16));
    want = std::min<size_t>(want, 1 << 16);
  }
  buf_.resize(std::max<size_t>(want, kHeaderSize + kFooterSize));
  return Status::OK();
}

Status RecordReader::Fill(size_t n) {
  if (available() >= n) return Status::OK();
  if (pos_ + n > buf_.size()) {  // compact: move the unread bytes to the front
    size_t avail = available();
    if (avail > 0 && pos_ > 0) std::memmove(buf_.data(), buf_.data() + pos_, avail);
    buf_offset_ += pos_;
    pos_ = 0;
    end_ = avail;
  }
  while (available() < n && !stream_eof_) {
    if (end_ == buf_.size()) {
      // Grow, at most doubling what the buffer really holds: callers check a length
      // against the file size (uncompressed) before asking; compressed data must be
      // decoded before the buffer grows again.
      size_t grow = std::min(n, std::max(buf_.size() * 2, size_t{1} << 16));
      buf_.resize(grow);
    }
    auto got = in_->Read(buf_.data() + end_, buf_.size() - end_);
    if (!got.ok()) {
      stream_eof_ = true;
      stream_status_ = got.status();
      break;
    }
    if (*got == 0) stream_eof_ = true;
    end_ += *got;
  }
  // A stream error matters only to a caller whose bytes it cut off.
  return available() >= n ? Status::OK() : stream_status_;
}

void RecordReader::Report(const Status& st) {
  if (options_.reporter) options_.reporter(st);
}

Status RecordReader::Fail(Status st) {
  sticky_ = st;
  return st;
}

namespace {
std::string Where(const std::string& name, Compression c, uint64_t offset) {
  return name + (c == Compression::kNone ? " at byte " : " at uncompressed byte ") + std::to_string(offset);
}
}  // namespace

Status RecordReader::ReadRecord(std::string_view* record) {
  for (;;) {
    Status st = ReadOne(record);
    if (st.ok() || st.IsOutOfRange() || !options_.ignore_errors) return st;
    if (st.code() == StatusCode::kIOError) return Fail(st);
    // ignore_errors: ReadOne has already moved past (or ended at) the bad bytes.
  }
}

Status RecordReader::ReadRecord(std::string* record) {
  std::string_view v;
  Status st = ReadRecord(&v);
  if (st.ok()) record->assign(v.data(), v.size());
  return st;
}

Status RecordReader::Resync() {
  // Called with pos_ at a header that failed. Step one byte at a time to the next
  // position holding a header whose length CRC matches and whose length is plausible.
  ++pos_;
  ++stats_.skipped_bytes;
  for (;;) {
    Status fs = Fill(kHeaderSize);
    if (available() < kHeaderSize) {
      stats_.skipped_bytes += static_cast<int64_t>(available());
      pos_ = end_;
      done_ = true;
      next_offset_ = buf_offset_ + pos_;
      return Status::OK();
    }
    const char* h = buf_.data() + pos_;
    uint64_t len = DecodeFixed64(h);
    if (crc32c::Unmask(DecodeFixed32(h + kLengthSize)) == crc32c::Value(h, kLengthSize) &&
        len <= options_.max_record_bytes) {
      next_offset_ = buf_offset_ + pos_;
      return Status::OK();
    }
    ++pos_;
    ++stats_.skipped_bytes;
  }
}

Status RecordReader::ReadOne(std::string_view* record) {
  if (!sticky_.ok()) return sticky_;
  if (done_) return OutOfRange("end of " + file_->name());
  const uint64_t off = buf_offset_ + pos_;
  const bool quiet_tail = options_.stop_at_truncated_tail || options_.ignore_errors;

  // The stream itself may fail: a compressed file cut short (Truncated) or rejected by
  // zlib (Corruption). Either ends the stream; records decoded before it still count.
  Status stream_error;
  auto truncated_tail = [&](const std::string& what) -> Status {
    done_ = true;
    next_offset_ = off;
    Status st = Truncated("truncated record in " + Where(file_->name(), compression_, off) + ": " + what);
    if (!stream_error.ok()) st = st.WithContext(stream_error.message());
    if (quiet_tail) {
      if (options_.ignore_errors) Report(st);
      ++stats_.truncated_tails;
      return OutOfRange("end of " + file_->name() + " (truncated tail ignored)");
    }
    return Fail(st);
  };
  auto stream_failed = [&]() -> Status {
    done_ = true;
    if (stream_error.code() == StatusCode::kTruncated && quiet_tail) {
      if (options_.ignore_errors) Report(stream_error);
      ++stats_.truncated_tails;
      return OutOfRange("end of " + file_->name() + " (truncated compressed tail ignored)");
    }
    if (options_.ignore_errors && stream_error.code() == StatusCode::kCorruption) {
      Report(stream_error);
      ++stats_.skipped_records;
      return OutOfRange("end of " + file_->name() + " (corrupt compressed tail skipped)");
    }
    return Fail(stream_error);
  };

  stream_error = Fill(kHeaderSize);
  if (!stream_error.ok() && stream_error.code() == StatusCode::kIOError) return Fail(stream_error);
  if (available() == 0) {
    if (!stream_error.ok()) return stream_failed();
    done_ = true;
    return OutOfRange("end of " + file_->name());
  }
  if (available() < kHeaderSize) {
    return truncated_tail("the file ends " + std::to_string(available()) + " bytes into the 12-byte header");
  }
  const char* h = buf_.data() + pos_;
  const uint64_t length = DecodeFixed64(h);
  auto skip_header = [&](Status why) -> Status {
    if (!options_.ignore_errors) return Fail(why);
    Report(why);
    ++stats_.skipped_records;
    STRATA_RETURN_IF_ERROR(Resync());
    return Corruption("skipped");
  };
  if (crc32c::Unmask(DecodeFixed32(h + kLengthSize)) != crc32c::Value(h, kLengthSize))
    return skip_header(Corruption("bad length CRC in " + Where(file_->name(), compression_, off)));
  if (length > options_.max_record_bytes)
    return skip_header(Corruption("record length " + std::to_string(length) + " in " +
                                  Where(file_->name(), compression_, off) + " exceeds max_record_bytes " +
                                  std::to_string(options_.max_record_bytes)));
  const uint64_t total = kHeaderSize + length + kFooterSize;
  if (compression_ == Compression::kNone && off + total > file_size_) {
    return truncated_tail("its header announces " + std::to_string(length) + " data bytes + 4 CRC bytes but only " +
                          std::to_string(file_size_ - off - kHeaderSize) + " bytes follow the header (length beyond the file)");
  }
  if (!stream_error.ok() && available() < total) return truncated_tail("the compressed stream ends inside it");
  stream_error = Fill(static_cast<size_t>(total));
  if (!stream_error.ok() && stream_error.code() == StatusCode::kIOError) return Fail(stream_error);
  if (available() < total) {
    if (!stream_error.ok() && stream_error.code() == StatusCode::kCorruption) return stream_failed();
    return truncated_tail("its header announces " + std::to_string(length) + " data bytes + 4 CRC bytes but only " +
                          std::to_string(available() - kHeaderSize) + " bytes follow the header");
  }
  const char* data = buf_.data() + pos_ + kHeaderSize;
  if (options_.verify_data_crc &&
      crc32c::Unmask(DecodeFixed32(data + length)) != crc32c::Value(data, static_cast<size_t>(length))) {
    Status why = Corruption("bad data CRC in " + Where(file_->name(), compression_, off) + " (record of " +
                            std::to_string(length) + " bytes)");
    if (!options_.ignore_errors) return Fail(why);
    Report(why);
    ++stats_.skipped_records;
    pos_ += static_cast<size_t>(total);
    next_offset_ = off + total;
    return Corruption("skipped");
  }
  *record = std::string_view(data, static_cast<size_t>(length));
  pos_ += static_cast<size_t>(total);
  last_offset_ = off;
  next_offset_ = off + total;
  ++stats_.records;
  stats_.record_bytes += static_cast<int64_t>(length);
  return Status::OK();
}

}  // namespace strata::record
