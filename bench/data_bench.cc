// Input pipeline benchmarks. Each compares Strata with a peer in the same run:
//   Trivial/*        framework overhead: range -> map(+1) -> batch(128) -> prefetch, elements/s,
//                    against a bare loop doing the same arithmetic and copies (BareTrivial).
//   DecodeBareLoop   one core: decode + resize + flip + saturation of in-memory 512 px JPEGs,
//                    a plain loop over image::Augmenter (the per-core rate the recipe must reach).
//   DecodeBareLoopPerCore/threads:2  the same loop on every core at once (one thread pinned
//                    to each, each its own Augmenter): what the cores give together when they
//                    share the memory system and L3, the ceiling for the N = 2 recipe.
//   FlowersRecipe/N/D/F  the flowers recipe from TFRecord files, AUTOTUNE with a CPU budget of
//                    N, deterministic D, map_and_batch fusion F (1: on, the default).
//   VariableCost/D   parallel map over elements whose cost varies 1x..20x, deterministic D.
// FlowersRecipe also reports, over the timed loop: cpu_us_per_image (process user + system),
// page_faults_per_image, switches_per_image (voluntary + involuntary context switches),
// batch_allocs (batch buffers allocated; 0 in the steady state), reader_wakeups_per_image
// (parallel interleave wake-ups) and other_cpu_share (other processes' CPU share: a run is
// quiet when it is near 0). STRATA_BENCH_STATS=1 prints the pipeline's stage table after each
// run; STRATA_BENCH_READS=N sets the recipe's num_parallel_reads (experiments).
// The synthetic files are written once to $STRATA_BENCH_DIR (default /tmp/strata_data_bench);
// bench/data_torch_peer.py reads the JPEG bytes dumped there (jpegs.bin) for the PyTorch peer.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "strata/core/clock.h"
#include "strata/data/handoff_counters.h"
#include "strata/data/sources.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/synthetic.h"
#include "strata/image/augment.h"
#include "strata/record/example_parser.h"
#include "strata/record/record_reader.h"

namespace strata::data {
namespace {

double MinorFaults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}

// Context switches of the whole process, all threads (voluntary: a thread blocked on a
// lock or condition variable; involuntary: it was preempted, e.g. by a thread it woke).
double ContextSwitches() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_nvcsw + u.ru_nivcsw);
}

// CPU seconds used by every process on the machine (/proc/stat: all but idle and iowait).
double MachineBusySeconds() {
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return 0;
  unsigned long long v[8] = {};
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                            &v[6], &v[7]);
  std::fclose(f);
  if (n < 5) return 0;
  unsigned long long busy = 0;
  for (int i = 0; i < 8; ++i)
    if (i != 3 && i != 4) busy += v[i];
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Measures what the rest of the machine did during a benchmark: other processes' CPU time
// as a share of all cores over the wall time. A run is quiet when this is near 0; on the
// shared development VM it is how a run competing with others' builds is told apart.
class OtherLoad {
 public:
  OtherLoad() : wall0_(NowSeconds()), busy0_(MachineBusySeconds()), own0_(ProcessCpuSeconds()) {}
  double share() const {
    const double wall = NowSeconds() - wall0_;
    const double other = (MachineBusySeconds() - busy0_) - (ProcessCpuSeconds() - own0_);
    return wall > 0 ? std::max(0.0, other) / (wall * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN))) : 0;
  }

 private:
  static double NowSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  double wall0_, busy0_, own0_;
};

std::string BenchDir() {
  const char* d = std::getenv("STRATA_BENCH_DIR");
  return d ? d : "/tmp/strata_data_bench";
}

