#include "strata/io/http.h"
#include "strata/core/version.h"  // STRATA_VERSION in the User-Agent

#include <curl/curl.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "strata/io/responses.h"

namespace strata::io {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  return (end && *end == '\0' && x >= 0) ? x : fallback;
}

// Easy handles are reused: each keeps its connection cache, so a request to a host it has
// talked to goes over the already open connection.
class HandlePool {
 public:
  static HandlePool& Get() {
    static HandlePool* pool = [] {
      curl_global_init(CURL_GLOBAL_DEFAULT);
      auto* p = new HandlePool;
      // libcurl's built-in CA file and folder, so a handle that was given STRATA_CA_BUNDLE
      // can be set back to them (handles are reused, never reset).
      if (CURL* h = curl_easy_init()) {
        char* v = nullptr;
        if (curl_easy_getinfo(h, CURLINFO_CAINFO, &v) == CURLE_OK && v) p->default_ca_file = v;
        v = nullptr;
        if (curl_easy_getinfo(h, CURLINFO_CAPATH, &v) == CURLE_OK && v) p->default_ca_path = v;
        curl_easy_cleanup(h);
      }
      return p;
    }();
    return *pool;
  }
  std::string default_ca_file, default_ca_path;
  CURL* Acquire() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!free_.empty()) {
        CURL* h = free_.back();
        free_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  // No curl_easy_reset: it would also drop the handle's 512 KiB receive buffer (a fresh
  // allocation, page-faulted, per request). Perform sets every option each time instead.
  void Release(CURL* h) {
    std::lock_guard<std::mutex> l(mu_);
    free_.push_back(h);
  }

 private:
  std::mutex mu_;
  std::vector<CURL*> free_;
};

struct Transfer {
  HttpResponse* response;
  const std::atomic<bool>* cancel;
  char* sink;
  size_t sink_capacity;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  HttpResponse* r = t->response;
  const size_t len = size * n;
  if (t->sink && r->body.empty() && r->sink_bytes + len <= t->sink_capacity) {
    std::memcpy(t->sink + r->sink_bytes, data, len);
    r->sink_bytes += len;
    return len;
  }
  if (r->sink_bytes > 0) {  // longer than the sink: everything moves to `body`
    r->body.assign(t->sink, r->sink_bytes);
    r->sink_bytes = 0;
  }
  r->body.append(data, len);
  return len;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  ParseHeaderLine(std::string_view(data, size * n), &static_cast<Transfer*>(user)->response->headers);
  return size * n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return (t->cancel && t->cancel->load(std::memory_order_relaxed)) ? 1 : 0;
}

bool Retryable(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

// One attempt. Returns the curl code; fills `response` and, on a failure, `detail` (libcurl's
// own words, e.g. "SSL certificate problem: unable to get local issuer certificate").
CURLcode Perform(const HttpRequest& req, const HttpOptions& o, const std::atomic<bool>* cancel, HttpResponse* response,
                 std::string* detail) {
  HandlePool& pool = HandlePool::Get();
  CURL* h = pool.Acquire();
  if (!h) return CURLE_FAILED_INIT;
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  // Certificate verification stays on (libcurl's default); only the CAs change. libcurl does
  // not reuse a connection verified under another CA setting.
  const bool own_ca = !o.ca_bundle.empty();
  curl_easy_setopt(h, CURLOPT_CAINFO, own_ca ? o.ca_bundle.c_str()
                                             : (pool.default_ca_file.empty() ? nullptr : pool.default_ca_file.c_str()));
  curl_easy_setopt(h, CURLOPT_CAPATH, own_ca || pool.default_ca_path.empty() ? nullptr : pool.default_ca_path.c_str());
  Transfer t{response, cancel, req.sink, req.sink_capacity};
  curl_slist* headers = nullptr;
  for (const auto& [k, v] : req.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
  if (!req.sink && req.range_length > 0) response->body.reserve(req.range_length);
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for timeouts
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);  // fewer, larger recv()s than the 16 KiB default
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(o.connect_timeout_s));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.stall_timeout_s));
  curl_easy_setopt(h, CURLOPT_USERAGENT, "strata/" STRATA_VERSION);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOBODY, req.method == "HEAD" ? 1L : 0L);
  if (req.method != "HEAD") curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  std::string range;
  if (req.range_length > 0)
    range = std::to_string(req.range_begin) + "-" + std::to_string(req.range_begin + req.range_length - 1);
  curl_easy_setopt(h, CURLOPT_RANGE, range.empty() ? nullptr : range.c_str());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  const CURLcode code = curl_easy_perform(h);
  if (code != CURLE_OK) *detail = error;
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);  // `error` goes out of scope
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response->status);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);  // the list is freed next
  curl_slist_free_all(headers);
  HandlePool::Get().Release(h);
  return code;
}

