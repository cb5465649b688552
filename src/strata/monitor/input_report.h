// The post-run input-pipeline report, in the spirit of the TPU profiler's input-pipeline
// analyzer: how much of the step time went to waiting for input, what that means, which
// stage is the slowest and what to change.
//
// Verdict on idle % (share of replica wall time blocked on input):
//   < 5 %     "not input-bound"
//   5 - 20 %  "moderately input-bound"
//   >= 20 %   "highly input-bound"
// Slowest stage: the one whose own work per delivered element of the root stage, divided
// by its parallelism, is the largest (the stage that limits the pipeline's throughput).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/monitor/window.h"

namespace strata::monitor {

enum class Verdict { kNotInputBound, kModeratelyInputBound, kHighlyInputBound };
Verdict VerdictFor(double idle_pct);
const char* VerdictName(Verdict v);  // "not input-bound", ...

struct StageSummary {
  std::string name, path;
  int64_t elements = 0, bytes = 0;
  double busy_seconds = 0, blocked_upstream_seconds = 0, blocked_downstream_seconds = 0;
  int64_t parallelism = 0;
  // Own work per element the root stage delivered, per worker: the stage's cost per batch.
  double ms_per_root_element = 0;
  // That cost as a share of the sum over stages (how the pipeline's work divides).
  double share_pct = 0;
  // File readers ("tfrecord") only: bytes / busy seconds, the MB/s one stream delivers while it
  // reads (busy time is summed over the stage's threads, one per open file); 0 for other stages.
  double stream_mb_per_second = 0;
};

struct InputPipelineReport {
  double seconds = 0;
  int replicas = 1;
  int64_t steps = 0;
  int64_t examples = 0;
  double examples_per_s = 0;
  double step_ms = 0;          // wall time per step
  double compute_ms = 0;       // mean StepBegin..StepEnd
  double input_wait_ms = 0;    // mean input wait per step
  double idle_pct = 0;         // input wait / wall, over replicas
  double utilization_pct = 0;  // matrix FLOPs / (seconds x replicas x peak)
  double peak_gflops_per_core = 0;       // the peak it divides by: the run's last (after any correction)
  std::vector<std::string> peak_corrections;  // the line of each correction of the peak, in order
  Verdict verdict = Verdict::kNotInputBound;
  std::string slowest_stage;   // name; "" when no stage statistics were supplied
  std::string slowest_stage_path;
  std::string suggestion;      // one or more concrete sentences
  std::vector<StageSummary> stages;
};

// Builds the report from the run's totals and the last cumulative stage samples.
InputPipelineReport AnalyzeInputPipeline(const RunTotals& totals, const std::vector<StageSample>& stages);

std::string FormatReportText(const InputPipelineReport& report);
std::string ReportToJson(const InputPipelineReport& report);

}  // namespace strata::monitor
