// strata bench-step: steady-state speed of the training step fit() runs, on synthetic inputs.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/resource.h>

#include "command.h"
#include "model_io.h"
#include "strata/backend/compile.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_flops.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/model.h"

namespace strata::cli {
namespace {

int64_t PeakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

int RunBenchStep(const std::vector<std::string>& args) {
  std::string model = "reference-cnn", precision_name = "f32";
  int64_t batch = 128, replicas = 1, threads = 1, warmup = 3, fixed_steps = 0, image_size = 0;
  double seconds = 10;
  bool json = false;
  FlagParser flags("bench-step", "[--model SPEC|APPLICATION] [--image-size S] [--batch B] [--replicas R] "
                                 "[--precision f32|bf16] [--seconds T] [--json]",
                   "Builds the model from its spec and runs the training step fit() runs (feed, forward, loss,\n"
                   "gradients, the all-reduce between replicas, the sharded SGD update) on a synthetic batch of the\n"
                   "model's input shape, each replica on its own thread (pinned to a core). Prints steady-state\n"
                   "images/s (all replicas), median step time, matrix FLOPs per image and utilization = counted\n"
                   "matrix FLOPs / time / (calibrated peak per core x cores used).");
  flags.String("model", &model, "a model spec file, or a built-in: reference-cnn (the Fashion-MNIST CNN of the "
                                "benchmarks, default), flowers-cnn, ...; or a Keras application: " +
                                    keras::applications::NameList() + " (1000 classes, as Keras builds it)");
  flags.Int("image-size", &image_size,
            "SxS images: the model is built for them (default: the spec's own size; an application's Keras default, 224 "
            "or 299 for xception)");
  flags.Int("batch", &batch, "images per replica per step (default 128)");
  flags.Int("replicas", &replicas, "replicas of a MirroredStrategy, one thread each (default 1)");
  flags.Int("threads", &threads, "oneDNN threads per replica (default 1)");
  flags.String("precision", &precision_name, "f32, or bf16 (mixed: bf16 conv/matmul, f32 variables and loss)");
  flags.Double("seconds", &seconds, "measured time after warm-up (default 10)");
  flags.Int("warmup", &warmup, "steps run before measuring (default 3; at least 1: the first compiles)");
  flags.Int("steps", &fixed_steps, "run exactly this many steps instead of --seconds (468: an epoch)");
  flags.Bool("json", &json, "print one JSON object");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (precision_name != "f32" && precision_name != "bf16")
    return Fail("bench-step", "--precision must be f32 or bf16, not \"" + precision_name + "\"", kExitUsage);
  if (batch < 1 || replicas < 1 || threads < 1 || seconds <= 0 || warmup < 0 || image_size < 0)
    return Fail("bench-step", "--batch, --replicas, --threads, --seconds and --image-size must be positive", kExitUsage);
  // The replicas of a MirroredStrategy (declared first: it outlives the model that points to it),
  // and the model as every command selects it: an application built for --image-size (refused
  // below its minimum), a spec resized when --image-size is given.
  auto strategy = distribute::MirroredStrategy(static_cast<int>(replicas));
  if (!strategy.ok()) return Fail("bench-step", strategy.status().ToString());
  train::ModelInfo info;
  auto loaded = train::SelectModel({.model = model, .image_size = image_size, .resize_spec_file = true}, &info);
  if (!loaded.ok()) return Fail("bench-step", loaded.status().ToString(), kExitUsage);
  const backend::Precision precision = precision_name == "bf16" ? backend::Precision::kBF16 : backend::Precision::kF32;
  if (precision == backend::Precision::kBF16) {
    if (Status s = backend::PrecisionSupported(precision); !s.ok())
      return Fail("bench-step", "--precision bf16: " + s.message(), kExitUsage);
    if (!HostIsa().avx512_bf16)
      std::fprintf(stderr, "strata bench-step: this CPU has no AVX512_BF16; oneDNN emulates bf16 on AVX-512\n");
  }

  auto peak = CalibratedPeakFlops();
  if (!peak.ok()) return Fail("bench-step", peak.status().ToString());
  // The unit whose peak the utilization divides by (bf16 emulated on plain AVX-512: the f32 one).
  const DType unit = precision == backend::Precision::kBF16 && peak->bf16_gflops_per_core > 0 ? DType::kBF16 : DType::kF32;
  double peak_per_core = (unit == DType::kBF16 ? peak->bf16_gflops_per_core : peak->f32_gflops_per_core) * 1e9;

  // Compiled as `strata train` compiles it: SGD with Nesterov momentum, sparse cross-entropy.
  keras::Model& m = **loaded;
  keras::CompileOptions compile = train::ClassifierCompileOptions(
      m, {.optimizer = keras::optimizers::SGD(0.01, {.momentum = 0.9, .nesterov = true}),
          .precision = precision == backend::Precision::kBF16 ? "bf16" : "f32"});
  compile.threads = static_cast<int>(threads);
  compile.strategy = strategy->get();
  Status st = m.compile(std::move(compile));
  if (!st.ok()) return Fail("bench-step", st.ToString());
  // A global batch of uniform images of the model's input shape, random class labels.
  const int64_t global_batch = batch * replicas;
  std::vector<Tensor> x;
  Tensor y;
  auto in_shape = m.input_shape(0);
  auto out_shape = m.output_shape(0);
  if (!in_shape.ok() || !out_shape.ok())
    return Fail("bench-step", (in_shape.ok() ? out_shape.status() : in_shape.status()).ToString());
  std::vector<int64_t> dims = {global_batch};
  for (int64_t d : in_shape->dims()) dims.push_back(d);
  Tensor pixels(DType::kF32, Shape(dims));
  std::mt19937 rng(1000);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < pixels.num_elements(); ++i) pixels.data<float>()[i] = u(rng);
  x.push_back(std::move(pixels));
  const int64_t classes = out_shape->num_elements();
  y = Tensor(DType::kI32, {global_batch});
  for (int64_t i = 0; i < global_batch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng() % classes);