// curl's name for the failure, its detail when that says more, and for a TLS verification
// failure which CAs were used and how to change them.
std::string CurlProblem(CURLcode code, const std::string& detail, const HttpOptions& o) {
  std::string s = curl_easy_strerror(code);
  if (!detail.empty() && detail != s) s += " (" + detail + ")";
  if (code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE || code == CURLE_SSL_CERTPROBLEM)
    s += o.ca_bundle.empty() ? "; the server's certificate was checked against the system's CAs: set STRATA_CA_BUNDLE "
                               "to a PEM file of the CA that signed it"
                             : "; the server's certificate was checked against the CAs in " + o.ca_bundle +
                                   " (named by STRATA_CA_BUNDLE, else CURL_CA_BUNDLE)";
  return s;
}

std::string Describe(const HttpRequest& req, std::string_view display_name) {
  std::string s = req.method + " " + req.url;
  if (!display_name.empty() && display_name != req.url) s += " (" + std::string(display_name) + ")";
  if (req.range_length > 0)
    s += " bytes " + std::to_string(req.range_begin) + "-" + std::to_string(req.range_begin + req.range_length - 1);
  return s;
}

}  // namespace

IoCounters& Counters() {
  static IoCounters* c = new IoCounters;
  return *c;
}

HttpOptions HttpOptions::FromEnv() {
  HttpOptions o;
  o.block_bytes = static_cast<size_t>(std::max<int64_t>(EnvInt("STRATA_IO_BLOCK_BYTES", o.block_bytes), 4096));
  o.readahead_blocks = static_cast<int>(EnvInt("STRATA_IO_READAHEAD_BLOCKS", o.readahead_blocks));
  o.fetch_threads = static_cast<int>(std::max<int64_t>(EnvInt("STRATA_IO_FETCH_THREADS", o.fetch_threads), 1));
  o.max_retries = static_cast<int>(EnvInt("STRATA_IO_MAX_RETRIES", o.max_retries));
  o.backoff_initial_ms = static_cast<int>(EnvInt("STRATA_IO_BACKOFF_MS", o.backoff_initial_ms));
  o.connect_timeout_s = static_cast<int>(std::max<int64_t>(EnvInt("STRATA_IO_CONNECT_TIMEOUT_S", o.connect_timeout_s), 1));
  o.stall_timeout_s = static_cast<int>(std::max<int64_t>(EnvInt("STRATA_IO_STALL_TIMEOUT_S", o.stall_timeout_s), 1));
  for (const char* name : {"STRATA_CA_BUNDLE", "CURL_CA_BUNDLE"})
    if (const char* v = std::getenv(name); v && *v) {
      o.ca_bundle = v;
      break;
    }
  return o;
}

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

