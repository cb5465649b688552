#include "strata/monitor/matmul_workload.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "strata/core/clock.h"

namespace strata::monitor {

Result<double> SingleThreadedSgemm(int n, const float* a, const float* b, float* c) {
  // Debian's oneDNN runs GEMM on OpenMP threads; a replica is one core, so each replica
  // thread asks for a team of one. omp_set_num_threads is per calling thread in libgomp.
  // It is looked up at run time because libgomp is only an indirect dependency (of libdnnl).
  thread_local bool single = [] {
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) set(1);
    return true;
  }();
  (void)single;
  if (n <= 0) return InvalidArgument("sgemm: n must be positive, got " + std::to_string(n));
  const dnnl_status_t st = dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  if (st != dnnl_success) return Internal("dnnl_sgemm failed with status " + std::to_string(static_cast<int>(st)));
  return 2.0 * n * static_cast<double>(n) * n;
}

struct MatmulWorkload::Pipeline {
  struct Stage {
    std::atomic<int64_t> elements{0}, bytes{0}, busy_ns{0}, blocked_up_ns{0}, blocked_down_ns{0};
  };
  Stage source, map, prefetch;
  std::mutex mu;
  std::condition_variable not_empty, not_full;
  std::deque<int64_t> queue;  // batch ids
  int capacity = 2;
  int parallelism = 1;
  bool stop = false;
  std::vector<std::thread> workers;

  void Worker(double cost_ms) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;
      }
      // source: an element id (8 bytes).
      const int64_t id = source.elements.fetch_add(1, std::memory_order_relaxed);
      source.bytes.fetch_add(8, std::memory_order_relaxed);
      // slow_map: the artificial cost.
      const int64_t t0 = NowNanos();
      if (cost_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(cost_ms));
      map.busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
      map.elements.fetch_add(1, std::memory_order_relaxed);
      map.bytes.fetch_add(8, std::memory_order_relaxed);
      // into the prefetch buffer, waiting for space.
      std::unique_lock<std::mutex> lock(mu);
      const int64_t w0 = NowNanos();
      not_full.wait(lock, [&] { return stop || static_cast<int>(queue.size()) < capacity; });
      map.blocked_down_ns.fetch_add(NowNanos() - w0, std::memory_order_relaxed);
      if (stop) return;
      queue.push_back(id);
      not_empty.notify_one();
    }
  }

  // The replicas' GetNext. false when stopped.
  bool Next() {
    std::unique_lock<std::mutex> lock(mu);
    const int64_t w0 = NowNanos();
    not_empty.wait(lock, [&] { return stop || !queue.empty(); });
    prefetch.blocked_up_ns.fetch_add(NowNanos() - w0, std::memory_order_relaxed);
    if (queue.empty()) return false;
    queue.pop_front();
    prefetch.elements.fetch_add(1, std::memory_order_relaxed);
    prefetch.bytes.fetch_add(8, std::memory_order_relaxed);
    not_full.notify_one();
    return true;
  }

  std::vector<StageSample> Samples() {
    auto sample = [](const Stage& s, const char* name, const char* path) {
      StageSample x;
      x.name = name;
      x.path = path;
      x.elements = s.elements.load(std::memory_order_relaxed);
      x.bytes = s.bytes.load(std::memory_order_relaxed);
      x.busy_ns = s.busy_ns.load(std::memory_order_relaxed);
      x.blocked_upstream_ns = s.blocked_up_ns.load(std::memory_order_relaxed);
      x.blocked_downstream_ns = s.blocked_down_ns.load(std::memory_order_relaxed);
      return x;
    };
    std::vector<StageSample> out = {sample(source, "source", "0.0.0"), sample(map, "slow_map", "0.0"),
                                    sample(prefetch, "prefetch", "0")};
    out[1].parallelism = parallelism;
    out[2].parallelism = 1;
    std::lock_guard<std::mutex> lock(mu);
    out[2].buffer_fill = static_cast<int64_t>(queue.size());
    out[2].buffer_capacity = capacity;
    return out;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    not_empty.notify_all();
    not_full.notify_all();
    for (auto& t : workers) t.join();
    workers.clear();
  }
};

