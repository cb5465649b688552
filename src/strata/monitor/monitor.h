// The monitor: matrix-unit utilization % and idle % of a running computation, every window.
//
// The two numbers are defined once (docs/architecture.md, "Utilization, defined once"):
//   idle %         share of wall time the replicas were blocked on the input pipeline
//                  = sum over replicas of input-wait ns / (window ns x replicas)
//   utilization %  FLOPs of the matrix kernels executed in the window
//                  / (window s x replicas x calibrated peak FLOP/s per core for the step's dtype)
//
// Usage from a training loop (one thread per replica; every hook is thread-safe, lock-free
// and allocation-free, so it may sit in the steady-state step):
//
//   STRATA_ASSIGN_OR_RETURN(auto mon, monitor::Monitor::Create({.replicas = 2, .dtype = DType::kF32,
//                                                               .pipeline = my_stats_source}));
//   mon->AddReporter(std::make_unique<monitor::ConsoleReporter>());      // console_reporter.h
//   STRATA_RETURN_IF_ERROR(mon->Start());        // after compilation: the first window starts here
//   // in replica r's thread, per step:
//   mon->InputWaitBegin(r); batch = it.GetNext(); mon->InputWaitEnd(r);
//   mon->StepBegin(r); program.Run(batch); mon->StepEnd(r, program.matrix_flops(), batch_size);
//   ...
//   STRATA_ASSIGN_OR_RETURN(monitor::InputPipelineReport report, mon->Stop());
//   std::fputs(monitor::FormatReportText(report).c_str(), stdout);
//
// A background thread closes a window every `interval_seconds`, turns the per-replica
// counters and the pipeline's per-stage statistics into a Window record (window.h) and hands
// it to every reporter. Stop() closes the last (partial) window and returns the post-run
// input-pipeline report (input_report.h). Examples count in the window in which their step
// ended; FLOPs of a step that straddles a window close are split between the two windows
// by time (estimated from the replica's previous step), so windows carry no step-edge spikes.
// A last window shorter than a quarter interval is not published (the report covers it).
//
// A calibrated peak corrects itself: when a replica's executed FLOPs in a window (what its
// kernels ran, Winograd's fewer multiplies included) beat the peak by more than the window's
// noise, or its counted FLOPs do and a measurement of the unit now does too (core/peak_flops.h,
// CheckPeak), the monitor thread corrects the cached peak before it publishes the window; that
// window carries the line saying so (Window::peak_correction) and it and every later one divide
// by the new peak.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/status.h"
#include "strata/monitor/input_report.h"
#include "strata/monitor/reporter.h"
#include "strata/monitor/window.h"

namespace strata::monitor {

// Where the per-stage statistics come from: called on the monitor's thread once per window
// (and once per trace sample). Returns cumulative counters (StageSample, window.h).
using PipelineStatsSource = std::function<std::vector<StageSample>()>;

struct MonitorOptions {
  // Seconds per reporting window (the seed's monitor refreshes about every 10 s).
  double interval_seconds = 10.0;
  // Replica threads that will call the hooks with indices 0 .. replicas-1.
  int replicas = 1;
  // The step's dtype: chooses the calibrated peak (f32 or bf16) when peak is not given.
  DType dtype = DType::kF32;
  // Peak GFLOP/s of one core for `dtype`; 0 = CalibratedPeakFlops() (core/peak_flops.h), which
  // the run corrects if its kernels beat it. A given figure is used as it is.
  double peak_gflops_per_core = 0.0;
  // What an example is called on the console line ("img" gives "1,840 img/s").
  std::string example_unit = "examples";
  // Per-stage pipeline statistics; empty when there is no pipeline to report.
  PipelineStatsSource pipeline;
  // Global step reported for the first step (a resumed run starts at its checkpoint's step).
  int64_t initial_step = 0;
  // Chrome trace: per replica, at most this many step/wait events buffered between two
  // drains by the monitor thread (drained every trace_sample_seconds); beyond it events are
  // dropped and counted. Rings are allocated at Create, never in a hook.
  int trace_ring_events = 1 << 15;
  // How often the monitor thread drains the trace rings and samples pipeline counters
  // into the trace (only when a TraceWriter is attached).
  double trace_sample_seconds = 0.25;
  // Windows kept in memory for History() (the web page's charts); older ones are dropped.
  int history_windows = 720;
  // A multi-worker job's trace: this worker's index, and its clock (NowNanos()) at a moment
  // every worker shared (a barrier's exit), which the trace records beside its own start so
  // that bench/merge_traces.py can put the workers' traces on one time line; clock_offset_ns
  // is added to both as another host's clock would differ (a test's knob). 0: one worker.
  int worker = 0;
  int64_t clock_sync_ns = 0;
  int64_t clock_offset_ns = 0;
};

class TraceWriter;  // trace_writer.h
namespace internal {
struct ReplicaSlot;  // per-replica counters, one cache line each (monitor.cc)
struct ReplicaMark;  // a consistent copy of one slot
struct TraceRing;    // per-replica trace events, single producer / single consumer
}  // namespace internal

class Monitor {
 public:
  static Result<std::unique_ptr<Monitor>> Create(MonitorOptions options);
  ~Monitor();  // Stops if still running (the report is then discarded)
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Reporters receive OnStart, every window, and OnStop, in the order added. Add them
  // before Start(). An error from a reporter is logged once and returned by Stop().
  void AddReporter(std::unique_ptr<Reporter> reporter);
  // Writes a Chrome trace event file (one track per replica and per pipeline stage).
  // Call before Start(). Opens the file now so a bad path fails here.
  Status EnableTrace(const std::string& path);

