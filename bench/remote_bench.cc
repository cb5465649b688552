// Remote vs local read throughput of the same TFRecordDataset pipeline (bench/remote_bench.sh
// drives it: 16 files of ~50 MB served by nginx on loopback).
//
//   remote_bench make DIR FILES MB        write FILES TFRecord files of about MB each into DIR
//   remote_bench read PARALLEL PATH...    read every record of PATH... (local paths or URLs)
//                                         with num_parallel_reads = PARALLEL, three passes in
//                                         one process; one JSON line per pass on stdout, the
//                                         pipeline's stage table (MB/s/str) on stderr
//   remote_bench fetch URL                block-sized range requests of URL one after another,
//                                         no reader: what one connection delivers
//   remote_bench transport URL...         the transport's ceiling: one thread per URL, each
//                                         GETs the whole body with bare libcurl and discards
//                                         it (no copy, no reader); three passes, JSON lines
//   remote_bench pread PATH...            the local read alone: one thread per file, 1 MiB
//                                         preads into a reused buffer, no reader
//
// Every pass also reports CPU milliseconds per MB: this process's (user + system) and the
// server's, summed over the pids in STRATA_BENCH_SERVER_PIDS (nginx's master and workers).
// On two cores that the server shares, CPU per MB is what decides the rates.
#include <curl/curl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/data/sources.h"
#include "strata/io/http.h"
#include "strata/record/record_writer.h"

using namespace strata;

namespace {

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}
long SelfPageFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

// utime + stime of each pid in STRATA_BENCH_SERVER_PIDS, from /proc/PID/stat (fields 14
// and 15, counted after the parenthesised command name, which may hold spaces).
double ServerCpuSeconds() {
  const char* env = std::getenv("STRATA_BENCH_SERVER_PIDS");
  if (!env) return 0;
  std::istringstream pids(env);
  double total = 0;
  for (std::string pid; pids >> pid;) {
    std::ifstream f("/proc/" + pid + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));  // field 3 (state) onwards
    std::string skip;
    for (int i = 3; i < 14; ++i) fields >> skip;
    long long utime = 0, stime = 0;
    fields >> utime >> stime;
    total += static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return total;
}

// CPU of this process and of the server since construction, as JSON fields per MB.
struct CpuMeter {
  double self0 = SelfCpuSeconds(), server0 = ServerCpuSeconds();
  long faults0 = SelfPageFaults();
  std::string Json(double mb) const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "\"cpu_ms_per_mb\": %.4f, \"server_cpu_ms_per_mb\": %.4f, \"page_faults\": %ld",
                  (SelfCpuSeconds() - self0) * 1e3 / mb, (ServerCpuSeconds() - server0) * 1e3 / mb,
                  SelfPageFaults() - faults0);
    return buf;
  }
};

