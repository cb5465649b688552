// RecordWriter: writes a TFRecord file (format: tfrecord_format.h) TensorFlow can read.
//
//   STRATA_ASSIGN_OR_RETURN(auto w, record::RecordWriter::Open(path, {.compression = Compression::kGzip}));
//   STRATA_RETURN_IF_ERROR(w->WriteRecord(bytes));
//   STRATA_RETURN_IF_ERROR(w->Close());
//
// Atomic by default: bytes go to a temporary beside `path`; Close() flushes, fsyncs and
// renames. A writer destroyed without Close() (or a crash) leaves no file under `path`.
// Event files, which TensorBoard reads while they grow, use atomic = false: the file is
// created at once and Flush() makes every whole record written so far visible.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "strata/core/file.h"
#include "strata/core/status.h"
#include "strata/record/tfrecord_format.h"

namespace strata::record {

struct RecordWriterOptions {
  // kNone, kZlib or kGzip (kAuto is refused: a writer must choose).
  Compression compression = Compression::kNone;
  // zlib level 0..9, or -1 for zlib's default (6), which TensorFlow also uses.
  int compression_level = -1;
  // Temp + fsync + rename on Close (true), or write straight into the file (false).
  bool atomic = true;
};

class OutputStream;  // record/output_stream.h

class RecordWriter {
 public:
  static Result<std::unique_ptr<RecordWriter>> Open(const std::string& path, RecordWriterOptions options = {});
  // Writes into `file` (owned), which decides atomicity; options.atomic is ignored.
  static Result<std::unique_ptr<RecordWriter>> Open(std::unique_ptr<WritableFile> file,
                                                    RecordWriterOptions options = {});
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  Status WriteRecord(std::string_view data);
  // Hands all whole records written so far to the OS (a compressed stream is sync-flushed
  // so a reader can decompress them).
  Status Flush();
  // Finishes the compressed stream, flushes, fsyncs and (atomic) renames into place.
  Status Close();

  int64_t records_written() const { return records_; }
  uint64_t bytes_written() const { return bytes_; }  // uncompressed stream bytes
  const std::string& filename() const;

 private:
  explicit RecordWriter(std::unique_ptr<OutputStream> out);
  std::unique_ptr<OutputStream> out_;
  int64_t records_ = 0;
  uint64_t bytes_ = 0;
  bool closed_ = false;
  Status sticky_;
};

}  // namespace strata::record

#pragma GCC visibility pop
