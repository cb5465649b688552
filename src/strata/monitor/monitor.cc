#include "strata/monitor/monitor.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "strata/core/clock.h"
#include "strata/core/log.h"
#include "strata/core/peak_flops.h"
#include "strata/monitor/trace_writer.h"

namespace strata::monitor {

namespace internal {

// Per-replica counters. One writer (the replica's thread), one reader (the monitor
// thread). The writer brackets every update with a sequence counter (odd while writing),
// so the reader gets a consistent copy of all fields without a lock (a seqlock).
struct alignas(64) ReplicaSlot {
  std::atomic<uint64_t> seq{0};
  std::atomic<int64_t> step_begin_ns{0};  // 0 = not in a step
  std::atomic<int64_t> wait_begin_ns{0};  // 0 = not waiting
  std::atomic<int64_t> wait_ns{0};        // completed input waits, summed
  std::atomic<int64_t> compute_ns{0};     // completed steps' StepBegin..StepEnd, summed
  std::atomic<int64_t> steps{0};
  std::atomic<int64_t> examples{0};
  std::atomic<double> flops{0};
  std::atomic<double> executed{0};          // what the kernels executed of flops (Winograd: fewer)
  std::atomic<double> last_step_flops{0};   // the previous step's FLOPs and length: the
  std::atomic<double> last_step_executed{0};  // estimate for a step in progress at a window
  std::atomic<int64_t> last_step_ns{0};       // close

