#include "strata/train/cross_host_report.h"

#include <algorithm>
#include <cstdio>

#include "strata/core/clock.h"

namespace strata::train {

Status CrossHostSnapshot::OnTrainBatchEnd(int64_t, const keras::Logs&) {
  ++steps_run;
  return Status::OK();
}

Status CrossHostSnapshot::OnEpochEnd(int, keras::Logs&) {
  cpu_seconds_at_last_epoch_end = ProcessCpuSeconds();
  seconds_at_last_epoch_end = NowSeconds();
  steps_at_last_epoch_end = steps_run;
  if (taken) return Status::OK();
  cpu_seconds_at_first_epoch_end = cpu_seconds_at_last_epoch_end;
  seconds_at_first_epoch_end = seconds_at_last_epoch_end;
  collective = collective_->stats();
  reducer = model_->reducer_stats();
  steps_at_first_epoch_end = steps_run;
  taken = true;
  return Status::OK();
}

namespace {

// The all-reduce per step over `steps` steps whose counters moved from `a` to `b` (and the
// reducer's from `ra` to `rb`).
nlohmann::json PerStep(const distribute::CollectiveStats& a, const distribute::CollectiveStats& b,
                       const distribute::ReducerStats& ra, const distribute::ReducerStats& rb, double steps, double step_ms) {
  nlohmann::json j = {{"all_reduce_bytes_per_step", static_cast<double>(b.all_reduce_bytes - a.all_reduce_bytes) / steps},
                      {"wire_bytes_per_step", static_cast<double>(b.wire_bytes - a.wire_bytes) / steps},
                      {"all_reduce_ms_per_step", (b.all_reduce_seconds - a.all_reduce_seconds) * 1e3 / steps},
                      {"all_reduce_wait_ms_per_step", (b.all_reduce_wait_seconds - a.all_reduce_wait_seconds) * 1e3 / steps},
                      {"step_ms", step_ms}};
  // The bucket schedule against the backward pass (docs/scaling.md's model reads it): when each
  // bucket was ready, started and finished and when the backward pass and the reduction ended,
  // from the start of the step's program, averaged over the steps; how many buckets started
  // while the pass still ran.
  const int64_t reduced = rb.steps - ra.steps;
  if (reduced > 0) {
    const double n = static_cast<double>(reduced);
    nlohmann::json buckets = nlohmann::json::array();
    for (size_t i = 0; i < rb.buckets.size(); ++i) {
      const distribute::ReducerStats::Bucket before = i < ra.buckets.size() ? ra.buckets[i] : distribute::ReducerStats::Bucket{};
      const distribute::ReducerStats::Bucket& after = rb.buckets[i];
      buckets.push_back({{"bytes", after.bytes},
                         {"ready_ms", (after.ready_seconds - before.ready_seconds) * 1e3 / n},
                         {"start_ms", (after.start_seconds - before.start_seconds) * 1e3 / n},
                         {"finish_ms", (after.finish_seconds - before.finish_seconds) * 1e3 / n}});
    }
    j["backward_end_ms"] = (rb.backward_end_seconds - ra.backward_end_seconds) * 1e3 / n;
    j["reduction_end_ms"] = (rb.wait_end_seconds - ra.wait_end_seconds) * 1e3 / n;
    j["buckets"] = buckets;
    j["buckets_started_during_backward"] = rb.started_during_backward - ra.started_during_backward;
    j["buckets_started_after_backward"] = rb.started_after_backward - ra.started_after_backward;
  }
  return j;
}

}  // namespace

Result<nlohmann::json> GatherWorkerTimes(distribute::Collective& collective, const keras::Model& model,
                                         const CrossHostSnapshot& counters) {
  // The steady state where there is one, else the whole run, as the report shows it.
  const int64_t later = counters.steps_after_first_epoch();
  const nlohmann::json window =
      later > 0 ? PerStep(counters.collective, collective.stats(), counters.reducer, model.reducer_stats(),
                          static_cast<double>(later), 0)
                : PerStep({}, collective.stats(), {}, model.reducer_stats(),
                          static_cast<double>(std::max<int64_t>(1, counters.steps_run)), 0);
  // This worker's CPU time (its host's, with one worker a host): over the run so far, and over
  // its own epochs after the first, per step and per second of them (cores_used: 1 is a core
  // busy all the time). Where hosts share cores (namespaced hosts on one machine) it shows how
  // much of a core each got.
  // Its own bucket schedule too (ready, started, finished): each worker's timeline, not the
  // chief's alone, is what the scaling model is fed (docs/scaling.md).
  nlohmann::json mine = {{"all_reduce_wait_ms_per_step", window["all_reduce_wait_ms_per_step"]},
                         {"backward_end_ms", window.value("backward_end_ms", 0.0)},
                         {"reduction_end_ms", window.value("reduction_end_ms", 0.0)},
                         {"cpu_seconds", ProcessCpuSeconds()}};
  if (window.contains("buckets")) mine["buckets"] = window["buckets"];
  const int64_t steady = counters.steps_at_last_epoch_end - counters.steps_at_first_epoch_end;
  const double cpu = counters.cpu_seconds_at_last_epoch_end - counters.cpu_seconds_at_first_epoch_end;
  const double wall = counters.seconds_at_last_epoch_end - counters.seconds_at_first_epoch_end;
  if (counters.taken && steady > 0 && wall > 0) {
    mine["cpu_ms_per_step"] = cpu * 1e3 / static_cast<double>(steady);
    mine["cores_used"] = cpu / wall;
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all, collective.AllGather(mine.dump()));
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& w : all) out.push_back(nlohmann::json::parse(w));
  return out;
}

