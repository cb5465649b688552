// Byte sinks under the record writer: the file itself, or zlib deflating into it.
// Internal to record/.
#pragma once

#include <memory>
#include <string_view>

#include "strata/core/file.h"
#include "strata/core/status.h"
#include "strata/record/tfrecord_format.h"

namespace strata::record {

class OutputStream {
 public:
  virtual ~OutputStream() = default;
  virtual const std::string& name() const = 0;
  virtual Status Append(std::string_view data) = 0;
  // Everything appended so far reaches the OS, decodable (zlib: Z_SYNC_FLUSH).
  virtual Status Flush() = 0;
  // Ends the stream (zlib: Z_FINISH, trailer) and closes the file.
  virtual Status Close() = 0;
};

// compression: kNone, kZlib or kGzip. level: zlib's 0..9 or -1 (default).
Result<std::unique_ptr<OutputStream>> NewOutputStream(std::unique_ptr<WritableFile> file, Compression compression,
                                                      int level);

}  // namespace strata::record