  void BeginWrite() {
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void EndWrite() { seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Single writer: a load and a store, no read-modify-write needed.
  static void Add(std::atomic<int64_t>& a, int64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
};

// Cumulative counters of one replica at one instant, an input wait in progress included.
struct ReplicaMark {
  int64_t wait_ns = 0, compute_ns = 0, steps = 0, examples = 0;
  double flops = 0, executed = 0;
  double last_step_executed = 0;  // the uncertainty of a step-in-progress credit
};

// Single-producer single-consumer ring of trace events (replica thread -> monitor thread).
struct TraceRing {
  explicit TraceRing(int capacity_pow2)
      : events(static_cast<size_t>(capacity_pow2)), mask(static_cast<uint64_t>(capacity_pow2) - 1) {}
  std::vector<TraceEvent> events;
  const uint64_t mask;
  alignas(64) std::atomic<uint64_t> head{0};  // written by the producer
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the consumer
  std::atomic<int64_t> dropped{0};

  void Push(const TraceEvent& e) noexcept {
    const uint64_t h = head.load(std::memory_order_relaxed);
    if (h - tail.load(std::memory_order_acquire) > mask) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    events[h & mask] = e;
    head.store(h + 1, std::memory_order_release);
  }
};

}  // namespace internal

using internal::ReplicaMark;
using internal::ReplicaSlot;
using internal::TraceRing;

namespace {

int RoundUpPow2(int v) {
  int p = 1;
  while (p < v && p < (1 << 24)) p <<= 1;
  return p;
}

}  // namespace

Monitor::Monitor(MonitorOptions options) : options_(std::move(options)) {}

Monitor::~Monitor() {
  if (started_ && !stopped_) (void)Stop();
}

Result<std::unique_ptr<Monitor>> Monitor::Create(MonitorOptions options) {
  if (!(options.interval_seconds > 0) || options.interval_seconds > 86400)
    return InvalidArgument("monitor: interval must be in (0, 86400] seconds, got " +
                           std::to_string(options.interval_seconds));
  if (options.replicas < 1 || options.replicas > 65536)
    return InvalidArgument("monitor: replicas must be in [1, 65536], got " + std::to_string(options.replicas));
  if (options.peak_gflops_per_core < 0 || !std::isfinite(options.peak_gflops_per_core))
    return InvalidArgument("monitor: peak GFLOP/s per core must be >= 0");
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    return InvalidArgument("monitor: the step dtype must be f32 or bf16, got " + std::string(DTypeName(options.dtype)));
  if (options.trace_ring_events < 16) options.trace_ring_events = 16;
  if (!(options.trace_sample_seconds > 0)) options.trace_sample_seconds = 0.25;
  if (options.history_windows < 1) options.history_windows = 1;

  double peak = options.peak_gflops_per_core;
  if (peak == 0) {
    STRATA_ASSIGN_OR_RETURN(PeakFlops p, CalibratedPeakFlops());
    peak = options.dtype == DType::kBF16 ? p.bf16_gflops_per_core : p.f32_gflops_per_core;
    if (peak <= 0 && options.dtype == DType::kBF16)
      return InvalidArgument("monitor: the step is bf16 but this CPU has no bf16 peak (no AVX512_BF16)");
    if (peak <= 0) return Internal("monitor: peak FLOP/s calibration returned 0");
  }
  std::unique_ptr<Monitor> m(new Monitor(std::move(options)));
  const MonitorOptions& o = m->options_;
  m->peak_gflops_ = peak;
  m->correct_peak_ = o.peak_gflops_per_core == 0;
  m->info_.replicas = o.replicas;
  m->info_.interval_seconds = o.interval_seconds;
  m->info_.dtype = std::string(DTypeName(o.dtype));
  m->info_.peak_gflops_per_core = peak;
  m->info_.example_unit = o.example_unit;
  m->info_.initial_step = o.initial_step;
  m->info_.worker = o.worker;
  m->slots_ = std::make_unique<ReplicaSlot[]>(static_cast<size_t>(o.replicas));
  m->marks_.resize(static_cast<size_t>(o.replicas));
  return m;
}

void Monitor::AddReporter(std::unique_ptr<Reporter> reporter) {
  if (reporter) reporters_.push_back(std::move(reporter));
}

Status Monitor::EnableTrace(const std::string& path) {
  if (started_) return InvalidArgument("monitor: EnableTrace must come before Start()");
  STRATA_ASSIGN_OR_RETURN(trace_, TraceWriter::Open(path));
  const int cap = RoundUpPow2(options_.trace_ring_events);
  rings_.clear();
  // One per replica, then the communication timeline's (fit's thread).
  for (int r = 0; r <= options_.replicas; ++r) rings_.push_back(std::make_unique<TraceRing>(cap));
  return Status::OK();
}

Status Monitor::Start() {
  if (started_) return InvalidArgument("monitor: Start() called twice");
  started_ = true;
  info_.start_wall_time = WallSeconds();
  for (auto& rep : reporters_) {
    Status st = rep->OnStart(info_);
    if (!st.ok()) NoteError(st);
  }
  if (trace_) {
    Status st = trace_->Begin(info_);
    if (!st.ok()) NoteError(st);
  }
  start_ns_ = NowNanos();
  if (options_.clock_sync_ns != 0) {
    info_.trace_start_ns = start_ns_ + options_.clock_offset_ns;
    info_.clock_sync_ns = options_.clock_sync_ns + options_.clock_offset_ns;
    if (trace_) {
      Status st = trace_->AddClock(info_);
      if (!st.ok()) NoteError(st);
    }
  }
  window_start_ns_ = start_ns_;
  totals_.replicas = options_.replicas;
  totals_.peak_flops_per_replica_second = peak_gflops_ * 1e9;
  if (options_.pipeline) stage_marks_ = options_.pipeline();
  running_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

// ---- hooks ------------------------------------------------------------------------------

void Monitor::StepBegin(int replica) noexcept {
  if (!running_.load(std::memory_order_relaxed) || replica < 0 || replica >= options_.replicas) return;
  ReplicaSlot& s = slots_[replica];
  s.BeginWrite();
  s.step_begin_ns.store(NowNanos(), std::memory_order_relaxed);
  s.EndWrite();
}

void Monitor::StepEnd(int replica, double matrix_flops, int64_t examples, double executed_flops) noexcept {
  if (!running_.load(std::memory_order_relaxed) || replica < 0 || replica >= options_.replicas) return;
  ReplicaSlot& s = slots_[replica];
  const int64_t now = NowNanos();
  const int64_t begin = s.step_begin_ns.load(std::memory_order_relaxed);
  if (!(matrix_flops >= 0) || !std::isfinite(matrix_flops)) matrix_flops = 0;
  if (!(executed_flops >= 0) || !std::isfinite(executed_flops)) executed_flops = 0;
  if (examples < 0) examples = 0;
  s.BeginWrite();
  if (begin != 0) {
    ReplicaSlot::Add(s.compute_ns, now - begin);
    s.last_step_ns.store(now - begin, std::memory_order_relaxed);
    s.last_step_flops.store(matrix_flops, std::memory_order_relaxed);
    s.last_step_executed.store(executed_flops, std::memory_order_relaxed);
  }
  s.step_begin_ns.store(0, std::memory_order_relaxed);
  ReplicaSlot::Add(s.steps, 1);
  ReplicaSlot::Add(s.examples, examples);
  s.flops.store(s.flops.load(std::memory_order_relaxed) + matrix_flops, std::memory_order_relaxed);
  s.executed.store(s.executed.load(std::memory_order_relaxed) + executed_flops, std::memory_order_relaxed);
  s.EndWrite();
  if (!rings_.empty() && begin != 0)
    rings_[replica]->Push({TraceEvent::kStep, replica, begin, now, matrix_flops, examples});
}

void Monitor::InputWaitBegin(int replica) noexcept {
  if (!running_.load(std::memory_order_relaxed) || replica < 0 || replica >= options_.replicas) return;
  ReplicaSlot& s = slots_[replica];
  s.BeginWrite();
  s.wait_begin_ns.store(NowNanos(), std::memory_order_relaxed);
  s.EndWrite();
}

void Monitor::InputWaitEnd(int replica) noexcept {
  if (!running_.load(std::memory_order_relaxed) || replica < 0 || replica >= options_.replicas) return;
  ReplicaSlot& s = slots_[replica];
  const int64_t begin = s.wait_begin_ns.load(std::memory_order_relaxed);
  if (begin == 0) return;
  const int64_t now = NowNanos();
  s.BeginWrite();
  ReplicaSlot::Add(s.wait_ns, now - begin);
  s.wait_begin_ns.store(0, std::memory_order_relaxed);
  s.EndWrite();
  if (!rings_.empty()) rings_[replica]->Push({TraceEvent::kInputWait, replica, begin, now, 0, 0});
}

void Monitor::AllReduceBucket(int index, int64_t bytes, int64_t ready_ns, int64_t start_ns, int64_t finish_ns) noexcept {
  if (!running_.load(std::memory_order_relaxed) || rings_.empty()) return;
  rings_.back()->Push({TraceEvent::kBucket, index, start_ns, finish_ns, 0, 0, ready_ns, bytes});
}

void Monitor::AllReduceWait(int64_t begin_ns, int64_t end_ns) noexcept {
  if (!running_.load(std::memory_order_relaxed) || rings_.empty()) return;
  rings_.back()->Push({TraceEvent::kAllReduceWait, 0, begin_ns, end_ns, 0, 0, 0, 0});
}

// ---- the monitor thread -------------------------------------------------------------------

namespace {

// A consistent copy of a slot's cumulative counters as of `now_ns`. An input wait in
// progress counts up to `now_ns` (a replica starved for a whole window reads 100 % idle,
// not 0 %). Waits that began before the monitor started count from its start.
ReplicaMark Snapshot(const ReplicaSlot& s, int64_t now_ns, int64_t start_ns) {
  ReplicaMark m;
  for (;;) {
    const uint64_t s1 = s.seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      std::this_thread::yield();
      continue;
    }
    const int64_t wait_begin = s.wait_begin_ns.load(std::memory_order_relaxed);
    const int64_t step_begin = s.step_begin_ns.load(std::memory_order_relaxed);
    const double last_flops = s.last_step_flops.load(std::memory_order_relaxed);
    const double last_executed = s.last_step_executed.load(std::memory_order_relaxed);
    const int64_t last_ns = s.last_step_ns.load(std::memory_order_relaxed);
    m.wait_ns = s.wait_ns.load(std::memory_order_relaxed);
    m.compute_ns = s.compute_ns.load(std::memory_order_relaxed);
    m.steps = s.steps.load(std::memory_order_relaxed);
    m.examples = s.examples.load(std::memory_order_relaxed);
    m.flops = s.flops.load(std::memory_order_relaxed);
    m.executed = s.executed.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != s1) continue;
    if (wait_begin != 0 && now_ns > wait_begin) m.wait_ns += now_ns - std::max(wait_begin, start_ns);
    // A step in progress is credited the share of its FLOPs already done, estimated from
    // the previous step (a compiled step does the same work every time). The credit is
    // part of the cumulative mark, so it only moves FLOPs between adjacent windows: their
    // sum is exact. Without it a step that straddles a window close would count wholly in
    // the next window, and short windows would read spikes.
    m.last_step_executed = last_executed;
    if (step_begin != 0 && last_ns > 0 && now_ns > step_begin) {
      const double done = std::min(1.0, static_cast<double>(now_ns - step_begin) / static_cast<double>(last_ns));
      m.flops += last_flops * done;
      m.executed += last_executed * done;
    }
    return m;
  }
}

// Utilization % of the window and of each replica against `peak_gflops` per core.
void SetUtilization(Window* w, double peak_gflops) {
  const double peak_per_replica = peak_gflops * 1e9 * w->seconds;
  w->peak_gflops_per_core = peak_gflops;
  w->peak_flops = peak_per_replica * static_cast<double>(w->replicas.size());
  for (ReplicaWindow& rw : w->replicas)
    rw.utilization_pct = peak_per_replica > 0 ? 100.0 * rw.matrix_flops / peak_per_replica : 0;
  w->utilization_pct = w->peak_flops > 0 ? 100.0 * w->matrix_flops / w->peak_flops : 0;
}

StageWindow StageDelta(const StageSample& now, const StageSample* before, double seconds) {
  StageWindow w;
  w.name = now.name;
  w.path = now.path;
  StageSample zero;
  const StageSample& b = before ? *before : zero;
  // A counter that went backwards means the stage was replaced: count from zero.
  auto d = [](int64_t a, int64_t c) { return a >= c ? a - c : a; };
  const double ns = seconds * 1e9;
  if (seconds > 0) {
    w.elements_per_s = static_cast<double>(d(now.elements, b.elements)) / seconds;
    w.mb_per_s = static_cast<double>(d(now.bytes, b.bytes)) / seconds / 1e6;
    w.busy_pct = 100.0 * static_cast<double>(d(now.busy_ns, b.busy_ns)) / ns;
    w.blocked_upstream_pct = 100.0 * static_cast<double>(d(now.blocked_upstream_ns, b.blocked_upstream_ns)) / ns;
    w.blocked_downstream_pct =
        100.0 * static_cast<double>(d(now.blocked_downstream_ns, b.blocked_downstream_ns)) / ns;
  }
  w.buffer_fill = now.buffer_fill;
  w.buffer_capacity = now.buffer_capacity;
  w.parallelism = now.parallelism;
  w.elements = now.elements;
  return w;
}

}  // namespace

Window Monitor::CloseWindow(int64_t now_ns, bool final) {
  Window w;
  w.index = window_index_++;
  w.final = final;
  w.start_seconds = static_cast<double>(window_start_ns_ - start_ns_) * 1e-9;
  const int64_t window_ns = std::max<int64_t>(now_ns - window_start_ns_, 1);
  w.seconds = static_cast<double>(window_ns) * 1e-9;
  w.wall_time = info_.start_wall_time + static_cast<double>(now_ns - start_ns_) * 1e-9;
  const int R = options_.replicas;
  w.replicas.resize(static_cast<size_t>(R));
  std::vector<double> noise(static_cast<size_t>(R));
  double wait_sum = 0, compute_sum = 0;
  int64_t steps_sum = 0, max_steps = 0, examples_sum = 0;
  double step_ms_sum = 0;
  int stepping = 0;
  for (int r = 0; r < R; ++r) {
    ReplicaMark now = Snapshot(slots_[r], now_ns, start_ns_);
    ReplicaMark& before = marks_[static_cast<size_t>(r)];
    ReplicaWindow& rw = w.replicas[static_cast<size_t>(r)];
    const double wait = static_cast<double>(now.wait_ns - before.wait_ns);
    const double compute = static_cast<double>(now.compute_ns - before.compute_ns);
    rw.steps = now.steps - before.steps;
    const int64_t ex = now.examples - before.examples;
    rw.matrix_flops = now.flops - before.flops;
    rw.executed_flops = now.executed - before.executed;
    // The credits for the steps in progress at the window's two ends are estimates, each off
    // by at most one step's FLOPs; beyond them, 5 % for the clock and the step-to-step spread.
    noise[static_cast<size_t>(r)] =
        0.05 + (rw.executed_flops > 0 ? (before.last_step_executed + now.last_step_executed) / rw.executed_flops : 0);
    rw.idle_pct = std::clamp(100.0 * wait / static_cast<double>(window_ns), 0.0, 100.0);
    rw.examples_per_s = static_cast<double>(ex) / w.seconds;
    if (rw.steps > 0) {
      rw.step_ms = w.seconds * 1e3 / static_cast<double>(rw.steps);
      rw.compute_ms = compute * 1e-6 / static_cast<double>(rw.steps);
      step_ms_sum += rw.step_ms;
      ++stepping;
    }
    wait_sum += wait;
    compute_sum += compute;
    steps_sum += rw.steps;
    max_steps = std::max(max_steps, now.steps);
    examples_sum += ex;
    w.matrix_flops += rw.matrix_flops;
    w.executed_flops += rw.executed_flops;
    w.examples_per_s += rw.examples_per_s;
    before = now;
  }
  SetUtilization(&w, peak_gflops_);
  w.idle_pct = std::clamp(100.0 * wait_sum / (static_cast<double>(window_ns) * R), 0.0, 100.0);
  if (stepping > 0) {
    w.step_ms = step_ms_sum / stepping;
    w.compute_ms = steps_sum > 0 ? compute_sum * 1e-6 / static_cast<double>(steps_sum) : 0;
  }
  w.step = options_.initial_step + max_steps;

  if (options_.pipeline) {
    std::vector<StageSample> now = options_.pipeline();
    std::map<std::pair<std::string, std::string>, const StageSample*> before;
    for (const auto& s : stage_marks_) before[{s.path, s.name}] = &s;
    for (const auto& s : now) {
      auto it = before.find({s.path, s.name});
      w.stages.push_back(StageDelta(s, it == before.end() ? nullptr : it->second, w.seconds));
    }
    stage_marks_ = std::move(now);
  }

  CheckPeak(&w, noise);

  totals_.seconds += w.seconds;
  totals_.wait_ns += wait_sum;
  totals_.matrix_flops += w.matrix_flops;
  totals_.steps = max_steps;
  totals_.examples += examples_sum;
  totals_.compute_ns += compute_sum;
  totals_.replica_steps += steps_sum;
  window_start_ns_ = now_ns;
  return w;
}

void Monitor::CheckPeak(Window* w, const std::vector<double>& noise) {
  if (!correct_peak_ || !(w->seconds > 0)) return;
  RunRates rates;  // the fastest replica's (a replica is a core)
  rates.noise = 0.05;
  for (size_t r = 0; r < w->replicas.size(); ++r) {
    rates.executed_gflops = std::max(rates.executed_gflops, w->replicas[r].executed_flops / w->seconds * 1e-9);
    rates.counted_gflops = std::max(rates.counted_gflops, w->replicas[r].matrix_flops / w->seconds * 1e-9);
    rates.noise = std::max(rates.noise, noise[r]);
  }
  auto c = strata::CheckPeak(options_.dtype, peak_gflops_, rates, &peak_doubt_settled_);
  if (!c.ok()) {  // no unit to measure: say so once and keep the figure
    correct_peak_ = false;
    w->peak_correction = "peak not corrected: " + c.status().ToString();
    totals_.peak_corrections.push_back(w->peak_correction);
    return;
  }
  if (!c->has_value()) return;
  peak_gflops_ = (*c)->gflops;
  totals_.peak_flops_per_replica_second = peak_gflops_ * 1e9;
  totals_.peak_corrections.push_back((*c)->line);
  w->peak_correction = (*c)->line;
  SetUtilization(w, peak_gflops_);
}

void Monitor::DrainTrace(int64_t now_ns) {
  if (!trace_) return;
  for (auto& ring : rings_) {
    uint64_t tail = ring->tail.load(std::memory_order_relaxed);
    const uint64_t head = ring->head.load(std::memory_order_acquire);
    for (; tail != head; ++tail) {
      Status st = trace_->Add(ring->events[tail & ring->mask], start_ns_);
      if (!st.ok()) NoteError(st);
    }
    ring->tail.store(tail, std::memory_order_release);
  }
  if (options_.pipeline) {
    Status st = trace_->AddStageCounters(options_.pipeline(), now_ns, start_ns_);
    if (!st.ok()) NoteError(st);
  }
}

void Monitor::Publish(const Window& w) {
  for (auto& rep : reporters_) {
    Status st = rep->OnWindow(w);
    if (!st.ok()) NoteError(st);
  }
  if (trace_) {
    Status st = trace_->AddWindow(w, start_ns_);
    if (!st.ok()) NoteError(st);
  }
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = w;
  history_.push_back(w);
  if (history_.size() > static_cast<size_t>(options_.history_windows)) history_.erase(history_.begin());
}

void Monitor::NoteError(const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) {
    STRATA_LOG(kWarn) << "monitor: " << st.ToString();
    error_ = st;
  }
}

void Monitor::Pause() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pause_requested_ = true;
  }
  cv_.notify_all();
}

