// Google Cloud Storage: gs://bucket/object read by range requests on the XML endpoint
// (endpoint/bucket/object), listed through the JSON API (endpoint/storage/v1/b/bucket/o,
// prefix + pageToken), the way the seed's `gs://flowers-public/...` files are read.
//
// Public buckets need no credentials. GOOGLE_OAUTH_ACCESS_TOKEN (e.g. from
// `gcloud auth print-access-token`) is sent as "Authorization: Bearer ..." when set.
// STRATA_GCS_ENDPOINT replaces https://storage.googleapis.com (tests, emulators).
#pragma once

#include <memory>

#include "strata/io/file_system.h"

namespace strata::io {

std::unique_ptr<FileSystem> NewGcsFileSystem();

}  // namespace strata::io