// Writes the flowers files (8 x 64 images, 512 px) and jpegs.bin once.
const std::vector<std::string>& JpegBytes() {
  static std::vector<std::string> jpegs = [] {
    const std::string dir = BenchDir();
    if (!std::filesystem::exists(dir + "/flowers-07.tfrec")) {
      auto r = datasets::WriteSyntheticFlowers(dir, {.files = 8, .records_per_file = 64, .image_size = 512});
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        std::abort();
      }
    }
    std::vector<std::string> out;
    auto parser = record::ExampleParser::Create({{.key = "image", .type = record::FeatureKind::kBytes}});
    record::ParsedExample parsed;
    for (int f = 0; f < 8; ++f) {
      char name[64];
      std::snprintf(name, sizeof name, "/flowers-%02d.tfrec", f);
      auto reader = record::RecordReader::Open(dir + name);
      std::string_view rec;
      while ((*reader)->ReadRecord(&rec).ok()) {
        if (parser->Parse(rec, &parsed).ok()) out.emplace_back(parsed[0].bytes[0]);
      }
    }
    // For the PyTorch peer: u32 length + bytes per image.
    FILE* f = std::fopen((dir + "/jpegs.bin").c_str(), "wb");
    for (const auto& j : out) {
      const uint32_t n = static_cast<uint32_t>(j.size());
      std::fwrite(&n, 4, 1, f);
      std::fwrite(j.data(), 1, n, f);
    }
    std::fclose(f);
    return out;
  }();
  return jpegs;
}

image::AugmentOptions FlowersAugment() {
  image::AugmentOptions ao;
  ao.height = ao.width = 192;
  ao.flip_left_right = 0.5f;
  ao.saturation_lower = 0;
  ao.saturation_upper = 2;
  return ao;
}

void BareTrivial(benchmark::State& state) {
  // The same work with no framework: make an i64, add 1, copy into a batch of 128.
  std::vector<int64_t> batch(128);
  int64_t n = 0;
  for (auto _ : state) {
    for (int i = 0; i < 128; ++i) {
      Tensor t = Scalar<int64_t>(n++);
      batch[i] = *t.data<int64_t>() + 1;
    }
    benchmark::DoNotOptimize(batch.data());
  }
  state.SetItemsProcessed(state.iterations() * 128);
}
BENCHMARK(BareTrivial)->UseRealTime();

// Arg: map num_parallel_calls (1: in the consumer's thread).
void Trivial(benchmark::State& state) {
  const int64_t par = state.range(0);
  auto ds = Dataset::range(int64_t{1} << 40)
                .map([](Element e) -> Result<Element> {
                  *e[0].data<int64_t>() += 1;
                  return e;
                }, {.num_parallel_calls = par})
                .batch(128, {.drop_remainder = true})
                .prefetch(AUTOTUNE);
  auto it = std::move(ds.make_iterator()).value();
  Element e;
  bool end;
  for (int i = 0; i < 100; ++i) (void)it->GetNext(&e, &end);  // warm
  for (auto _ : state) {
    (void)it->GetNext(&e, &end);
    benchmark::DoNotOptimize(e.tensors.data());
  }
  state.SetItemsProcessed(state.iterations() * 128);
}
BENCHMARK(Trivial)->Arg(1)->Arg(2)->UseRealTime();