void Monitor::Resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pause_requested_ = false;
  }
  cv_.notify_all();
}

void Monitor::Loop() {
  const int64_t interval_ns = static_cast<int64_t>(options_.interval_seconds * 1e9);
  const int64_t sample_ns = trace_ ? std::min<int64_t>(interval_ns, static_cast<int64_t>(options_.trace_sample_seconds * 1e9))
                                   : interval_ns;
  int64_t next_window = start_ns_ + interval_ns;
  int64_t next_sample = start_ns_ + sample_ns;
  bool paused = false;
  for (;;) {
    const int64_t wake = std::min(next_window, next_sample);
    bool pause_now = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (paused) {
        cv_.wait(lock, [this] { return stop_requested_ || !pause_requested_; });
      } else {
        const auto deadline = MonoClock::time_point(std::chrono::nanoseconds(wake));
        cv_.wait_until(lock, deadline, [this] { return stop_requested_ || pause_requested_; });
      }
      if (stop_requested_) {
        if (paused) window_start_ns_ = NowNanos();  // the paused time is in no window
        return;
      }
      pause_now = pause_requested_;
    }
    const int64_t now = NowNanos();
    if (paused && !pause_now) {  // resumed: a fresh window starts now
      paused = false;
      window_start_ns_ = now;
      next_window = now + interval_ns;
      next_sample = now + sample_ns;
      continue;
    }
    if (!paused && pause_now) {  // pausing: close what ran so far
      DrainTrace(now);
      Window w = CloseWindow(now, false);
      if (w.seconds * 1e9 >= 0.25 * static_cast<double>(interval_ns)) Publish(w);
      paused = true;
      continue;
    }
    if (now >= next_sample) {
      DrainTrace(now);
      while (next_sample <= now) next_sample += sample_ns;
    }
    if (now >= next_window) {
      Publish(CloseWindow(now, false));
      while (next_window <= now) next_window += interval_ns;
    }
  }
}

