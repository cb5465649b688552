// RecordReader: reads the records of one TFRecord file (format: tfrecord_format.h).
//
//   STRATA_ASSIGN_OR_RETURN(auto reader, record::RecordReader::Open(path));
//   std::string_view rec;
//   Status st;
//   while ((st = reader->ReadRecord(&rec)).ok()) Use(rec);
//   if (!st.IsOutOfRange()) return st;   // OutOfRange = clean end of file
//
// Outcomes of ReadRecord, each distinct and carrying the file name and byte offset:
//   OK            a whole record whose length and data CRCs match
//   OutOfRange    clean end: the file ends exactly after a record (or is empty)
//   Truncated     the file ends inside a record: inside its header, or before the length
//                 the header announces (plus footer) is complete; with
//                 stop_at_truncated_tail it is a clean end instead (a writer may still be
//                 appending)
//   Corruption    bad length CRC, bad data CRC, a length over max_record_bytes, or a
//                 compressed stream zlib rejects
//   IOError       the operating system failed a read
// Errors are sticky: after one, every later call returns it again. With ignore_errors the
// reader skips what it can instead (a record with a bad data CRC is skipped whole; after a
// bad header it scans forward byte by byte for the next valid header) and counts the skips
// in stats(); a truncated tail then ends the file quietly.
//
// Memory: one read-ahead buffer, reused. It grows only to hold a record whose length was
// checked against the file size (uncompressed) or which has actually been decompressed,
// so a corrupt length never causes a large allocation.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "strata/core/file.h"
#include "strata/core/status.h"
#include "strata/record/tfrecord_format.h"

namespace strata::record {

struct RecordReaderOptions {
  // kAuto looks at the first bytes; set it explicitly to refuse anything else.
  Compression compression = Compression::kAuto;
  // A file that ends inside a record ends quietly at the last whole record (tailing a file
  // a writer is still appending to) instead of returning Truncated.
  bool stop_at_truncated_tail = false;
  // Skip corrupt records and count them (stats()) instead of failing.
  bool ignore_errors = false;
  // ignore_errors: called with each problem skipped (the error it would have returned,
  // file and offset included), e.g. to list them all (`strata records verify --all`).
  std::function<void(const Status&)> reporter;
  // Check the data CRC of every record (the length CRC is always checked: it guards the
  // allocation). Off only for benchmarks that want to measure framing alone.
  bool verify_data_crc = true;
  // Read-ahead size in bytes: fewer system calls for small records.
  size_t buffer_bytes = size_t{1} << 20;
  // A header announcing more data bytes than this is corruption, not a record.
  uint64_t max_record_bytes = uint64_t{1} << 36;
};

struct RecordReaderStats {
  int64_t records = 0;           // whole records returned
  int64_t record_bytes = 0;      // their data bytes
  int64_t skipped_records = 0;   // ignore_errors: records with a bad data CRC or bad header
  int64_t skipped_bytes = 0;     // ignore_errors: bytes passed over while resynchronising
  int64_t truncated_tails = 0;   // 1 when the file ended inside a record and we stopped quietly
};

class InputStream;  // record/input_stream.h

class RecordReader {
 public:
  static Result<std::unique_ptr<RecordReader>> Open(const std::string& path, RecordReaderOptions options = {});
  // Reads `file` (owned). Tests and fuzzers pass NewMemoryFile(...).
  static Result<std::unique_ptr<RecordReader>> Open(std::unique_ptr<RandomAccessFile> file,
                                                    RecordReaderOptions options = {});
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Next record; `*record` points into the reader's buffer and stays valid until the next
  // call. See the outcomes above.
  Status ReadRecord(std::string_view* record);
  // The same, copying into `*record` (reuses its capacity).
  Status ReadRecord(std::string* record);

  // Offset, in uncompressed stream bytes, where the next record starts.
  uint64_t offset() const { return next_offset_; }
  // Offset of the record ReadRecord returned last.
  uint64_t last_record_offset() const { return last_offset_; }
  Compression compression() const { return compression_; }
  const RecordReaderStats& stats() const { return stats_; }
  const std::string& filename() const;

 private:
  RecordReader(std::unique_ptr<RandomAccessFile> file, RecordReaderOptions options);
  Status Init();
  // Makes at least `n` bytes available at buf_[pos_] unless the stream ends first.
  Status Fill(size_t n);
  size_t available() const { return end_ - pos_; }
  Status ReadOne(std::string_view* record);
  Status Fail(Status st);
  void Report(const Status& st);
  // ignore_errors: advances one byte at a time until a valid header (or EOF) is found.
  Status Resync();

  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<InputStream> in_;
  RecordReaderOptions options_;
  Compression compression_ = Compression::kNone;
  uint64_t file_size_ = 0;       // on disk (compressed size when compressed)
  std::string buf_;              // read-ahead window; its size is its capacity
  size_t pos_ = 0, end_ = 0;     // unread bytes are buf_[pos_, end_)
  uint64_t buf_offset_ = 0;      // stream offset of buf_[0]
  bool stream_eof_ = false;      // the input stream has no more bytes
  Status stream_status_;         // why it ended early (compressed stream cut or corrupt)
  uint64_t next_offset_ = 0;
  uint64_t last_offset_ = 0;
  Status sticky_;                // first error, returned forever after
  bool done_ = false;            // clean end reached (quietly after a truncated tail too)
  RecordReaderStats stats_;
};

}  // namespace strata::record

#pragma GCC visibility pop
