// The file interface readers and writers sit on.
//
// Readers see a RandomAccessFile (pread-style: thread-safe, no shared cursor), so many
// threads may read one shard and tests may substitute bytes in memory. Writers see a
// WritableFile. The atomic writer is the default for anything a user keeps (records,
// checkpoints, CSVs): bytes go to a temporary beside the target; Close() flushes, fsyncs,
// renames onto the final name and fsyncs the directory. A writer dropped without Close()
// (or a crash) leaves no file under the final name. Event files, which TensorBoard reads
// while they grow, use the appending writer instead.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "strata/core/status.h"

namespace strata {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual const std::string& name() const = 0;
  // Reads up to `n` bytes at `offset` into `scratch`; returns the count read, which is
  // less than `n` only at end of file.
  virtual Result<size_t> Read(uint64_t offset, size_t n, char* scratch) const = 0;
  virtual Result<uint64_t> Size() const = 0;
};

Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccessFile(const std::string& path);
// A read-only file over bytes in memory (tests, fuzzers, cached shards).
std::unique_ptr<RandomAccessFile> NewMemoryFile(std::string name, std::string contents);

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual const std::string& name() const = 0;  // the final name
  virtual Status Append(std::string_view data) = 0;
  // Hands buffered bytes to the OS (visible to readers of an appending file).
  virtual Status Flush() = 0;
  // Flush + fsync. For the atomic writer, also renames into place.
  virtual Status Close() = 0;
};

Result<std::unique_ptr<WritableFile>> NewAtomicWritableFile(const std::string& path);
// Creates or truncates `path` and writes straight into it (growing files: event logs).
Result<std::unique_ptr<WritableFile>> NewAppendingFile(const std::string& path);

Result<std::string> ReadFileToString(const std::string& path);
Status WriteFileAtomic(const std::string& path, std::string_view contents);

}  // namespace strata

#pragma GCC visibility pop