Result<InputPipelineReport> Monitor::Stop() {
  if (!started_) return InvalidArgument("monitor: Stop() before Start()");
  if (!stopped_) {
    stopped_ = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_requested_ = true;
    }
    cv_.notify_all();
    thread_.join();
    running_.store(false, std::memory_order_release);
    const int64_t now = NowNanos();
    // The last, partial window counts in the run's totals. It is published only when it is
    // at least a quarter interval long (or the only one): a few milliseconds holding one step's
    // end would read as a spike, since FLOPs count in the window where their step ends.
    DrainTrace(now);
    Window last = CloseWindow(now, true);
    if (last.index == 0 || last.seconds >= 0.25 * options_.interval_seconds) Publish(last);
    info_.peak_gflops_per_core = peak_gflops_;  // the thread is joined: nothing reads it now
    InputPipelineReport report = AnalyzeInputPipeline(totals_, stage_marks_);
    for (auto& rep : reporters_) {
      Status st = rep->OnStop(report);
      if (!st.ok()) NoteError(st);
    }
    if (trace_) {
      int64_t dropped = 0;
      for (auto& ring : rings_) dropped += ring->dropped.load(std::memory_order_relaxed);
      Status st = trace_->Finish(report, dropped);
      if (!st.ok()) NoteError(st);
    }
    std::lock_guard<std::mutex> lock(mu_);
    report_ = std::move(report);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return error_;
  return report_;
}

Window Monitor::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

std::vector<Window> Monitor::History() const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_;
}

}  // namespace strata::monitor
