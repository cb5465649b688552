// Replica scaling on this host: `fit` of the reference CNN with 1 replica on 1 core against
// R replicas on R cores at the same per-replica batch (128), through the real strategy
// (reduce-scatter, sharded update, barriers). First it checks, with the peak calibration
// kernels, that the cores really run in parallel: the same FMA chains on every core at once
// against one core alone.
//
//   build/bench/scaling_bench [--steps 40] [--repeats 3]      prints one JSON object
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_flops.h"
#include "strata/data/dataset.h"
#include "strata/datasets/batch_size.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/model.h"
#include "strata/keras/spec.h"

using namespace strata;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// f32 peak GFLOP/s per core measured on `cores` cores at once (each thread pinned).
double ParallelPeak(int cores) {
  std::vector<double> per(static_cast<size_t>(cores));
  std::vector<std::thread> threads;
  const std::vector<int> cpus = UsableCpuList();
  for (int c = 0; c < cores; ++c)
    threads.emplace_back([&, c] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[static_cast<size_t>(c) % cpus.size()], &set);
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      per[static_cast<size_t>(c)] = MeasurePeakFlops().f32_gflops_per_core;
    });
  for (auto& t : threads) t.join();
  double sum = 0;
  for (double g : per) sum += g;
  return sum / cores;
}

// Images/s of `steps` training steps after a warm-up, on `replicas` replicas.
Result<double> FitImagesPerSecond(int replicas, int64_t steps) {
  STRATA_ASSIGN_OR_RETURN(auto strategy, distribute::MirroredStrategy(replicas));
  STRATA_ASSIGN_OR_RETURN(auto model, keras::LoadModelSpec("reference-cnn"));
  STRATA_RETURN_IF_ERROR(model->compile({.optimizer = keras::optimizers::SGD(0.01, {.momentum = 0.9, .nesterov = true}),
                                         .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                                         .strategy = strategy.get()}));
  const int64_t batch = datasets::GlobalBatch(128, replicas);
  Tensor x(DType::kF32, Shape({batch * 4, 28, 28, 1}));
  Tensor y(DType::kI64, Shape({batch * 4}));
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = static_cast<float>((i * 2654435761u) % 255) / 255.0f;
  for (int64_t i = 0; i < y.num_elements(); ++i) y.data<int64_t>()[i] = i % 10;
  auto ds = data::Dataset::from_tensor_slices(data::Element({x, y})).repeat().batch(batch, {.drop_remainder = true}).prefetch(2);
  STRATA_RETURN_IF_ERROR(model->fit(ds, {.epochs = 1, .steps_per_epoch = 5, .verbose = 0}).status());  // compile + warm
  Stopwatch clock;
  STRATA_RETURN_IF_ERROR(model->fit(ds, {.epochs = 2, .steps_per_epoch = steps, .verbose = 0, .initial_epoch = 1}).status());
  return static_cast<double>(steps * batch) / clock.ElapsedSeconds();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 40;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  }
  const int cores = UsableCores();
  nlohmann::json out = {{"cores", cores}, {"per_replica_batch", 128}, {"steps", steps}, {"repeats", repeats}};
  std::vector<double> one_core, all_cores;
  for (int r = 0; r < repeats; ++r) {
    one_core.push_back(ParallelPeak(1));
    all_cores.push_back(ParallelPeak(cores));
  }
  out["peak_gflops_per_core_alone"] = Median(one_core);
  out["peak_gflops_per_core_all_at_once"] = Median(all_cores);
  out["cores_run_in_parallel_ratio"] = Median(all_cores) / Median(one_core);
  std::vector<int> counts = {1};
  if (cores > 1) counts.push_back(cores);
  double base = 0;
  for (int replicas : counts) {
    std::vector<double> ips;
    for (int r = 0; r < repeats; ++r) {
      auto v = FitImagesPerSecond(replicas, steps);
      if (!v.ok()) {
        std::fprintf(stderr, "scaling_bench: %s\n", v.status().ToString().c_str());
        return 1;
      }
      ips.push_back(*v);
    }
    const double m = Median(ips);
    if (replicas == 1) base = m;
    out["images_per_second"][std::to_string(replicas)] = m;
    out["all_runs"][std::to_string(replicas)] = ips;
    if (replicas > 1) out["speedup"] = m / base;
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