nlohmann::json CrossHostReport(const distribute::Collective& collective, const keras::Model& model, int workers,
                               double train_seconds, const CrossHostSnapshot& counters, double seconds_after_first_epoch,
                               const nlohmann::json& worker_times) {
  const distribute::CollectiveStats cs = collective.stats();
  const distribute::ReducerStats rs = model.reducer_stats();
  const double n = static_cast<double>(std::max<int64_t>(1, counters.steps_run));
  nlohmann::json j = PerStep({}, cs, {}, rs, n, train_seconds * 1e3 / n);
  j["workers"] = workers;
  // The watchdog's view (docs/distribute.md, "Faults"): the longest one collective waited, the
  // longest deadline it was given, and whether peers' heartbeats kept them alive.
  j["longest_wait_s"] = cs.longest_wait_seconds;
  j["longest_deadline_s"] = cs.longest_deadline_seconds;
  j["deadline_floor_s"] = cs.deadline_floor_seconds;
  j["heartbeats"] = cs.heartbeats;
  j["wire"] = cs.bf16_wire ? "bf16" : "f32";
  const int64_t later = counters.steps_after_first_epoch();
  if (later > 0 && seconds_after_first_epoch > 0)
    j["after_first_epoch"] = PerStep(counters.collective, cs, counters.reducer, rs, static_cast<double>(later),
                                     seconds_after_first_epoch * 1e3 / static_cast<double>(later));
  if (worker_times.is_array() && !worker_times.empty()) {
    // The least any worker waited: the slowest worker's wait, for the network alone.
    double least = worker_times[0]["all_reduce_wait_ms_per_step"].get<double>();
    for (const auto& w : worker_times) least = std::min(least, w["all_reduce_wait_ms_per_step"].get<double>());
    nlohmann::json& into = j.contains("after_first_epoch") ? j["after_first_epoch"] : j;
    into["per_worker"] = worker_times;
    into["least_wait_ms_per_step"] = least;
  }
  return j;
}

std::vector<std::string> CrossHostLines(const nlohmann::json& j) {
  // Overlapped with the backward pass, only the waiting part costs step time.
  const bool steady = j.contains("after_first_epoch");
  const nlohmann::json& shown = steady ? j["after_first_epoch"] : j;
  const double step_ms = shown["step_ms"].get<double>(), wait_ms = shown["all_reduce_wait_ms_per_step"].get<double>();
  char line[512];
  std::snprintf(line, sizeof line,
                "cross-host all-reduce: %.2f MB and %.1f ms per step, %.1f ms of it waited for (%.1f%% of a %.0f ms "
                "step%s), %d workers%s",
                shown["all_reduce_bytes_per_step"].get<double>() / 1e6, shown["all_reduce_ms_per_step"].get<double>(),
                wait_ms, 100.0 * wait_ms / std::max(step_ms, 1e-9), step_ms, steady ? ", after the first epoch" : "",
                j["workers"].get<int>(), j.value("wire", "") == "bf16" ? ", gradients as bf16 on the wire" : "");
  std::vector<std::string> lines = {line};
  if (shown.contains("buckets")) {
    const auto during = shown["buckets_started_during_backward"].get<long long>();
    const auto after = shown["buckets_started_after_backward"].get<long long>();
    std::snprintf(line, sizeof line,
                  "all-reduce overlap: %lld of %lld gradient buckets started during the backward pass", during,
                  during + after);
    lines.push_back(line);
  }
  return lines;
}

}  // namespace strata::train