Result<HttpResponse> Fetch(HttpRequest request, const HttpOptions& options, const Authorizer& auth,
                           const std::atomic<bool>* cancel) {
  const HttpRequest base = request;
  std::string last_problem;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) {
      Counters().retries.fetch_add(1, std::memory_order_relaxed);
      const int64_t wait = std::min<int64_t>(int64_t{options.backoff_initial_ms} << std::min(attempt - 1, 20), 5000);
      std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    }
    if (cancel && cancel->load()) return IOError("cancelled: " + Describe(base, {}));
    request = base;
    if (auth) STRATA_RETURN_IF_ERROR(auth(&request));
    HttpResponse response;
    Counters().requests.fetch_add(1, std::memory_order_relaxed);
    std::string detail;
    const CURLcode code = Perform(request, options, cancel, &response, &detail);
    if ((response.status < 200 || response.status >= 300) && response.sink_bytes > 0) {
      response.body.assign(request.sink, response.sink_bytes);  // an error page, not data
      response.sink_bytes = 0;
    }
    const size_t got = response.body.size() + response.sink_bytes;
    Counters().bytes.fetch_add(static_cast<int64_t>(got), std::memory_order_relaxed);
    if (cancel && cancel->load()) return IOError("cancelled: " + Describe(base, {}));
    if (code == CURLE_OK) {
      const std::string length = response.Header("content-length");
      // A length that is not a plain number cannot vouch for the body: treated as cut short.
      const std::optional<uint64_t> want = ParseContentLength(length);
      const bool short_body = request.method != "HEAD" && !length.empty() && (!want || *want != got);
      if (!short_body && response.status != 429 && response.status < 500) return response;
      last_problem = short_body ? "body cut short (" + std::to_string(got) + " of " + length + " bytes)"
                                : "HTTP " + std::to_string(response.status);
    } else if (Retryable(code)) {
      last_problem = CurlProblem(code, detail, options) + " after " + std::to_string(got) + " body bytes";
    } else {
      return IOError(Describe(base, {}) + ": " + CurlProblem(code, detail, options));
    }
    if (attempt >= options.max_retries)
      return IOError(Describe(base, {}) + ": " + last_problem + " (gave up after " + std::to_string(attempt + 1) +
                     " attempts; STRATA_IO_MAX_RETRIES=" + std::to_string(options.max_retries) + ")");
  }
}

Status HttpError(const HttpRequest& request, const HttpResponse& response, std::string_view display_name) {
  std::string msg = "HTTP " + std::to_string(response.status) + " for " + Describe(request, display_name);
  std::string body = response.body.substr(0, 300);
  for (char& c : body)
    if (c == '\n' || c == '\r') c = ' ';
  if (!body.empty()) msg += ": " + body;
  if (response.status == 404) return NotFound(msg);
  if (response.status >= 400 && response.status < 500) return InvalidArgument(msg);
  return IOError(msg);
}