MatmulWorkload::MatmulWorkload(MatmulWorkloadOptions options) : options_(options), pipeline_(new Pipeline) {
  pipeline_->capacity = std::max(1, options_.prefetch);
  pipeline_->parallelism = std::max(1, options_.map_parallelism);
}

MatmulWorkload::~MatmulWorkload() {
  pipeline_->Stop();
  delete pipeline_;
}

PipelineStatsSource MatmulWorkload::PipelineSource() {
  Pipeline* p = pipeline_;
  return [p] { return p->Samples(); };
}

Result<MatmulWorkloadResult> MatmulWorkload::Run(Monitor* monitor) {
  const MatmulWorkloadOptions& o = options_;
  if (o.replicas < 1 || o.n < 1 || o.n > 8192 || o.matmuls_per_step < 1 || !(o.seconds > 0) || o.map_cost_ms < 0)
    return InvalidArgument("matmul workload: replicas, n (<= 8192), matmuls per step and seconds must be positive");
  if (monitor->info().replicas != o.replicas)
    return InvalidArgument("matmul workload: the monitor has " + std::to_string(monitor->info().replicas) +
                           " replicas, the workload " + std::to_string(o.replicas));
  // Buffers per replica, allocated and first touched before the clock starts.
  const size_t nn = static_cast<size_t>(o.n) * static_cast<size_t>(o.n);
  std::vector<std::vector<float>> a(o.replicas), b(o.replicas), c(o.replicas);
  for (int r = 0; r < o.replicas; ++r) {
    a[r].assign(nn, 0.5f);
    b[r].assign(nn, 0.25f);
    c[r].assign(nn, 0.0f);
    STRATA_RETURN_IF_ERROR(SingleThreadedSgemm(o.n, a[r].data(), b[r].data(), c[r].data()).status());  // warm-up
  }
  for (int i = 0; i < pipeline_->parallelism; ++i)
    pipeline_->workers.emplace_back([this] { pipeline_->Worker(options_.map_cost_ms); });

  struct PerReplica {
    double flops = 0, wait_s = 0, gemm_s = 0;
    int64_t steps = 0;
    Status status;
  };
  std::vector<PerReplica> per(o.replicas);
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  int64_t deadline_ns = 0;
  for (int r = 0; r < o.replicas; ++r) {
    threads.emplace_back([&, r] {
      PerReplica& me = per[r];
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      // Run until the deadline the main thread set just after Start().
      while (NowNanos() < deadline_ns) {
        const int64_t w0 = NowNanos();
        monitor->InputWaitBegin(r);
        const bool got = pipeline_->Next();
        monitor->InputWaitEnd(r);
        me.wait_s += static_cast<double>(NowNanos() - w0) * 1e-9;
        if (!got) break;
        monitor->StepBegin(r);
        const int64_t g0 = NowNanos();
        double flops = 0;
        for (int k = 0; k < o.matmuls_per_step; ++k) {
          auto f = SingleThreadedSgemm(o.n, a[r].data(), b[r].data(), c[r].data());
          if (!f.ok()) {
            me.status = f.status();
            return;
          }
          flops += *f;
        }
        me.gemm_s += static_cast<double>(NowNanos() - g0) * 1e-9;
        monitor->StepEnd(r, flops, o.batch_size);
        me.flops += flops;
        me.steps += 1;
      }
    });
  }
  while (ready.load() < o.replicas) std::this_thread::yield();

  MatmulWorkloadResult result;
  Status start = monitor->Start();
  const int64_t t0 = NowNanos();
  deadline_ns = start.ok() ? t0 + static_cast<int64_t>(o.seconds * 1e9) : 0;
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  auto report = start.ok() ? monitor->Stop() : Result<InputPipelineReport>(start);
  const int64_t t1 = NowNanos();
  pipeline_->Stop();
  STRATA_RETURN_IF_ERROR(report.status());
  for (const auto& p : per) {
    STRATA_RETURN_IF_ERROR(p.status);
    result.matrix_flops += p.flops;
    result.steps += p.steps;
    result.input_wait_seconds += p.wait_s;
    result.gemm_seconds += p.gemm_s;
  }
  result.seconds = static_cast<double>(t1 - t0) * 1e-9;
  result.report = std::move(report).value();
  return result;
}

}  // namespace strata::monitor