int Make(const std::string& dir, int files, int mb) {
  std::mt19937_64 rng(1);
  std::string rec(100 * 1000, '\0');  // ~100 KB records: JPEG-sized examples
  for (int f = 0; f < files; ++f) {
    char name[64];
    std::snprintf(name, sizeof name, "/train-%05d-of-%05d.tfrecord", f, files);
    auto w = record::RecordWriter::Open(dir + name);
    if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 1;
    for (int64_t written = 0; written < int64_t{mb} * 1000 * 1000; written += static_cast<int64_t>(rec.size())) {
      for (size_t i = 0; i < rec.size(); i += 8) {
        const uint64_t x = rng();
        std::memcpy(rec.data() + i, &x, std::min<size_t>(8, rec.size() - i));
      }
      if (Status s = (*w)->WriteRecord(rec); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    }
    if (Status s = (*w)->Close(); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  }
  return 0;
}

// One pass over `paths`; prints a JSON line (and the stage table to stderr).
int ReadPass(int pass, int parallel, const std::vector<std::string>& paths) {
  const CpuMeter cpu;
  const auto t0 = std::chrono::steady_clock::now();
  auto it = data::TFRecordDataset(paths, {.num_parallel_reads = parallel}).make_iterator();
  if (!it.ok()) return std::fprintf(stderr, "%s\n", it.status().ToString().c_str()), 1;
  data::Element e;
  bool end = false;
  int64_t records = 0, bytes = 0;
  while (true) {
    if (Status s = (*it)->GetNext(&e, &end); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    if (end) break;
    ++records;
    bytes += static_cast<int64_t>(e[0].nbytes());
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"pass\": %d, \"parallel\": %d, \"records\": %lld, \"mb\": %.1f, \"seconds\": %.3f, "
              "\"mb_per_s\": %.1f, \"requests\": %lld, \"retries\": %lld, %s}\n",
              pass, parallel, static_cast<long long>(records), bytes / 1e6, sec, bytes / 1e6 / sec,
              static_cast<long long>(io::Counters().requests.load()), static_cast<long long>(io::Counters().retries.load()),
              cpu.Json(bytes / 1e6).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "%s", (*it)->StatsTable().c_str());
  return 0;
}

// Three passes in one process, as epochs are: the first also maps the remote reader's block
// memory (pooled afterwards), the later ones show the steady state.
int Read(int parallel, const std::vector<std::string>& paths) {
  for (int pass = 1; pass <= 3; ++pass)
    if (int rc = ReadPass(pass, parallel, paths); rc != 0) return rc;
  return 0;
}

// Raw block fetches of URL, no reader: what one connection delivers.
int FetchOnly(const std::string& url) {
  const io::HttpOptions o = io::HttpOptions::FromEnv();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  std::string buffer(o.block_bytes, '\0');  // written in place, as the reader's blocks are
  for (uint64_t begin = 0;; begin += o.block_bytes) {
    auto r = io::Fetch({.url = url, .range_begin = begin, .range_length = o.block_bytes, .sink = buffer.data(),
                        .sink_capacity = buffer.size()},
                       o);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
    if (r->status != 206) break;
    bytes += static_cast<int64_t>(r->sink_bytes);
    if (r->sink_bytes < o.block_bytes) break;
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"fetch_mb\": %.1f, \"seconds\": %.3f, \"mb_per_s\": %.1f}\n", bytes / 1e6, sec, bytes / 1e6 / sec);
  return 0;
}

// What loopback HTTP can deliver to a client that does nothing with the bytes: the peer the
// pipeline's HTTP rate is bounded by on this machine (the server shares its cores).
size_t DiscardBody(char*, size_t size, size_t n, void* total) {
  static_cast<std::atomic<int64_t>*>(total)->fetch_add(static_cast<int64_t>(size * n), std::memory_order_relaxed);
  return size * n;
}

// Three passes of `one(source)` on a thread per source, each returning its bytes (< 0 when it
// failed); one JSON line per pass with the rate and CPU per MB. `what` names the mode in the
// failure message, `count_key` the sources in the JSON line ("streams", "files").
template <typename PerSource>
int PassesOnThreads(const char* what, const char* count_key, const std::vector<std::string>& sources, PerSource one) {
  for (int pass = 1; pass <= 3; ++pass) {
    std::atomic<int64_t> bytes{0};
    std::atomic<int> failures{0};
    const CpuMeter cpu;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (const std::string& source : sources)
      threads.emplace_back([&, source] {
        const int64_t n = one(source);
        if (n < 0) failures.fetch_add(1);
        else bytes.fetch_add(n);
      });
    for (auto& t : threads) t.join();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (failures.load() > 0) return std::fprintf(stderr, "%s: %d of %zu failed\n", what, failures.load(), sources.size()), 1;
    const double mb = bytes.load() / 1e6;
    std::printf("{\"pass\": %d, \"%s\": %zu, \"mb\": %.1f, \"seconds\": %.3f, \"mb_per_s\": %.1f, %s}\n", pass,
                count_key, sources.size(), mb, sec, mb / sec, cpu.Json(mb).c_str());
    std::fflush(stdout);
  }
  return 0;
}

int Transport(const std::vector<std::string>& urls) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  return PassesOnThreads("transport GETs", "streams", urls, [](const std::string& url) -> int64_t {
    std::atomic<int64_t> bytes{0};
    CURL* h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);  // as the reader's handles
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, DiscardBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &bytes);
    const bool ok = curl_easy_perform(h) == CURLE_OK;
    curl_easy_cleanup(h);
    return ok ? bytes.load() : -1;
  });
}

// The local read alone, what an HTTP reader replaces with the transport: one thread per
// file, 1 MiB preads into a buffer each thread reuses.
int PreadOnly(const std::vector<std::string>& paths) {
  return PassesOnThreads("pread files", "files", paths, [](const std::string& path) -> int64_t {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return -1;
    std::vector<char> buf(1 << 20);
    int64_t n = 0;
    for (off_t at = 0;; at += static_cast<off_t>(buf.size())) {
      const ssize_t got = pread(fileno(f), buf.data(), buf.size(), at);
      if (got < 0) n = -1;
      if (got <= 0) break;
      n += got;
    }
    std::fclose(f);
    return n;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "make" && argc == 5) return Make(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  if (mode == "fetch" && argc == 3) return FetchOnly(argv[2]);
  if (mode == "read" && argc >= 4) return Read(std::atoi(argv[2]), std::vector<std::string>(argv + 3, argv + argc));
  if (mode == "transport" && argc >= 3) return Transport(std::vector<std::string>(argv + 2, argv + argc));
  if (mode == "pread" && argc >= 3) return PreadOnly(std::vector<std::string>(argv + 2, argv + argc));
  std::fprintf(stderr, "usage: remote_bench make DIR FILES MB | read PARALLEL PATH... | fetch URL | transport URL... | pread PATH...\n");
  return 2;
}
