// strata bench-step: steady-state speed of the compiled training step on synthetic inputs.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/resource.h>
#include <time.h>

#include <thread>

#include "command.h"
#include "strata/backend/compile.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_flops.h"
#include "strata/core/thread_pool.h"
#include "strata/graph/reference_cnn.h"

namespace strata::cli {
namespace {

struct Replica {
  graph::Graph g;
  graph::ReferenceCnn m;
  std::unique_ptr<backend::Program> program;
  Status status;
  int64_t steps = 0;
  std::vector<double> step_ms;
  double cpu_seconds = 0;  // this replica thread's CPU time in the window
};

// CPU time of the calling thread: on a machine shared with other work, images per CPU-second
// estimates what the step does on a core of its own.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Status Prepare(Replica& r, int64_t batch, backend::Precision precision, int threads, uint64_t seed) {
  STRATA_ASSIGN_OR_RETURN(r.m, graph::BuildReferenceCnn(r.g, {.batch = batch}));
  STRATA_ASSIGN_OR_RETURN(r.program, backend::Compile(r.g, {.fetches = {r.m.loss}, .threads = threads,
                                                             .precision = precision}));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(0, 1);
  float* images = r.program->input(r.m.images).data<float>();
  for (int64_t i = 0; i < r.program->input(r.m.images).num_elements(); ++i) images[i] = u(rng);
  int32_t* labels = r.program->input(r.m.labels).data<int32_t>();
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(rng() % 10);
  *r.program->input(r.m.lr).data<float>() = 0.01f;
  return Status::OK();
}

int64_t PeakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

int RunBenchStep(const std::vector<std::string>& args) {
  std::string model = "reference-cnn", precision_name = "f32";
  int64_t batch = 128, replicas = 1, threads = 1, warmup = 3, fixed_steps = 0;
  double seconds = 10;
  bool json = false;
  FlagParser flags("bench-step", "[--model reference-cnn] [--batch B] [--replicas R] [--precision f32|bf16] "
                                 "[--seconds T] [--json]",
                   "Compiles the model's training step (forward, loss, gradients, SGD update) once per replica and\n"
                   "runs it on synthetic inputs of the model's shape, each replica on its own thread (pinned to a\n"
                   "core). Prints steady-state images/s (all replicas), median step time, matrix FLOPs per image and\n"
                   "utilization = counted matrix FLOPs / time / (calibrated peak per core x cores used).");
  flags.String("model", &model, "model spec; built in: reference-cnn (the Fashion-MNIST CNN of the benchmarks)");
  flags.Int("batch", &batch, "images per replica per step (default 128)");
  flags.Int("replicas", &replicas, "programs run side by side, one thread each (default 1)");
  flags.Int("threads", &threads, "oneDNN threads per replica (default 1)");
  flags.String("precision", &precision_name, "f32, or bf16 (mixed: bf16 conv/matmul, f32 variables and loss)");
  flags.Double("seconds", &seconds, "measured time after warm-up (default 10)");
  flags.Int("warmup", &warmup, "steps run before measuring (default 3)");
  flags.Int("steps", &fixed_steps, "run exactly this many steps per replica instead of --seconds (468: an epoch)");
  flags.Bool("json", &json, "print one JSON object");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (model != "reference-cnn") return Fail("bench-step", "unknown --model \"" + model + "\" (built in: reference-cnn)", kExitUsage);
  if (precision_name != "f32" && precision_name != "bf16")
    return Fail("bench-step", "--precision must be f32 or bf16, not \"" + precision_name + "\"", kExitUsage);
  if (batch < 1 || replicas < 1 || threads < 1 || seconds <= 0 || warmup < 0)
    return Fail("bench-step", "--batch, --replicas, --threads and --seconds must be positive", kExitUsage);
  const backend::Precision precision = precision_name == "bf16" ? backend::Precision::kBF16 : backend::Precision::kF32;
  if (precision == backend::Precision::kBF16) {
    if (Status s = backend::PrecisionSupported(precision); !s.ok())
      return Fail("bench-step", "--precision bf16: " + s.message(), kExitUsage);
    if (!HostIsa().avx512_bf16)
      std::fprintf(stderr, "strata bench-step: this CPU has no AVX512_BF16; oneDNN emulates bf16 on AVX-512\n");
  }

  auto peak = CalibratedPeakFlops();
  if (!peak.ok()) return Fail("bench-step", peak.status().ToString());
  const double peak_per_core = (precision == backend::Precision::kBF16 && peak->bf16_gflops_per_core > 0
                                    ? peak->bf16_gflops_per_core : peak->f32_gflops_per_core) * 1e9;

  std::vector<Replica> reps(static_cast<size_t>(replicas));
  ThreadPool pool({.num_threads = static_cast<int>(replicas), .pin_threads = true, .name = "strata-bench"});
  // Compile on the replica's own thread: oneDNN partitions work by that thread's OpenMP setting.
  pool.ParallelFor(replicas, [&](int64_t i) {
    reps[i].status = Prepare(reps[i], batch, precision, static_cast<int>(threads), 1000 + static_cast<uint64_t>(i));
    for (int64_t w = 0; reps[i].status.ok() && w < warmup; ++w) reps[i].status = reps[i].program->Run();
  });
  for (const Replica& r : reps)
    if (!r.status.ok()) return Fail("bench-step", r.status.ToString());

  std::atomic<bool> stop{false};
  Stopwatch wall;
  pool.ParallelFor(replicas, [&](int64_t i) {
    Replica& r = reps[i];
    const double cpu0 = ThreadCpuSeconds();
    const int64_t deadline = NowNanos() + static_cast<int64_t>(seconds * 1e9);
    while (!stop.load(std::memory_order_relaxed)) {
      Stopwatch sw;
      r.status = r.program->Run();
      if (!r.status.ok()) break;
      r.step_ms.push_back(sw.ElapsedSeconds() * 1e3);
      ++r.steps;
      if (fixed_steps > 0 ? r.steps >= fixed_steps : NowNanos() >= deadline) {
        if (fixed_steps > 0) break;
        stop.store(true);  // the first replica to finish ends the window
      }
    }
    r.cpu_seconds = ThreadCpuSeconds() - cpu0;
  });
  const double elapsed = wall.ElapsedSeconds();
  for (const Replica& r : reps)
    if (!r.status.ok()) return Fail("bench-step", r.status.ToString());

  int64_t steps = 0;
  double cpu_seconds = 0;
  std::vector<double> all_ms;
  for (const Replica& r : reps) {
    steps += r.steps;
    cpu_seconds += r.cpu_seconds;
    all_ms.insert(all_ms.end(), r.step_ms.begin(), r.step_ms.end());
  }
  std::sort(all_ms.begin(), all_ms.end());
  const double median_ms = all_ms.empty() ? 0 : all_ms[all_ms.size() / 2];
  const backend::Program& p0 = *reps[0].program;
  const double flops_per_image = static_cast<double>(p0.matrix_flops_per_step()) / static_cast<double>(batch);
  const double images = static_cast<double>(steps * batch);
  const double ips = images / elapsed;
  const double cores = static_cast<double>(replicas * threads);
  const double utilization = ips * flops_per_image / (peak_per_core * cores);
  // Per CPU-second of the replica threads (threads = 1): the figure a dedicated core would give.
  const double ips_cpu = cpu_seconds > 0 ? images / cpu_seconds * static_cast<double>(replicas) : 0;
  const double utilization_cpu = ips_cpu * flops_per_image / (peak_per_core * cores);
  if (json) {
    nlohmann::json j = {
        {"model", model},
        {"precision", precision_name},
        {"batch", batch},
        {"replicas", replicas},
        {"threads_per_replica", threads},
        {"steps", steps},
        {"seconds", elapsed},
        {"images_per_second", ips},
        {"step_ms", median_ms},
        {"flops_per_image", flops_per_image},
        {"all_flops_per_image", static_cast<double>(p0.flops_per_step()) / static_cast<double>(batch)},
        {"utilization", utilization},
        {"cpu_seconds", cpu_seconds},
        {"images_per_cpu_second", ips_cpu},
        {"utilization_cpu", utilization_cpu},
        {"peak_gflops_per_core", peak_per_core / 1e9},
        {"arena_bytes", p0.arena_bytes()},
        {"program_bytes", p0.total_bytes()},
        {"kernels", p0.kernels().size()},
        {"peak_rss_bytes", PeakRssBytes()},
    };
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("model        %s, batch %lld x %lld replica(s), %s, %lld thread(s) each\n", model.c_str(),
              static_cast<long long>(batch), static_cast<long long>(replicas), precision_name.c_str(),
              static_cast<long long>(threads));
  std::printf("images/s     %.1f (%lld steps in %.2f s)\n", ips, static_cast<long long>(steps), elapsed);
  std::printf("step         %.2f ms median\n", median_ms);
  std::printf("per CPU-s    %.1f images/s of replica-thread CPU time (%.1f %% utilization)\n", ips_cpu,
              utilization_cpu * 100);
  std::printf("FLOPs/image  %.1f M matrix (conv + matmul), %.1f M all\n", flops_per_image / 1e6,
              static_cast<double>(p0.flops_per_step()) / static_cast<double>(batch) / 1e6);
  std::printf("utilization  %.1f %% of %.1f GFLOP/s x %.0f core(s)\n", utilization * 100, peak_per_core / 1e9, cores);
  std::printf("memory       %.1f MiB arena, %.1f MiB program, %zu kernels, %.1f MiB peak RSS\n",
              static_cast<double>(p0.arena_bytes()) / (1 << 20), static_cast<double>(p0.total_bytes()) / (1 << 20),
              p0.kernels().size(), static_cast<double>(PeakRssBytes()) / (1 << 20));
  return kExitOk;
}

const Registrar kBenchStep({"bench-step", "steady-state speed of the compiled training step (images/s, utilization)",
                            RunBenchStep});

}  // namespace
}  // namespace strata::cli
