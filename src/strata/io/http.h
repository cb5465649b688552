// HTTP(S) through libcurl: one request with bounded retries, and a RandomAccessFile that
// reads a remote object in large range-request blocks with read-ahead.
//
// Connections: easy handles live in a process-wide pool; a handle keeps its connection
// cache, so the next request to the same host reuses the open (keep-alive) connection.
// Each open file has background threads (fetch_threads) that fetch the blocks ahead of the reader
// (block k+1..k+readahead while the reader consumes block k); a reader waiting for a block
// waits on its own file only, never on the other streams of the pipeline.
//
// Retries: connection failures, resets, a body cut short, stalls (slower than 1 KB/s for
// stall_timeout_s), 429 and 5xx are retried after a backoff that doubles from
// backoff_initial_ms (capped at 5 s), at most max_retries times; a block is kept only when
// it is whole, so a retry never returns a byte twice or skips one. Any other 4xx is an
// error at once, naming the URL and status. So a request that stalls every time fails after
// at most (1 + max_retries) x (connect_timeout_s + stall_timeout_s + 6 s: libcurl's speed
// window) plus the backoffs (docs/remote.md works the defaults out). A TLS certificate that does not verify is an
// error at once (not retried), naming the URL and the CA bundle used.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/file.h"
#include "strata/core/status.h"
#include "strata/io/file_system.h"

namespace strata::io {

struct HttpOptions {
  // Range-request size: large, so per-request latency is amortised (object-store guidance).
  size_t block_bytes = size_t{8} << 20;  // STRATA_IO_BLOCK_BYTES
  // Blocks fetched ahead of the reader by the file's background thread (memory per open
  // file is about (1 + readahead) x block_bytes).
  int readahead_blocks = 2;  // STRATA_IO_READAHEAD_BLOCKS
  // Background threads per open file fetching those blocks, each over its own connection:
  // one TCP stream is slower than the disk behind an object store, two overlap.
  int fetch_threads = 2;  // STRATA_IO_FETCH_THREADS
  // Retries of one request after the first attempt (5xx, 429, resets, short bodies, stalls).
  int max_retries = 5;  // STRATA_IO_MAX_RETRIES
  // Wait before the first retry; doubles per retry, capped at 5 s.
  int backoff_initial_ms = 100;  // STRATA_IO_BACKOFF_MS
  int connect_timeout_s = 10;    // STRATA_IO_CONNECT_TIMEOUT_S
  // A transfer slower than 1 KB/s for this long is abandoned (and retried).
  int stall_timeout_s = 30;  // STRATA_IO_STALL_TIMEOUT_S
  // PEM file of the certificate authorities that https:// servers are verified against, in
  // place of the system's (a private CA, a test CA). Verification itself is always on.
  std::string ca_bundle;  // STRATA_CA_BUNDLE, else CURL_CA_BUNDLE (the curl tool's variable)

  // Defaults overridden by the STRATA_IO_* environment variables above.
  static HttpOptions FromEnv();
};

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  // When range_length > 0: "Range: bytes=range_begin-(range_begin+range_length-1)".
  uint64_t range_begin = 0;
  uint64_t range_length = 0;
  // When set, the body goes straight here (no copy, no allocation) while it fits;
  // HttpResponse::sink_bytes says how much. A longer body goes to `body` instead.
  char* sink = nullptr;
  size_t sink_capacity = 0;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  size_t sink_bytes = 0;  // body bytes written to HttpRequest::sink (then `body` is empty)
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  // The value of header `name` (lower case), or "" when absent.
  std::string Header(std::string_view name) const;
};

// Called before every attempt, to add credentials (S3 signs here: the date is signed).
using Authorizer = std::function<Status(HttpRequest*)>;

// One request with retries as described above. Returns the last response for any status
// that is not retried (the caller decides what a 404 means); an error only when the retry
// budget is spent or the transfer cannot start. `cancel`, when set, aborts a transfer.
Result<HttpResponse> Fetch(HttpRequest request, const HttpOptions& options, const Authorizer& auth = {},
                           const std::atomic<bool>* cancel = nullptr);

// "HTTP 404 for GET https://host/x (s3://b/x): <start of the body>": NotFound for 404,
// InvalidArgument for 401/403 and other 4xx, IOError otherwise.
Status HttpError(const HttpRequest& request, const HttpResponse& response, std::string_view display_name);

// A remote object as a RandomAccessFile. `name` is what errors and name() show (the user's
// s3:// or gs:// path); `url` is fetched. The first block is fetched here, so a missing
// object is an error at open time.
Result<std::unique_ptr<RandomAccessFile>> OpenHttpFile(std::string name, std::string url, Authorizer auth,
                                                       HttpOptions options);

// http:// and https://: Open only; Glob is Unimplemented (HTTP has no listing).
std::unique_ptr<FileSystem> NewHttpFileSystem();

// Process-wide counters over every remote request (tests and benchmarks read them).
struct IoCounters {
  std::atomic<int64_t> requests{0};  // attempts, retries included
  std::atomic<int64_t> retries{0};   // attempts after the first
  std::atomic<int64_t> bytes{0};     // body bytes received
};
IoCounters& Counters();

}  // namespace strata::io
