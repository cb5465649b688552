// A training run's report of what crossed between workers (docs/distribute.md): the all-reduce's
// bytes and time per step, the part the step waited for, the bucket schedule against the
// backward pass, and the watchdog's view; over the whole run and, from the second epoch on,
// in the steady state (the first step compiles the programs, and the workers first meet in its
// all-reduce, each after its own compile).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/distribute/collective.h"
#include "strata/distribute/reducer.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/model.h"

namespace strata::train {

// A callback that counts the steps this run trains and keeps the collective's and the
// reducer's counters as they were at the end of its first epoch.
class CrossHostSnapshot final : public keras::Callback {
 public:
  CrossHostSnapshot(const distribute::Collective* collective, const keras::Model* model)
      : collective_(collective), model_(model) {}
  Status OnTrainBatchEnd(int64_t, const keras::Logs&) override;
  Status OnEpochEnd(int, keras::Logs&) override;

  // The steps after the first epoch's end (0 before it, or with one epoch): the steady state.
  int64_t steps_after_first_epoch() const { return taken ? steps_run - steps_at_first_epoch_end : 0; }

  int64_t steps_run = 0;  // this run's steps (a resumed run's, not the backup's)
  bool taken = false;     // the first epoch's end was seen:
  distribute::CollectiveStats collective;
  distribute::ReducerStats reducer;
  int64_t steps_at_first_epoch_end = 0;
  // This process's CPU seconds and the monotonic clock at the end of the first and of the
  // latest epoch, and the steps run by the latest: the CPU time of the steady state's steps.
  double cpu_seconds_at_first_epoch_end = 0, seconds_at_first_epoch_end = 0;
  double cpu_seconds_at_last_epoch_end = 0, seconds_at_last_epoch_end = 0;
  int64_t steps_at_last_epoch_end = 0;

 private:
  const distribute::Collective* collective_;
  const keras::Model* model_;
};

// Every worker's all-reduce wait, backward-pass end and CPU time per step after the first epoch
// (and its CPU seconds over the run), in
// worker order (a collective: every worker calls it, before only the chief goes on). The
// slowest worker waits for the network alone; the others wait for it too (load imbalance).
Result<nlohmann::json> GatherWorkerTimes(distribute::Collective& collective, const keras::Model& model,
                                         const CrossHostSnapshot& counters);

// The report as JSON (`cross_host` in --summary-json); `workers_times` is GatherWorkerTimes's
// (null: none). `train_seconds` is the whole run's, `seconds_after_first_epoch` the time of the
// steps after its first epoch (0: one epoch only).
nlohmann::json CrossHostReport(const distribute::Collective& collective, const keras::Model& model, int workers,
                               double train_seconds, const CrossHostSnapshot& counters, double seconds_after_first_epoch,
                               const nlohmann::json& worker_times);
// The report's lines for the run's account (the steady state's, when there is one): the
// all-reduce per step and the part waited for, and how many buckets overlapped the backward pass.
std::vector<std::string> CrossHostLines(const nlohmann::json& report);

}  // namespace strata::train
