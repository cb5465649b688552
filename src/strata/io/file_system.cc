#include "strata/io/file_system.h"

#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <mutex>

#include "strata/io/gcs.h"
#include "strata/io/http.h"
#include "strata/io/s3.h"

namespace strata::io {
namespace {

class LocalFileSystem : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path) override { return OpenRandomAccessFile(path); }
  Result<std::vector<std::string>> Glob(const std::string& pattern) override {
    std::vector<std::string> names;
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) names.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH) return IOError("glob failed for '" + pattern + "'");
    std::sort(names.begin(), names.end());
    return names;
  }
};

}  // namespace

std::string_view Scheme(std::string_view path) {
  const size_t colon = path.find("://");
  if (colon == std::string_view::npos || colon == 0) return {};
  for (char c : path.substr(0, colon))
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')) return {};
  return path.substr(0, colon);
}

Result<FileSystem*> FileSystemFor(std::string_view path) {
  static std::once_flag once;
  static LocalFileSystem* local;
  static FileSystem* http;
  static FileSystem* s3;
  static FileSystem* gcs;
  std::call_once(once, [] {  // never destroyed: files may outlive static destruction order
    local = new LocalFileSystem;
    http = NewHttpFileSystem().release();
    s3 = NewS3FileSystem().release();
    gcs = NewGcsFileSystem().release();
  });
  const std::string_view scheme = Scheme(path);
  if (scheme.empty()) return static_cast<FileSystem*>(local);
  if (scheme == "http" || scheme == "https") return http;
  if (scheme == "s3") return s3;
  if (scheme == "gs") return gcs;
  return Unimplemented("no file system for scheme '" + std::string(scheme) + "://' in '" + std::string(path) +
                       "' (local paths, http://, https://, s3:// and gs:// are supported)");
}

Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemFor(path));
  return fs->Open(path);
}

Result<std::vector<std::string>> Glob(const std::string& pattern) {
  STRATA_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemFor(pattern));
  return fs->Glob(pattern);
}

std::string LiteralPrefix(std::string_view pattern) {
  const size_t wild = pattern.find_first_of("*?[\\");
  return std::string(pattern.substr(0, wild));
}

bool GlobMatch(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), FNM_PATHNAME) == 0;
}

}  // namespace strata::io
