// What the monitor's hooks cost a step, against peers in the same run:
//   - BM_Hooks_Monitor:       StepBegin + StepEnd + InputWaitBegin + InputWaitEnd (the real hooks)
//   - BM_Hooks_MutexPeer:     the same bookkeeping behind one std::mutex (the obvious design)
//   - BM_Hooks_ClockOnly:     the four clock reads alone (the floor)
// run on 1 and 2 threads (a replica per thread). And the monitor's effect on a real step:
//   - BM_Step_Matmul / BM_Step_MatmulMonitored: an f32 GEMM step of 4 x 192^3 with and
//     without the hooks around it (ratio ~1.0 is the goal).
#include <benchmark/benchmark.h>

#include <mutex>
#include <vector>

#include "strata/core/clock.h"
#include "strata/monitor/matmul_workload.h"
#include "strata/monitor/monitor.h"

namespace {

using strata::monitor::Monitor;

Monitor* MakeMonitor(int replicas) {
  auto m = Monitor::Create({.interval_seconds = 10, .replicas = replicas, .peak_gflops_per_core = 100});
  Monitor* raw = m->release();
  (void)raw->Start();
  return raw;  // lives until exit: the benchmark threads share it
}

// Function-local statics: initialised once, safely, even when both benchmark threads ask.
Monitor* SharedMonitor(int replicas) {
  static Monitor* one = MakeMonitor(1);
  static Monitor* two = MakeMonitor(2);
  return replicas == 1 ? one : two;
}

void BM_Hooks_Monitor(benchmark::State& state) {
  Monitor* m = SharedMonitor(state.threads());
  const int r = state.thread_index();
  for (auto _ : state) {
    m->InputWaitBegin(r);
    m->InputWaitEnd(r);
    m->StepBegin(r);
    m->StepEnd(r, 1e9, 32);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Hooks_Monitor)->Threads(1)->Threads(2)->UseRealTime();

// The peer: one mutex around per-replica totals, as a first design would have it.
struct MutexPeer {
  std::mutex mu;
  struct R {
    int64_t wait_begin = 0, wait_ns = 0, step_begin = 0, compute_ns = 0, steps = 0, examples = 0;
    double flops = 0;
  };
  std::vector<R> r = std::vector<R>(2);
};
MutexPeer g_peer;

void BM_Hooks_MutexPeer(benchmark::State& state) {
  const int i = state.thread_index();
  for (auto _ : state) {
    {
      std::lock_guard<std::mutex> l(g_peer.mu);
      g_peer.r[i].wait_begin = strata::NowNanos();
    }
    {
      std::lock_guard<std::mutex> l(g_peer.mu);
      g_peer.r[i].wait_ns += strata::NowNanos() - g_peer.r[i].wait_begin;
    }
    {
      std::lock_guard<std::mutex> l(g_peer.mu);
      g_peer.r[i].step_begin = strata::NowNanos();
    }
    {
      std::lock_guard<std::mutex> l(g_peer.mu);
      g_peer.r[i].compute_ns += strata::NowNanos() - g_peer.r[i].step_begin;
      g_peer.r[i].steps += 1;
      g_peer.r[i].examples += 32;
      g_peer.r[i].flops += 1e9;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Hooks_MutexPeer)->Threads(1)->Threads(2)->UseRealTime();

void BM_Hooks_ClockOnly(benchmark::State& state) {
  int64_t sink = 0;
  for (auto _ : state) {
    sink += strata::NowNanos();
    sink -= strata::NowNanos();
    sink += strata::NowNanos();
    sink -= strata::NowNanos();
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Hooks_ClockOnly)->Threads(1)->Threads(2)->UseRealTime();

struct Gemm {
  int n = 192;
  std::vector<float> a = std::vector<float>(192 * 192, 0.5f), b = std::vector<float>(192 * 192, 0.25f),
                     c = std::vector<float>(192 * 192);
  void Step() {
    for (int k = 0; k < 4; ++k) (void)strata::monitor::SingleThreadedSgemm(n, a.data(), b.data(), c.data());
  }
};

void BM_Step_Matmul(benchmark::State& state) {
  Gemm g;
  g.Step();
  for (auto _ : state) g.Step();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Step_Matmul)->UseRealTime();

void BM_Step_MatmulMonitored(benchmark::State& state) {
  Gemm g;
  g.Step();
  Monitor* m = SharedMonitor(1);
  for (auto _ : state) {
    m->InputWaitBegin(0);
    m->InputWaitEnd(0);
    m->StepBegin(0);
    g.Step();
    m->StepEnd(0, 4 * 2.0 * 192 * 192 * 192, 32);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Step_MatmulMonitored)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
