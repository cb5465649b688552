// File systems by URL scheme: one way to open and list files wherever they live.
//
//   /data/train-*.tfrecord              local (core/file.h: pread)
//   https://host/path/x.tfrecord        HTTP(S) through libcurl (io/http.h)
//   s3://bucket/prefix/x.tfrecord       S3 or an S3-compatible store, AWS Signature V4 (io/s3.h)
//   gs://bucket/prefix/x.tfrecord       Google Cloud Storage, anonymous or bearer token (io/gcs.h)
//
// Every remote file is a RandomAccessFile (core/file.h) that fetches large blocks by range
// request and reads ahead on a background thread, so the record reader, TFRecordDataset,
// list_files and `strata records` take any of these paths unchanged. Knobs: docs/knobs.md.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/file.h"
#include "strata/core/status.h"

namespace strata::io {

// "https", "http", "s3", "gs" or "" for a local path (anything without "scheme://").
std::string_view Scheme(std::string_view path);
inline bool IsRemote(std::string_view path) { return !Scheme(path).empty(); }

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path) = 0;
  // Every name matching a glob pattern (`*`, `?`, `[..]`; `*` does not cross '/'), sorted.
  // An empty list is not an error here; list_files reports it.
  virtual Result<std::vector<std::string>> Glob(const std::string& pattern) = 0;
};

// The file system for `path`'s scheme (process-wide, created on first use).
Result<FileSystem*> FileSystemFor(std::string_view path);
// FileSystemFor(path)->Open(path).
Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& path);
// FileSystemFor(pattern)->Glob(pattern).
Result<std::vector<std::string>> Glob(const std::string& pattern);

// Object-store listing helpers, shared by S3 and GCS: the literal prefix of a key pattern
// (everything before the first wildcard) and the match of a full key against the pattern.
std::string LiteralPrefix(std::string_view pattern);
bool GlobMatch(const std::string& pattern, const std::string& name);

}  // namespace strata::io

#pragma GCC visibility pop
