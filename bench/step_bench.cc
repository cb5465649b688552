// The reference CNN training step (batch 128, one thread) compiled by Strata, against its own
// ablations in the same run: fusion off (every op its own kernel) and bf16 mixed precision.
// A step is the program (forward, loss, gradients) and the SGD update after it
// (Backend::ApplyUpdate, as keras::OptimizerState runs it); the graph is the fixture
// tests/common/reference_cnn_graph.h. `strata bench-step` times the whole keras step instead.
// Counters: images/s and utilization (counted matrix FLOPs / time / calibrated peak). The
// PyTorch comparison is bench/step_vs_torch.sh (a Python peer cannot share this process).
#include <benchmark/benchmark.h>

#include "common/reference_cnn_graph.h"
#include "strata/backend/backend.h"
#include "strata/backend/compile.h"
#include "strata/core/peak_flops.h"

namespace strata {
namespace {

void BM_ReferenceCnnStep(benchmark::State& state, backend::Precision precision, bool fuse) {
  const int64_t batch = state.range(0);
  graph::Graph g;
  auto m = testing::BuildReferenceCnn(g, {.batch = batch});
  if (!m.ok()) return state.SkipWithError(m.status().ToString().c_str());
  auto p = backend::Compile(g, {.fetches = {m->loss}, .precision = precision, .fuse = fuse});
  if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
  for (int64_t i = 0; i < batch; ++i) (*p)->input(m->labels).data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  const backend::Backend& cpu = *backend::FindBackend("cpu");
  std::vector<float> velocity;
  for (int i = 0; i < 2; ++i) {
    (void)(*p)->Run();
    testing::ApplyReferenceSgd(cpu, (*p)->variables(), 0.01f, &velocity);
  }
  for (auto _ : state) {
    Status st = (*p)->Run();
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    testing::ApplyReferenceSgd(cpu, (*p)->variables(), 0.01f, &velocity);
  }
  auto peak = CalibratedPeakFlops();
  const double peak_flops = (precision == backend::Precision::kBF16 ? peak->bf16_gflops_per_core
                                                                    : peak->f32_gflops_per_core) * 1e9;
  const double flops = static_cast<double>((*p)->matrix_flops_per_step());
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["utilization"] =
      benchmark::Counter(flops / peak_flops, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_ReferenceCnnStep, f32_fused, backend::Precision::kF32, true)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ReferenceCnnStep, f32_unfused, backend::Precision::kF32, false)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ReferenceCnnStep, bf16_fused, backend::Precision::kBF16, true)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