namespace {

// Block memory: anonymous mappings with transparent huge pages requested, recycled through a
// process-wide pool. Fresh memory costs a page fault per 4 KiB on first touch (about 20 us
// each on a VM: measured, it cut loopback throughput by more than half); pooled blocks fault
// once per 2 MiB, and only the first time. The pool keeps at most kPoolBytes.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  explicit PooledBuffer(size_t capacity) {
    const size_t unit = capacity >= kHuge ? kHuge : 4096;  // huge pages only for large blocks
    capacity = (capacity + unit - 1) / unit * unit;
    {
      std::lock_guard<std::mutex> l(PoolMutex());
      auto& pool = Pool();
      for (size_t i = 0; i < pool.size(); ++i)
        if (pool[i].second == capacity) {
          data_ = pool[i].first;
          capacity_ = capacity;
          pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
          PoolBytes() -= capacity;
          return;
        }
    }
    void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;  // data() == nullptr: the caller falls back to a string
    if (capacity >= kHuge) ::madvise(p, capacity, MADV_HUGEPAGE);
    data_ = static_cast<char*>(p);
    capacity_ = capacity;
  }
  PooledBuffer(PooledBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), capacity_(o.capacity_) {}
  PooledBuffer& operator=(PooledBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = o.capacity_;
    }
    return *this;
  }
  ~PooledBuffer() { Release(); }
  char* data() const { return data_; }
  size_t capacity() const { return data_ ? capacity_ : 0; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;
  static constexpr size_t kPoolBytes = size_t{1} << 30;
  static std::mutex& PoolMutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::vector<std::pair<char*, size_t>>& Pool() {
    static auto* p = new std::vector<std::pair<char*, size_t>>;
    return *p;
  }
  static size_t& PoolBytes() {
    static size_t bytes = 0;
    return bytes;
  }
  void Release() {
    if (!data_) return;
    {
      std::lock_guard<std::mutex> l(PoolMutex());
      if (PoolBytes() + capacity_ <= kPoolBytes) {
        Pool().emplace_back(data_, capacity_);
        PoolBytes() += capacity_;
        data_ = nullptr;
        return;
      }
    }
    ::munmap(data_, capacity_);
    data_ = nullptr;
  }
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

class HttpFile : public RandomAccessFile {
 public:
  HttpFile(std::string name, std::string url, Authorizer auth, HttpOptions o)
      : name_(std::move(name)), url_(std::move(url)), auth_(std::move(auth)), o_(o) {}

  ~HttpFile() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  // Fetches block 0, learning the size from Content-Range (or the whole body when the
  // server ignores ranges: then the file is one block).
  Status Init() {
    auto first = std::make_shared<Block>();
    first->mem = PooledBuffer(o_.block_bytes);
    HttpRequest req{.url = url_, .range_begin = 0, .range_length = o_.block_bytes};
    req.sink = first->mem.data();
    req.sink_capacity = first->mem.data() ? o_.block_bytes : 0;
    STRATA_ASSIGN_OR_RETURN(HttpResponse r, Fetch(req, o_, auth_, &stop_));
    first->ready = true;
    if (r.status == 200 || r.status == 206) first->Take(&r);  // else r.body is the error page
    if (r.status == 416) {  // empty object: no byte 0
      size_ = 0;
      first->size = 0;
    } else if (r.status == 206) {
      const std::string cr = r.Header("content-range");  // bytes 0-N/TOTAL
      const std::optional<uint64_t> total = ParseContentRangeTotal(cr);
      if (!total)
        return IOError("HTTP 206 without a total size in Content-Range ('" + cr + "') for " + url_ + " (" + name_ + ")");
      size_ = *total;
      if (first->size != std::min<uint64_t>(o_.block_bytes, size_))
        return IOError("HTTP 206 for " + url_ + " (" + name_ + "): " + std::to_string(first->size) +
                       " bytes for the first block of a " + std::to_string(size_) + "-byte object");
    } else if (r.status == 200) {
      size_ = first->size;
      block_bytes_ = std::max<uint64_t>(size_, 1);
    } else {
      return HttpError(req, r, name_);
    }
    if (block_bytes_ == 0) block_bytes_ = o_.block_bytes;
    blocks_[0] = std::move(first);
    return Status::OK();
  }

  const std::string& name() const override { return name_; }
  Result<uint64_t> Size() const override { return size_; }

  Result<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    if (offset >= size_ || n == 0) return size_t{0};
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    const uint64_t nblocks = (size_ + block_bytes_ - 1) / block_bytes_;
    const uint64_t first = offset / block_bytes_, last = (offset + n - 1) / block_bytes_;
    const uint64_t ahead = std::min<uint64_t>(last + static_cast<uint64_t>(std::max(o_.readahead_blocks, 0)), nblocks - 1);
    std::vector<std::shared_ptr<Block>> want;
    {
      std::unique_lock<std::mutex> l(mu_);
      // Forget blocks behind the reader and beyond the read-ahead window (a seek).
      for (auto it = blocks_.begin(); it != blocks_.end();) {
        if (it->first >= first && it->first <= ahead) {
          ++it;
          continue;
        }
        it = blocks_.erase(it);  // its memory returns to the pool when the last holder lets go
      }
      bool queued = false;
      for (uint64_t i = first; i <= ahead; ++i) {
        if (blocks_.count(i)) continue;
        auto b = std::make_shared<Block>();
        blocks_[i] = b;
        queue_.emplace_back(i, std::move(b));
        queued = true;
      }
      if (queued) {
        // No more fetchers than blocks left to fetch (block 0 came with Init).
        const uint64_t want_workers = std::min<uint64_t>(static_cast<uint64_t>(std::max(o_.fetch_threads, 1)), nblocks - 1);
        while (workers_.size() < want_workers) workers_.emplace_back([this] { Work(); });
        cv_.notify_all();
      }
      for (uint64_t i = first; i <= last; ++i) want.push_back(blocks_[i]);
      for (const auto& b : want) {
        cv_.wait(l, [&] { return b->ready; });
        if (!b->status.ok()) return b->status;
      }
    }
    size_t done = 0;
    for (uint64_t i = first; i <= last; ++i) {
      const Block& b = *want[i - first];
      const uint64_t block_start = i * block_bytes_;
      const uint64_t from = std::max<uint64_t>(offset, block_start) - block_start;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(b.size - from, n - done));
      std::memcpy(scratch + done, b.bytes() + from, take);
      done += take;
    }
    return done;
  }

 private:
  struct Block {
    bool ready = false;
    Status status;
    PooledBuffer mem;    // the range response, written by curl in place
    std::string spill;   // a body that did not fit `mem` (a server that ignored Range)
    size_t size = 0;
    const char* bytes() const { return spill.empty() ? mem.data() : spill.data(); }
    void Take(HttpResponse* r) {
      if (r->sink_bytes > 0 || r->body.empty()) {
        size = r->sink_bytes;
      } else {
        spill = std::move(r->body);
        size = spill.size();
      }
    }
  };

  // A background fetcher: blocks in the order the reader asked for them. With several, the
  // next blocks are in flight at once over separate connections.
  void Work() const {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto [index, b] = std::move(queue_.front());
      queue_.pop_front();
      // Dropped from the window (a seek) and awaited by no reader: not worth fetching. A
      // reader on another thread may still wait for it, holding a reference: then fetch.
      if (b->ready || b.use_count() == 1) continue;
      l.unlock();
      Status s = FetchBlock(index, b.get());
      l.lock();
      b->status = std::move(s);
      b->ready = true;
      cv_.notify_all();
    }
  }

  Status FetchBlock(uint64_t index, Block* b) const {
    const uint64_t begin = index * block_bytes_;
    const uint64_t length = std::min<uint64_t>(block_bytes_, size_ - begin);
    if (!b->mem.data()) b->mem = PooledBuffer(block_bytes_);
    HttpRequest req{.url = url_, .range_begin = begin, .range_length = length};
    req.sink = b->mem.data();
    req.sink_capacity = b->mem.data() ? static_cast<size_t>(length) : 0;
    STRATA_ASSIGN_OR_RETURN(HttpResponse r, Fetch(req, o_, auth_, &stop_));
    if (r.status == 200 || r.status == 206) b->Take(&r);  // else r.body is the error page
    if (r.status == 206 && b->size == length) return Status::OK();
    if (r.status == 200 && b->size == size_) {  // the server ignored the range
      b->spill = b->spill.substr(begin, length);
      b->size = b->spill.size();
      return Status::OK();
    }
    if (r.status == 206 || r.status == 200)
      return IOError("HTTP " + std::to_string(r.status) + " for " + url_ + " (" + name_ + ") bytes " +
                     std::to_string(begin) + "+" + std::to_string(length) + ": got " + std::to_string(b->size) +
                     " bytes (did the object change while it was read?)");
    return HttpError(req, r, name_);
  }

  const std::string name_;
  const std::string url_;
  const Authorizer auth_;
  const HttpOptions o_;
  uint64_t size_ = 0;
  uint64_t block_bytes_ = 0;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::map<uint64_t, std::shared_ptr<Block>> blocks_;
  mutable std::deque<std::pair<uint64_t, std::shared_ptr<Block>>> queue_;
  mutable std::vector<std::thread> workers_;  // fetch_threads, each with its own connection
  mutable std::atomic<bool> stop_{false};
};

class HttpFileSystem : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path) override {
    return OpenHttpFile(path, path, {}, HttpOptions::FromEnv());
  }
  Result<std::vector<std::string>> Glob(const std::string& pattern) override {
    if (LiteralPrefix(pattern) == pattern) return std::vector<std::string>{pattern};  // one named file
    return Unimplemented("cannot list '" + pattern +
                         "': HTTP has no directory listing; name the files (comma-separated) or use s3:// or gs://");
  }
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> OpenHttpFile(std::string name, std::string url, Authorizer auth,
                                                       HttpOptions options) {
  auto f = std::make_unique<HttpFile>(std::move(name), std::move(url), std::move(auth), options);
  STRATA_RETURN_IF_ERROR(f->Init());
  return std::unique_ptr<RandomAccessFile>(std::move(f));
}

std::unique_ptr<FileSystem> NewHttpFileSystem() { return std::make_unique<HttpFileSystem>(); }

}  // namespace strata::io