void DecodeBareLoop(benchmark::State& state) {
  const auto& jpegs = JpegBytes();
  auto aug = *image::Augmenter::Make(FlowersAugment(), 1);
  Tensor out(DType::kF32, Shape{192, 192, 3});
  uint64_t i = 0;
  const double cpu0 = ProcessCpuSeconds();
  OtherLoad other;
  for (auto _ : state) {
    Status s = aug.Run(jpegs[i % jpegs.size()], i, out.raw_data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["cpu_us_per_image"] = (ProcessCpuSeconds() - cpu0) * 1e6 / static_cast<double>(state.iterations());
  state.counters["other_cpu_share"] = other.share();
}
BENCHMARK(DecodeBareLoop)->UseRealTime()->MinTime(3);

// DecodeBareLoop on every usable core at once: thread t is pinned to the t-th CPU of the
// process's affinity mask (the mask is restored afterwards: thread 0 is the main thread).
void DecodeBareLoopPerCore(benchmark::State& state) {
  static const cpu_set_t process_mask = [] {
    cpu_set_t m;
    sched_getaffinity(0, sizeof m, &m);
    return m;
  }();
  const auto& jpegs = JpegBytes();
  cpu_set_t saved, mine;
  pthread_getaffinity_np(pthread_self(), sizeof saved, &saved);
  CPU_ZERO(&mine);
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &process_mask) && seen++ == state.thread_index()) CPU_SET(cpu, &mine);
  if (CPU_COUNT(&mine) == 1) pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
  auto aug = *image::Augmenter::Make(FlowersAugment(), 1);
  Tensor out(DType::kF32, Shape{192, 192, 3});
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 7919;  // different images per thread
  OtherLoad other;
  for (auto _ : state) {
    Status s = aug.Run(jpegs[i % jpegs.size()], i, out.raw_data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) state.counters["other_cpu_share"] = other.share();  // counters sum over threads
  pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
}
BENCHMARK(DecodeBareLoopPerCore)->Threads(2)->UseRealTime()->MinTime(3);

// Args: CPU budget, deterministic, map_and_batch fusion.
void FlowersRecipe(benchmark::State& state) {
  JpegBytes();
  datasets::FlowersOptions o;
  o.image_size = 192;
  o.batch_size = 64;
  o.seed = 1;
  o.deterministic = state.range(1) != 0;
  o.autotune.cpu_budget = static_cast<int>(state.range(0));
  if (const char* r = std::getenv("STRATA_BENCH_READS")) o.num_parallel_reads = std::atoi(r);  // experiments
  auto ds = datasets::FlowersDataset(BenchDir() + "/*.tfrec", o);
  auto it = std::move(ds->with_options({.map_and_batch_fusion = state.range(2) != 0}).make_iterator()).value();
  Element e;
  bool end;
  for (int i = 0; i < 3; ++i) (void)it->GetNext(&e, &end);  // fill the shuffle buffer, let AUTOTUNE settle
  const double cpu0 = ProcessCpuSeconds(), faults0 = MinorFaults(), switches0 = ContextSwitches();
  auto& counters = internal::Counters();
  const int64_t allocs0 = counters.batch_buffers_allocated.load(), wakeups0 = counters.interleave_worker_wakeups.load();
  OtherLoad other;
  for (auto _ : state) {
    Status s = it->GetNext(&e, &end);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  state.counters["switches_per_image"] =
      (ContextSwitches() - switches0) / static_cast<double>(state.iterations() * 64);
  // Batch buffers allocated while timed (0 in the steady state) and reader wake-ups per image.
  state.counters["batch_allocs"] = static_cast<double>(counters.batch_buffers_allocated.load() - allocs0);
  state.counters["reader_wakeups_per_image"] =
      static_cast<double>(counters.interleave_worker_wakeups.load() - wakeups0) / static_cast<double>(state.iterations() * 64);
  if (std::getenv("STRATA_BENCH_STATS")) std::fprintf(stderr, "%s\n", it->StatsTable().c_str());
  state.SetItemsProcessed(state.iterations() * 64);
  state.counters["cpu_us_per_image"] = (ProcessCpuSeconds() - cpu0) * 1e6 / static_cast<double>(state.iterations() * 64);
  state.counters["page_faults_per_image"] = (MinorFaults() - faults0) / static_cast<double>(state.iterations() * 64);
  state.counters["other_cpu_share"] = other.share();
  for (const auto& s : it->Stats())
    if (s.name == "parallel_map") state.counters["map_parallelism"] = static_cast<double>(s.parallelism);
}
BENCHMARK(FlowersRecipe)
    ->Args({1, 0, 1})
    ->Args({2, 0, 1})
    ->Args({2, 1, 1})
    ->Args({1, 0, 0})
    ->Args({2, 0, 0})
    ->UseRealTime()
    ->MinTime(8);

// Elements whose cost varies (every 8th is 20x): non-deterministic order hands out the
// cheap ones while an expensive one is still running. Arg: deterministic.
void VariableCost(benchmark::State& state) {
  auto ds = Dataset::range(int64_t{1} << 40)
                .map([](Element e) -> Result<Element> {
                  const auto us = (*e[0].data<int64_t>() % 8 == 0) ? 2000 : 100;
                  std::this_thread::sleep_for(std::chrono::microseconds(us));  // I/O-like: no CPU contention
                  return e;
                }, {.num_parallel_calls = 4})
                .batch(16)
                .prefetch(2)
                .with_options({.deterministic = state.range(0) != 0});
  auto it = std::move(ds.make_iterator()).value();
  Element e;
  bool end;
  for (auto _ : state) (void)it->GetNext(&e, &end);
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(VariableCost)->Arg(1)->Arg(0)->UseRealTime()->MinTime(2);

}  // namespace
}  // namespace strata::data

BENCHMARK_MAIN();
