// Inference speed of a Keras application: Model::predict on one synthetic batch, repeated.
// The inference half of bench/applications_vs_torch.sh (bench-step measures training).
//
//   applications_predict_bench [--model resnet50] [--image-size 224] [--batch 64] [--replicas 2]
//                              [--threads 1] [--precision f32|bf16] [--seconds 10] [--fold-batch-norm 1]
//
// predict runs the evaluation graph (batch norm with its moving statistics, no dropout) as one
// program per replica of a MirroredStrategy (--replicas, one pinned thread each, as fit's
// step), each on its share of the batch with --threads oneDNN threads; --replicas 1 runs one
// program on the calling thread. --fold-batch-norm 0 keeps batch norms after convolutions as
// their own kernels (CompileOptions::fold_batch_norm). Each call feeds the whole batch. Prints one JSON object:
// images/s, the median call, CPU time, peak RSS.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/core/clock.h"
#include "strata/core/peak_flops.h"
#include "strata/data/dataset.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/model.h"

namespace {

int Usage(const char* why) {
  std::fprintf(stderr,
               "applications_predict_bench: %s\nusage: applications_predict_bench [--model NAME] [--image-size S] "
               "[--batch B] [--replicas R] [--threads T] [--precision f32|bf16] [--seconds T] [--fold-batch-norm 1|0]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata;  // NOLINT
  std::string model = "resnet50", precision = "f32";
  long size = 224, batch = 64, replicas = 2, threads = 1, warmup = 2, fold = 1;
  double seconds = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(("flag " + a + " needs a value").c_str());
    const char* v = argv[++i];
    if (a == "--model") model = v;
    else if (a == "--image-size") size = std::atol(v);
    else if (a == "--batch") batch = std::atol(v);
    else if (a == "--threads") threads = std::atol(v);
    else if (a == "--replicas") replicas = std::atol(v);
    else if (a == "--fold-batch-norm") fold = std::atol(v);
    else if (a == "--warmup") warmup = std::atol(v);
    else if (a == "--precision") precision = v;
    else if (a == "--seconds") seconds = std::atof(v);
    else return Usage(("unknown flag " + a).c_str());
  }
  if (size < 1 || batch < 1 || replicas < 1 || threads < 1 || seconds <= 0 || (precision != "f32" && precision != "bf16"))
    return Usage("--image-size, --batch, --replicas, --threads and --seconds must be positive, --precision f32 or bf16");
  auto strategy = distribute::MirroredStrategy(static_cast<int>(replicas));
  if (!strategy.ok()) return std::fprintf(stderr, "%s\n", strategy.status().ToString().c_str()), 1;
  auto built = keras::applications::ByName(model, {.input_shape = {size, size, 3}});
  if (!built.ok()) return std::fprintf(stderr, "%s\n", built.status().ToString().c_str()), 1;
  keras::Model& m = **built;
  if (Status s = m.compile({.precision = precision == "bf16" ? "mixed_bfloat16" : "float32",
                            .threads = static_cast<int>(threads),
                            .strategy = strategy->get(),
                            .fold_batch_norm = fold != 0});
      !s.ok())
    return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  Tensor x(DType::kF32, {batch, size, size, 3});
  std::mt19937 rng(1000);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = u(rng);
  auto data = data::Dataset::from_tensor_slices(data::Element({x})).batch(batch);
  for (long w = 0; w < std::max(1L, warmup); ++w)  // the first compiles the inference program
    if (auto p = m.predict(data); !p.ok()) return std::fprintf(stderr, "%s\n", p.status().ToString().c_str()), 1;
  std::vector<double> call_ms;
  const double cpu0 = ProcessCpuSeconds();
  Stopwatch wall;
  while (call_ms.empty() || wall.ElapsedSeconds() < seconds) {
    Stopwatch sw;
    if (auto p = m.predict(data); !p.ok()) return std::fprintf(stderr, "%s\n", p.status().ToString().c_str()), 1;
    call_ms.push_back(sw.ElapsedSeconds() * 1e3);
  }
  const double elapsed = wall.ElapsedSeconds(), cpu = ProcessCpuSeconds() - cpu0;
  std::sort(call_ms.begin(), call_ms.end());
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const double images = static_cast<double>(call_ms.size() * static_cast<size_t>(batch));
  const long cores = replicas * threads;  // "per CPU-second" is scaled to the cores asked for, as the tables
  // Utilization as bench-step's: counted matrix FLOPs (replica 0's program, per row) / time /
  // (the calibrated peak per core x cores); per CPU-second, of the CPU time the process got.
  auto peak = CalibratedPeakFlops();
  if (!peak.ok()) return std::fprintf(stderr, "%s\n", peak.status().ToString().c_str()), 1;
  const double peak_per_core = (precision == "bf16" && peak->bf16_gflops_per_core > 0 ? peak->bf16_gflops_per_core
                                                                                       : peak->f32_gflops_per_core) * 1e9;
  const int64_t per_replica = (batch + replicas - 1) / replicas;
  const double flops_per_image =
      static_cast<double>(m.eval_program()->matrix_flops_per_step()) / static_cast<double>(per_replica);
  const double ips = images / elapsed, ips_cpu = cpu > 0 ? images / cpu * static_cast<double>(cores) : 0.0;
  std::printf("{\"framework\": \"strata\", \"model\": \"%s\", \"mode\": \"infer\", \"precision\": \"%s\", "
              "\"image_size\": %ld, \"batch\": %ld, \"fold_batch_norm\": %ld, \"replicas\": %ld, \"threads\": %ld, \"steps\": %zu, \"seconds\": %.3f, "
              "\"images_per_second\": %.3f, \"step_ms\": %.3f, \"cpu_seconds\": %.3f, \"images_per_cpu_second\": %.3f, "
              "\"utilization\": %.4f, \"utilization_cpu\": %.4f, \"parameters\": %lld, \"peak_rss_bytes\": %lld}\n",
              model.c_str(), precision.c_str(), size, batch, fold, replicas, threads, call_ms.size(), elapsed, ips,
              call_ms[call_ms.size() / 2], cpu, ips_cpu, ips * flops_per_image / (peak_per_core * static_cast<double>(cores)),
              ips_cpu * flops_per_image / (peak_per_core * static_cast<double>(cores)),
              static_cast<long long>(m.count_params()), static_cast<long long>(ru.ru_maxrss) * 1024);
  return 0;
}
