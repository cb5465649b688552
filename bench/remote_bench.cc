// Remote vs local read throughput of the same TFRecordDataset pipeline (bench/remote_bench.sh
// drives it: 16 files of ~50 MB served by nginx on loopback).
//
//   remote_bench make DIR FILES MB        write FILES TFRecord files of about MB each into DIR
//   remote_bench read PARALLEL PATH...    read every record of PATH... (local paths or URLs)
//                                         with num_parallel_reads = PARALLEL; prints one JSON
//                                         line, then the pipeline's stage table (MB/s/str)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/data/sources.h"
#include "strata/io/http.h"
#include "strata/record/record_writer.h"

using namespace strata;

namespace {

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

int Read(int parallel, std::vector<std::string> paths) {
  const auto t0 = std::chrono::steady_clock::now();
  auto it = data::TFRecordDataset(std::move(paths), {.num_parallel_reads = parallel}).make_iterator();
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
  std::printf("{\"parallel\": %d, \"records\": %lld, \"mb\": %.1f, \"seconds\": %.3f, \"mb_per_s\": %.1f, "
              "\"requests\": %lld, \"retries\": %lld}\n",
              parallel, static_cast<long long>(records), bytes / 1e6, sec, bytes / 1e6 / sec,
              static_cast<long long>(io::Counters().requests.load()), static_cast<long long>(io::Counters().retries.load()));
  std::printf("%s", (*it)->StatsTable().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "make" && argc == 5) return Make(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  if (mode == "read" && argc >= 4) return Read(std::atoi(argv[2]), std::vector<std::string>(argv + 3, argv + argc));
  std::fprintf(stderr, "usage: remote_bench make DIR FILES MB | remote_bench read PARALLEL PATH...\n");
  return 2;
}
