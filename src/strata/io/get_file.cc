#include "strata/io/get_file.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "strata/core/file.h"
#include "strata/core/peak_flops.h"
#include "strata/io/file_system.h"

namespace strata::io {
namespace {

namespace fs = std::filesystem;

// An incremental digest over OpenSSL's EVP (md5 or sha256).
class Digest {
 public:
  explicit Digest(const std::string& algorithm)
      : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free), md_(algorithm == "sha256" ? EVP_sha256() : EVP_md5()) {
    EVP_DigestInit_ex(ctx_.get(), md_, nullptr);
  }
  void Update(const char* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  std::string Hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &len);
    static const char* kDigits = "0123456789abcdef";
    std::string s;
    for (unsigned int i = 0; i < len; ++i) s += {kDigits[out[i] >> 4], kDigits[out[i] & 15]};
    return s;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
  const EVP_MD* md_;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether `path` is a file whose hash is `file_hash` (any file when the hash is "").
bool Valid(const std::string& path, const std::string& file_hash) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  if (file_hash.empty()) return true;
  auto h = FileHash(path, HashAlgorithmFor(file_hash));
  return h.ok() && *h == Lower(file_hash);
}

// "Downloading URL\n 12.3/98.1 MB [=====>      ] 12 %", redrawn at most every 0.2 s.
class ProgressBar {
 public:
  ProgressBar(bool on, const std::string& url, uint64_t total) : on_(on), total_(total) {
    if (on_) std::fprintf(stderr, "Downloading data from %s\n", url.c_str());
  }
  void Update(uint64_t done, bool last = false) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    constexpr int kWidth = 30;
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
    std::fprintf(stderr, "\r%8.1f/%.1f MB [%s] %3d %%%s", static_cast<double>(done) / 1e6,
                 static_cast<double>(total_) / 1e6, bar.c_str(), static_cast<int>(frac * 100), last ? "\n" : "");
    std::fflush(stderr);
  }

 private:
  bool on_;
  uint64_t total_;
  std::chrono::steady_clock::time_point drawn_{};
};

}  // namespace

std::string DefaultModelCache() {
  const char* home = std::getenv("STRATA_HOME");
  return (home && *home ? std::string(home) : UserCacheDir()) + "/models";
}

std::string KerasModelCache() {  // Keras's own fallback without a home: /tmp/.keras
  if (const char* keras_home = std::getenv("KERAS_HOME"); keras_home && *keras_home)
    return std::string(keras_home) + "/models";
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.keras/models" : "/tmp/.keras/models";
}

std::string HashAlgorithmFor(const std::string& file_hash) { return file_hash.size() == 64 ? "sha256" : "md5"; }

Result<std::string> FileHash(const std::string& path, const std::string& algorithm) {
  if (algorithm != "md5" && algorithm != "sha256")
    return InvalidArgument("file hash: algorithm must be md5 or sha256, got \"" + algorithm + "\"");
  STRATA_ASSIGN_OR_RETURN(auto file, OpenRandomAccessFile(path));
  Digest digest(algorithm);
  std::string buf(size_t{1} << 20, '\0');
  for (uint64_t offset = 0;;) {
    STRATA_ASSIGN_OR_RETURN(size_t n, file->Read(offset, buf.size(), buf.data()));
    if (n == 0) break;
    digest.Update(buf.data(), n);
    offset += n;
  }
  return digest.Hex();
}

Result<std::string> GetFile(const std::string& fname, const std::string& url, const std::string& file_hash,
                            const GetFileOptions& o) {
  if (fname.empty() || fname.find('/') != std::string::npos || fname == "." || fname == "..")
    return InvalidArgument("get_file: the file name must be a plain name, got \"" + fname + "\"");
  const std::string cache = o.cache_dir.empty() ? DefaultModelCache() : o.cache_dir;
  std::vector<std::string> dirs = {cache};
  for (const auto& d : o.search_dirs) dirs.push_back(d);
  if (o.use_default_search_dirs) dirs.push_back(KerasModelCache());
  for (const auto& d : dirs)
    if (Valid(d + "/" + fname, file_hash)) return d + "/" + fname;

  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) return IOError("get_file: cannot create the cache directory " + cache + ": " + ec.message());
  const std::string target = cache + "/" + fname;
  auto fail = [&](const Status& s) { return Status(s.code(), "downloading " + url + ": " + s.message()); };
  auto remote = OpenFile(url);
  if (!remote.ok()) return fail(remote.status());
  auto size = (*remote)->Size();
  if (!size.ok()) return fail(size.status());
  // Written to a temporary beside `target`: dropped unrenamed (and removed) on any error below.
  STRATA_ASSIGN_OR_RETURN(auto out, NewAtomicWritableFile(target));
  Digest digest(file_hash.empty() ? "md5" : HashAlgorithmFor(file_hash));
  ProgressBar bar(o.progress, url, *size);
  std::string buf(size_t{8} << 20, '\0');
  uint64_t done = 0;
  while (done < *size) {
    auto n = (*remote)->Read(done, buf.size(), buf.data());
    if (!n.ok()) return fail(n.status());
    if (*n == 0) return fail(IOError("the body ended at byte " + std::to_string(done) + " of " + std::to_string(*size)));
    digest.Update(buf.data(), *n);
    STRATA_RETURN_IF_ERROR(out->Append(std::string_view(buf.data(), *n)));
    done += *n;
    bar.Update(done);
  }
  bar.Update(done, true);
  const std::string got = digest.Hex();
  if (!file_hash.empty() && got != Lower(file_hash))
    return InvalidArgument("downloading " + url + ": the file's " + HashAlgorithmFor(file_hash) + " is " + got +
                           ", expected " + Lower(file_hash) + " (a corrupted or changed file; nothing was kept)");
  STRATA_RETURN_IF_ERROR(out->Close());
  return target;
}

}  // namespace strata::io
