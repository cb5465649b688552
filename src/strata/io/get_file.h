// Keras's utils.get_file for model weights: a file downloaded once into a cache, checked
// against its published hash, and found there the next time.
//
//   auto path = io::GetFile("resnet50_weights_tf_dim_ordering_tf_kernels.h5",
//                           "https://storage.googleapis.com/.../resnet50_..._kernels.h5",
//                           "2cb95161c43110f7111970584f804107");
//
// Lookup order: the cache (GetFileOptions::cache_dir), then the read-only directories
// (Keras's ~/.keras/models: a file Keras downloaded is used where it is). A file found with the
// wrong hash is not used (Keras's rule: incomplete or outdated) and is downloaded again into the
// cache. The download goes to a temporary file beside its final name, with a progress bar on
// stderr; its hash is computed as the bytes arrive, and only a file with the right hash is
// fsynced and renamed into place. A wrong hash, a connection cut beyond the retries, no
// network or an HTTP error is an error naming the URL, and leaves nothing behind.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>
#include <vector>

#include "strata/core/status.h"

namespace strata::io {

struct GetFileOptions {
  std::string cache_dir;                 // "": DefaultModelCache()
  std::vector<std::string> search_dirs;  // looked in after the cache; default: KerasModelCache()
  bool use_default_search_dirs = true;   // false: only search_dirs (tests)
  bool progress = true;                  // a progress bar on stderr while downloading
};

// $STRATA_HOME/models, else the user cache (~/.cache/strata, $STRATA_CACHE_DIR,
// $XDG_CACHE_HOME/strata) + "/models".
std::string DefaultModelCache();
// Keras's cache: $KERAS_HOME/models, else ~/.keras/models.
std::string KerasModelCache();

// The hex digest of a file: "md5" or "sha256". Keras's "auto": sha256 for a 64-digit hash,
// else md5 (HashAlgorithmFor).
Result<std::string> FileHash(const std::string& path, const std::string& algorithm);
std::string HashAlgorithmFor(const std::string& file_hash);

// The local path of `fname` (a plain file name), downloading it from `url` when no cached copy
// has `file_hash` ("" skips the check, as Keras does for files it publishes no hash for).
Result<std::string> GetFile(const std::string& fname, const std::string& url, const std::string& file_hash,
                            const GetFileOptions& options = {});

}  // namespace strata::io

#pragma GCC visibility pop
