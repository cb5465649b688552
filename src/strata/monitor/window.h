// The records the monitor produces: one Window per reporting interval, and what it is made of.
//
// A Window is a plain value: reporters format it (console line, TensorBoard scalars, JSON
// lines, Prometheus text, the web page's JSON), `strata monitor URL` parses it back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"

namespace strata::monitor {

// One input-pipeline stage's counters, cumulative since the pipeline started (the monitor
// differences two samples to get a window). Field meanings follow data::StageStats
// (src/strata/data/stats.h): busy = the stage's own work summed over its threads;
// blocked_upstream = time its consumer side waited for its input; blocked_downstream = time
// its producers waited for buffer space (the stage is ahead of its consumer).
struct StageSample {
  std::string name;  // "parallel_map", "batch", "prefetch", ...
  std::string path;  // position: "0" is the stage the replicas iterate, "0.0" its input, ...
  int64_t elements = 0;               // elements produced
  int64_t bytes = 0;                  // bytes of those elements
  int64_t busy_ns = 0;
  int64_t blocked_upstream_ns = 0;
  int64_t blocked_downstream_ns = 0;
  int64_t buffer_fill = 0;            // gauges, not cumulative: elements buffered now
  int64_t buffer_capacity = 0;
  int64_t parallelism = 0;            // worker threads now (0 or 1: synchronous)
};

// What a run is: sent to reporters once, at Start().
struct RunInfo {
  int replicas = 1;
  double interval_seconds = 10.0;
  std::string dtype = "f32";
  double peak_gflops_per_core = 0;
  std::string example_unit = "examples";
  double start_wall_time = 0;  // Unix seconds
  int64_t initial_step = 0;
  // The trace's clock anchors (MonitorOptions::worker, clock_sync_ns): this worker's clock at
  // the monitor's start and at the moment the workers shared; 0 for one worker.
  int worker = 0;
  int64_t trace_start_ns = 0, clock_sync_ns = 0;
};

struct ReplicaWindow {
  double idle_pct = 0;          // input-wait ns / window ns
  double utilization_pct = 0;   // matrix FLOPs / (window s x peak of one core)
  int64_t steps = 0;            // steps that ended in the window
  double step_ms = 0;           // window wall time per step (compute + input wait + rest)
  double compute_ms = 0;        // mean StepBegin..StepEnd
  double examples_per_s = 0;
  double matrix_flops = 0;
  double executed_flops = 0;    // what the kernels executed of matrix_flops (Winograd: fewer)
};

struct StageWindow {
  std::string name, path;
  double elements_per_s = 0;
  double mb_per_s = 0;
  double busy_pct = 0;              // own work / window, in % of one core (may exceed 100)
  double blocked_upstream_pct = 0;  // of one thread's window
  double blocked_downstream_pct = 0;
  int64_t buffer_fill = 0, buffer_capacity = 0, parallelism = 0;
  int64_t elements = 0;             // cumulative
};

struct Window {
  int64_t index = -1;        // 0, 1, ...; -1 = none yet
  bool final = false;        // the partial window closed by Stop()
  double start_seconds = 0;  // since Start()
  double seconds = 0;        // length
  double wall_time = 0;      // Unix seconds at the window's end
  int64_t step = 0;          // global step at the window's end (initial_step + steps done)
  // Overall (all replicas together).
  double idle_pct = 0;
  double utilization_pct = 0;
  double step_ms = 0;        // mean over replicas that stepped
  double compute_ms = 0;
  double examples_per_s = 0; // sum over replicas
  double matrix_flops = 0;   // sum over replicas
  double executed_flops = 0; // sum over replicas: what the kernels executed (the peak check's rate)
  double peak_flops = 0;     // seconds x replicas x peak: the utilization denominator
  double peak_gflops_per_core = 0;  // the peak this window is divided by (0: not recorded)
  // The line saying this window's executed rate beat the peak in use and the peak was
  // corrected (core/peak_flops.h, CorrectPeak); "" in every other window.
  std::string peak_correction;
  std::vector<ReplicaWindow> replicas;
  std::vector<StageWindow> stages;
};

// Sums over the whole run, kept by the monitor thread; input to the post-run report.
struct RunTotals {
  double seconds = 0;
  int replicas = 1;
  double wait_ns = 0;        // summed over replicas
  double matrix_flops = 0;
  double peak_flops_per_replica_second = 0;  // the peak at the end of the run (after any correction)
  std::vector<std::string> peak_corrections;  // their lines, in order
  int64_t steps = 0;         // global steps (max over replicas)
  int64_t examples = 0;
  double compute_ns = 0;     // summed over replicas
  int64_t replica_steps = 0; // summed over replicas
};

// "matrix 61% · idle 3% · 1,840 img/s · step 69 ms"
std::string FormatConsoleLine(const Window& w, const std::string& example_unit);
// 1840.4 -> "1,840"; 12.5 -> "12.5" below 100.
std::string FormatCount(double v);

// JSON objects (nlohmann under the hood; kept out of this header).
std::string WindowToJson(const Window& w);
Result<Window> WindowFromJson(const std::string& json);
std::string RunInfoToJson(const RunInfo& info);

// Prometheus text exposition format (version 0.0.4) of the latest window plus run info.
std::string FormatPrometheus(const RunInfo& info, const Window& w);

}  // namespace strata::monitor
