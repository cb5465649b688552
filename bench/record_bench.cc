// Record I/O speed, each figure beside a peer measured in the same run:
//   CRC32C (SSE4.2 3-stream, and portable) vs memcpy of the same 1 MiB buffer;
//   reading 100 kB uncompressed records from the page cache vs memcpy of the same bytes and
//   vs one pread of the whole file;
//   parsing penguin-like 5-feature Examples: ExampleParser vs libprotobuf's generated parser
//   (tensorflow::Example::ParseFromString into a reused message) and vs DecodeExample.
// bench/record_bench.sh runs it with repetitions and prints the ratios.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "example.pb.h"
#include "strata/record/crc32c.h"
#include "strata/record/example.h"
#include "strata/record/example_parser.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"

namespace {
using namespace strata;
using namespace strata::record;

std::string RandomBytes(size_t n) {
  std::string s(n, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

constexpr size_t kCrcBytes = 1 << 20;

void BM_Crc32cHardware(benchmark::State& state) {
  if (!crc32c::HardwareAccelerated()) {
    state.SkipWithError("no SSE4.2");
    return;
  }
  std::string buf = RandomBytes(kCrcBytes);
  for (auto _ : state) benchmark::DoNotOptimize(crc32c::ExtendSse42(0, buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kCrcBytes);
}
BENCHMARK(BM_Crc32cHardware);

void BM_Crc32cPortable(benchmark::State& state) {
  std::string buf = RandomBytes(kCrcBytes);
  for (auto _ : state) benchmark::DoNotOptimize(crc32c::ExtendPortable(0, buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kCrcBytes);
}
BENCHMARK(BM_Crc32cPortable);

void BM_MemcpyPeer(benchmark::State& state) {
  std::string src = RandomBytes(kCrcBytes), dst(kCrcBytes, '\0');
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kCrcBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kCrcBytes);
}
BENCHMARK(BM_MemcpyPeer);

// ---- reading 100 kB records ------------------------------------------------------------
constexpr size_t kRecordBytes = 100 * 1000;
constexpr int kRecords = 400;  // 40 MB: fits the page cache, not the CPU caches

const std::string& RecordFile() {
  static const std::string path = [] {
    std::string p = "/tmp/strata_record_bench_" + std::to_string(::getpid()) + ".tfrecord";
    auto w = RecordWriter::Open(p);
    std::string rec = RandomBytes(kRecordBytes);
    for (int i = 0; i < kRecords; ++i) {
      rec[0] = static_cast<char>(i);
      (void)(*w)->WriteRecord(rec);
    }
    (void)(*w)->Close();
    std::atexit([] { ::unlink(RecordFile().c_str()); });
    return p;
  }();
  return path;
}

void BM_ReadRecords100kB(benchmark::State& state) {
  const std::string& path = RecordFile();
  int64_t bytes = 0;
  for (auto _ : state) {
    auto r = RecordReader::Open(path, {.compression = Compression::kNone});
    std::string_view v;
    while ((*r)->ReadRecord(&v).ok()) {
      benchmark::DoNotOptimize(v.data());
      bytes += static_cast<int64_t>(v.size());
    }
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_ReadRecords100kB)->UseRealTime();


void BM_MemcpyRecordBytesPeer(benchmark::State& state) {
  // The same byte count copied from a buffer already in memory, in 1 MiB chunks (what
  // the reader's read-ahead amounts to without the system call and the CRC).
  std::string src = RandomBytes(size_t{kRecords} * kRecordBytes), dst(1 << 20, '\0');
  for (auto _ : state) {
    for (size_t off = 0; off < src.size(); off += dst.size()) {
      size_t n = std::min(dst.size(), src.size() - off);
      std::memcpy(dst.data(), src.data() + off, n);
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(src.size()));
}
BENCHMARK(BM_MemcpyRecordBytesPeer)->UseRealTime();

void BM_PreadFilePeer(benchmark::State& state) {
  // Raw page-cache read bandwidth: pread of the file in 1 MiB blocks, no framing or CRC.
  const std::string& path = RecordFile();
  std::string buf(1 << 20, '\0');
  int64_t bytes = 0;
  for (auto _ : state) {
    int fd = ::open(path.c_str(), O_RDONLY);
    ssize_t n;
    off_t off = 0;
    while ((n = ::pread(fd, buf.data(), buf.size(), off)) > 0) {
      off += n;
      bytes += n;
    }
    ::close(fd);
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_PreadFilePeer)->UseRealTime();

// ---- parsing penguin-like Examples -----------------------------------------------------
const std::vector<std::string>& Penguins() {
  static const std::vector<std::string> recs = [] {
    std::vector<std::string> out;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(0, 1);
    const char* keys[] = {"culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"};
    for (int i = 0; i < 1024; ++i) {
      ExampleBuilder b;
      int64_t species = rng() % 3;
      int first = static_cast<int>(rng() % 5);  // feature order varies, as in the real file
      for (int k = 0; k < 5; ++k) {
        int f = (first + k) % 5;
        if (f == 4) {
          b.AddInt64s("species", {&species, 1});
        } else {
          float v = u(rng);
          b.AddFloats(keys[f], {&v, 1});
        }
      }
      out.emplace_back(b.Finish());
    }
    return out;
  }();
  return recs;
}

void BM_ParsePenguinStrata(benchmark::State& state) {
  auto parser = *ExampleParser::Create({{.key = "species", .type = FeatureKind::kInt64},
                                        {.key = "culmen_length_mm"},
                                        {.key = "culmen_depth_mm"},
                                        {.key = "flipper_length_mm"},
                                        {.key = "body_mass_g"}});
  const auto& recs = Penguins();
  ParsedExample out;
  size_t i = 0;
  for (auto _ : state) {
    if (!parser.Parse(recs[i++ & 1023], &out).ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(out.features[1].floats.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ParsePenguinStrata);

void BM_ParsePenguinProtobufPeer(benchmark::State& state) {
  const auto& recs = Penguins();
  tensorflow::Example ex;  // reused, as a tuned protobuf user would
  size_t i = 0;
  for (auto _ : state) {
    if (!ex.ParseFromString(recs[i++ & 1023])) state.SkipWithError("parse failed");
    // Read the values out, as a consumer must.
    const auto& fm = ex.features().feature();
    float sum = 0;
    for (const char* k : {"culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"})
      sum += fm.at(k).float_list().value(0);
    benchmark::DoNotOptimize(sum + static_cast<float>(fm.at("species").int64_list().value(0)));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ParsePenguinProtobufPeer);

void BM_DecodePenguinAllocating(benchmark::State& state) {
  const auto& recs = Penguins();
  Example ex;
  size_t i = 0;
  for (auto _ : state) {
    if (!DecodeExample(recs[i++ & 1023], &ex).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(ex.features.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_DecodePenguinAllocating);

}  // namespace

BENCHMARK_MAIN();