  // Starts the first window (call after compilation, just before the first step).
  Status Start();
  // Closes the last window, stops reporters, finishes the trace and returns the
  // input-pipeline report of the whole run. Idempotent: a second call returns the report again.
  Result<InputPipelineReport> Stop();

  // Between Pause() and Resume() no step runs (fit's validation passes): the open window
  // closes at Pause() (published if at least a quarter interval long) and the next starts at
  // Resume(), so no window reads 0 img/s and the run's idle share counts training time only.
  void Pause();
  void Resume();

  // ---- hooks, called from replica threads (replica in [0, replicas)) -------------------
  // Cheap: two clock reads at most, a few relaxed atomic stores into the replica's own
  // cache line. Calls before Start(), after Stop() or with a bad index are ignored.
  void StepBegin(int replica) noexcept;
  // `matrix_flops`: FLOPs of the matrix kernels (conv, matmul, their backward passes) this
  // step ran on this replica, counted directly (utilization % quotes them); `executed_flops`:
  // what those kernels executed (backend::KernelInfo::ExecutedMatrixFlops: fewer for Winograd),
  // which the peak check compares; `examples`: examples this replica consumed.
  void StepEnd(int replica, double matrix_flops, int64_t examples, double executed_flops) noexcept;
  // Kernels that execute what they count (GEMMs, direct convolutions).
  void StepEnd(int replica, double matrix_flops, int64_t examples) noexcept {
    StepEnd(replica, matrix_flops, examples, matrix_flops);
  }
  void InputWaitBegin(int replica) noexcept;
  void InputWaitEnd(int replica) noexcept;

  // ---- the communication timeline: from fit's thread between steps, only with a trace -----
  // One gradient bucket's all-reduce on this worker (`index` in start order, its f32 bytes):
  // when it was ready, started and seen finished (NowNanos()).
  void AllReduceBucket(int index, int64_t bytes, int64_t ready_ns, int64_t start_ns, int64_t finish_ns) noexcept;
  // The step's wait for the all-reduce, from the backward pass's end to the reduction's.
  void AllReduceWait(int64_t begin_ns, int64_t end_ns) noexcept;

  // RAII form of InputWaitBegin/End.
  class InputWait {
   public:
    InputWait(Monitor* m, int replica) noexcept : m_(m), r_(replica) {
      if (m_) m_->InputWaitBegin(r_);
    }
    ~InputWait() {
      if (m_) m_->InputWaitEnd(r_);
    }
    InputWait(const InputWait&) = delete;
    InputWait& operator=(const InputWait&) = delete;

   private:
    Monitor* m_;
    int r_;
  };

  // ---- readers (any thread) ----------------------------------------------------------
  bool running() const { return running_.load(std::memory_order_acquire); }
  // As at Start(); after Stop(), with the peak the run ended with (a correction changes it:
  // while running, Latest().peak_gflops_per_core is the one in use).
  const RunInfo& info() const { return info_; }
  // The most recent closed window; index -1 before the first one closes.
  Window Latest() const;
  // The last `history_windows` windows, oldest first.
  std::vector<Window> History() const;

 private:
  explicit Monitor(MonitorOptions options);
  void Loop();
  // Builds the window [window_start_ns_, now_ns) and advances the window start.
  Window CloseWindow(int64_t now_ns, bool final);
  void DrainTrace(int64_t now_ns);
  void Publish(const Window& w);
  // Corrects the peak when a replica's executed rate in `w` beats it (noise: per replica).
  void CheckPeak(Window* w, const std::vector<double>& noise);
  void NoteError(const Status& st);

  MonitorOptions options_;
  RunInfo info_;
  std::unique_ptr<internal::ReplicaSlot[]> slots_;
  // With a trace: [replicas] the replicas' rings, then the communication timeline's (fit's thread).
  std::vector<std::unique_ptr<internal::TraceRing>> rings_;
  std::vector<std::unique_ptr<Reporter>> reporters_;
  std::unique_ptr<TraceWriter> trace_;

  double peak_gflops_ = 0;      // in use: the monitor thread's (info_ gets it at Stop)
  bool correct_peak_ = false;   // the peak is calibrated (not given), so a run may correct it
  bool peak_doubt_settled_ = false;  // a counted rate above the peak was checked by measuring
  std::atomic<bool> running_{false};
  bool started_ = false, stopped_ = false;
  int64_t start_ns_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;              // guards stop_requested_, latest_, history_, error_, report_
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool pause_requested_ = false;  // guarded by mu_; the monitor thread follows it

  // Monitor-thread state: counters as of the last window close.
  std::vector<internal::ReplicaMark> marks_;
  int64_t window_start_ns_ = 0;
  int64_t window_index_ = 0;
  std::vector<StageSample> stage_marks_;
  RunTotals totals_;

  Window latest_;
  std::vector<Window> history_;
  Status error_;
  InputPipelineReport report_;
};

}  // namespace strata::monitor