  for (int64_t w = 0; w < std::max<int64_t>(1, warmup); ++w)
    if (auto r = m.train_on_batch(x, y); !r.ok()) return Fail("bench-step", r.status().ToString());

  std::vector<double> step_ms;
  int64_t global_steps = 0;
  const double cpu0 = ProcessCpuSeconds();
  Stopwatch wall;
  const int64_t deadline = NowNanos() + static_cast<int64_t>(seconds * 1e9);
  while (fixed_steps > 0 ? global_steps < fixed_steps : NowNanos() < deadline) {
    Stopwatch sw;
    if (auto r = m.train_on_batch(x, y); !r.ok()) return Fail("bench-step", r.status().ToString());
    step_ms.push_back(sw.ElapsedSeconds() * 1e3);
    ++global_steps;
  }
  const double elapsed = wall.ElapsedSeconds();
  const double cpu_seconds = ProcessCpuSeconds() - cpu0;

  const int64_t steps = global_steps * replicas;  // replica steps, as each replica runs one per step
  std::sort(step_ms.begin(), step_ms.end());
  const double median_ms = step_ms.empty() ? 0 : step_ms[step_ms.size() / 2];
  const backend::Program& p0 = *m.train_program();
  const double flops_per_image = static_cast<double>(p0.matrix_flops_per_step()) / static_cast<double>(batch);
  const double images = static_cast<double>(global_steps * global_batch);
  const double ips = images / elapsed;
  const double cores = static_cast<double>(replicas * threads);
  // A peak is an upper bound: a run whose kernels executed more per core than the cached peak
  // proves it low, and it is corrected (core/peak_flops.h), never the figure clamped.
  const double executed_per_image = static_cast<double>(p0.executed_matrix_flops_per_step()) / static_cast<double>(batch);
  std::string peak_correction;
  bool doubt_settled = false;
  auto c = CheckPeak(unit, peak_per_core * 1e-9,
                     {.executed_gflops = ips * executed_per_image / cores * 1e-9,
                      .counted_gflops = ips * flops_per_image / cores * 1e-9},
                     &doubt_settled);
  if (!c.ok()) return Fail("bench-step", c.status().ToString());
  if (c->has_value()) {
    peak_correction = (*c)->line;
    peak_per_core = (*c)->gflops * 1e9;
    std::fprintf(stderr, "strata bench-step: %s\n", peak_correction.c_str());
  }
  const double utilization = ips * flops_per_image / (peak_per_core * cores);
  // Per CPU-second of the replica threads (threads = 1): the figure dedicated cores would give.
  const double ips_cpu = cpu_seconds > 0 ? images / cpu_seconds * cores : 0;
  const double utilization_cpu = ips_cpu * flops_per_image / (peak_per_core * cores);
  if (json) {
    nlohmann::json j = {
        {"model", model},
        {"image_size", (*in_shape)[0]},
        {"precision", precision_name},
        {"batch", batch},
        {"replicas", replicas},
        {"threads_per_replica", threads},
        {"warmup_steps", std::max<int64_t>(1, warmup)},  // run before measuring, not counted
        {"steps", steps},  // replica steps
        {"global_steps", global_steps},
        {"global_batch", global_batch},
        {"seconds", elapsed},
        {"images_per_second", ips},
        {"step_ms", median_ms},
        {"flops_per_image", flops_per_image},
        {"executed_flops_per_image", executed_per_image},
        {"all_flops_per_image", static_cast<double>(p0.flops_per_step()) / static_cast<double>(batch)},
        {"utilization", utilization},
        {"cpu_seconds", cpu_seconds},
        {"images_per_cpu_second", ips_cpu},
        {"utilization_cpu", utilization_cpu},
        {"peak_gflops_per_core", peak_per_core / 1e9},
        {"peak_correction", peak_correction},
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
  std::printf("FLOPs/image  %.1f M matrix (conv + matmul; %.1f M executed), %.1f M all\n", flops_per_image / 1e6,
              executed_per_image / 1e6, static_cast<double>(p0.flops_per_step()) / static_cast<double>(batch) / 1e6);
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
