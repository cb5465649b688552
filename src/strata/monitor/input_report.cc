#include "strata/monitor/input_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "strata/monitor/json_util.h"

namespace strata::monitor {

using nlohmann::json;

Verdict VerdictFor(double idle_pct) {
  if (idle_pct < 5.0) return Verdict::kNotInputBound;
  if (idle_pct < 20.0) return Verdict::kModeratelyInputBound;
  return Verdict::kHighlyInputBound;
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kNotInputBound: return "not input-bound";
    case Verdict::kModeratelyInputBound: return "moderately input-bound";
    case Verdict::kHighlyInputBound: return "highly input-bound";
  }
  return "?";
}

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Has(const std::string& haystack, const char* needle) { return haystack.find(needle) != std::string::npos; }

// The stage the replicas iterate: path "0", else the shortest path, else the last listed
// (data::Dataset lists sources first).
const StageSample* RootStage(const std::vector<StageSample>& stages) {
  const StageSample* best = nullptr;
  for (const auto& s : stages) {
    if (s.path == "0") return &s;
    if (!s.path.empty() && (!best || s.path.size() < best->path.size())) best = &s;
  }
  return best ? best : (stages.empty() ? nullptr : &stages.back());
}

// What to change, by the kind of the slowest stage. Concrete: names the stage and its
// parallelism, and the knob that addresses it.
std::string Suggest(const StageSummary& s, const std::vector<StageSample>& all) {
  const std::string n = Lower(s.name);
  const std::string who = "'" + s.name + "'" + (s.path.empty() ? "" : " (stage " + s.path + ")");
  const std::string par = std::to_string(std::max<int64_t>(s.parallelism, 1));
  std::string out;
  if (Has(n, "interleave") || Has(n, "record") || Has(n, "read") || Has(n, "file")) {
    out = "Reading is the bottleneck at " + who + ", " + par +
          " reader(s): raise the interleave's cycle_length and num_parallel_calls, keep at least as many files as "
          "readers (split the data into more shards if there are fewer files than readers; fewer readers than "
          "files only helps when each file is large), and use deterministic=false so one slow file does not stall "
          "the others.";
  } else if (Has(n, "map") || Has(n, "decode") || Has(n, "augment") || Has(n, "parse")) {
    out = "The map function of " + who + " is the bottleneck with " + par +
          " parallel call(s): raise num_parallel_calls (AUTOTUNE, or the number of cores) and use "
          "deterministic=false; if the work is the same every epoch (decoding, resizing), cache() its output or "
          "do it once offline (strata make-records at the target size).";
  } else if (Has(n, "batch")) {
    out = "Batching at " + who +
          " is the bottleneck: use a parallel batch (num_parallel_calls) or map-and-batch so elements are copied "
          "into the batch by several threads.";
  } else if (Has(n, "shuffle")) {
    out = "Refilling the shuffle buffer at " + who +
          " is the bottleneck: shuffle the file order and use a smaller buffer, or cache() before shuffle so the "
          "buffer refills from memory.";
  } else if (Has(n, "cache")) {
    out = "Reading the cache at " + who + " is the bottleneck: cache in memory rather than on disk, or cache "
          "after the expensive stages so less work is repeated.";
  } else {
    out = "Stage " + who + " is the bottleneck with " + par +
          " worker(s): give it more parallelism, or cache() its output if it is the same every epoch.";
  }
  bool has_prefetch = false;
  for (const auto& st : all) has_prefetch |= Has(Lower(st.name), "prefetch");
  if (!has_prefetch)
    out += " Add prefetch(AUTOTUNE) as the last stage so the next batch is prepared while the step runs.";
  return out;
}

}  // namespace

InputPipelineReport AnalyzeInputPipeline(const RunTotals& t, const std::vector<StageSample>& stages) {
  InputPipelineReport r;
  r.seconds = t.seconds;
  r.replicas = t.replicas;
  r.steps = t.steps;
  r.examples = t.examples;
  const double replica_ns = t.seconds * 1e9 * std::max(t.replicas, 1);
  r.idle_pct = replica_ns > 0 ? std::clamp(100.0 * t.wait_ns / replica_ns, 0.0, 100.0) : 0;
  const double peak = t.seconds * std::max(t.replicas, 1) * t.peak_flops_per_replica_second;
  r.utilization_pct = peak > 0 ? 100.0 * t.matrix_flops / peak : 0;
  r.peak_gflops_per_core = t.peak_flops_per_replica_second * 1e-9;
  r.peak_corrections = t.peak_corrections;
  r.examples_per_s = t.seconds > 0 ? static_cast<double>(t.examples) / t.seconds : 0;
  if (t.replica_steps > 0) {
    const double per_replica_steps = static_cast<double>(t.replica_steps) / std::max(t.replicas, 1);
    r.step_ms = t.seconds * 1e3 / per_replica_steps;
    r.compute_ms = t.compute_ns * 1e-6 / static_cast<double>(t.replica_steps);
    r.input_wait_ms = t.wait_ns * 1e-6 / static_cast<double>(t.replica_steps);
  }
  r.verdict = VerdictFor(r.idle_pct);

  const StageSample* root = RootStage(stages);
  const double root_elements = root && root->elements > 0 ? static_cast<double>(root->elements) : 0;
  double total_cost = 0;
  for (const auto& s : stages) {
    StageSummary ss;
    ss.name = s.name;
    ss.path = s.path;
    ss.elements = s.elements;
    ss.bytes = s.bytes;
    ss.busy_seconds = static_cast<double>(s.busy_ns) * 1e-9;
    ss.blocked_upstream_seconds = static_cast<double>(s.blocked_upstream_ns) * 1e-9;
    ss.blocked_downstream_seconds = static_cast<double>(s.blocked_downstream_ns) * 1e-9;
    ss.parallelism = s.parallelism;
    if (s.name == "tfrecord" && s.busy_ns > 0)  // the file readers: one thread per open file (stream)
      ss.stream_mb_per_second = static_cast<double>(s.bytes) * 1e3 / static_cast<double>(s.busy_ns);
    if (root_elements > 0)
      ss.ms_per_root_element = static_cast<double>(s.busy_ns) * 1e-6 / root_elements /
                               static_cast<double>(std::max<int64_t>(s.parallelism, 1));
    total_cost += ss.ms_per_root_element;
    r.stages.push_back(std::move(ss));
  }
  const StageSummary* slowest = nullptr;
  for (auto& ss : r.stages) {
    ss.share_pct = total_cost > 0 ? 100.0 * ss.ms_per_root_element / total_cost : 0;
    if (ss.ms_per_root_element > 0 && (!slowest || ss.ms_per_root_element > slowest->ms_per_root_element))
      slowest = &ss;
  }
  if (slowest) {
    r.slowest_stage = slowest->name;
    r.slowest_stage_path = slowest->path;
  }

  char head[160];
  if (r.verdict == Verdict::kNotInputBound) {
    std::snprintf(head, sizeof(head),
                  "No change needed: the replicas waited for input %.1f%% of the time (below 5%%).", r.idle_pct);
    r.suggestion = head;
    if (slowest) r.suggestion += " If the model gets faster, '" + slowest->name + "' is the stage to watch.";
  } else if (slowest) {
    r.suggestion = Suggest(*slowest, stages);
  } else if (stages.empty()) {
    r.suggestion =
        "The replicas waited for input, but no per-stage statistics were supplied to the monitor: run with the "
        "data pipeline's statistics attached to see which stage is slow; meanwhile raise num_parallel_calls of the "
        "map stages and add prefetch(AUTOTUNE) at the end.";
  } else {
    r.suggestion =
        "The replicas waited for input, yet no stage reports busy time: the source itself (storage or the network) "
        "is slow. Read from local disk, use more files in parallel (interleave), or cache() the dataset.";
  }
  return r;
}

json ReportJson(const InputPipelineReport& r) {
  json stages = json::array();
  for (const auto& s : r.stages)
    stages.push_back({{"name", s.name},
                      {"path", s.path},
                      {"elements", s.elements},
                      {"bytes", s.bytes},
                      {"busy_seconds", s.busy_seconds},
                      {"blocked_upstream_seconds", s.blocked_upstream_seconds},
                      {"blocked_downstream_seconds", s.blocked_downstream_seconds},
                      {"parallelism", s.parallelism},
                      {"ms_per_root_element", s.ms_per_root_element},
                      {"share_pct", s.share_pct},
                      {"stream_mb_per_second", s.stream_mb_per_second}});
  return {{"seconds", r.seconds},
          {"replicas", r.replicas},
          {"steps", r.steps},
          {"examples", r.examples},
          {"examples_per_s", r.examples_per_s},
          {"step_ms", r.step_ms},
          {"compute_ms", r.compute_ms},
          {"input_wait_ms", r.input_wait_ms},
          {"idle_pct", r.idle_pct},
          {"utilization_pct", r.utilization_pct},
          {"peak_gflops_per_core", r.peak_gflops_per_core},
          {"peak_corrections", r.peak_corrections},
          {"verdict", VerdictName(r.verdict)},
          {"slowest_stage", r.slowest_stage},
          {"slowest_stage_path", r.slowest_stage_path},
          {"suggestion", r.suggestion},
          {"stages", stages}};
}

std::string ReportToJson(const InputPipelineReport& r) { return Dump(ReportJson(r)); }

std::string FormatReportText(const InputPipelineReport& r) {
  std::string o;
  char line[512];
  o += "Input pipeline report\n";
  std::snprintf(line, sizeof(line), "  run        %.1f s, %d replica(s), %lld steps, %lld examples (%s/s)\n", r.seconds,
                r.replicas, static_cast<long long>(r.steps), static_cast<long long>(r.examples),
                FormatCount(r.examples_per_s).c_str());
  o += line;
  std::snprintf(line, sizeof(line), "  step       %.1f ms = compute %.1f ms + input wait %.1f ms + other %.1f ms\n",
                r.step_ms, r.compute_ms, r.input_wait_ms, std::max(0.0, r.step_ms - r.compute_ms - r.input_wait_ms));
  o += line;
  std::snprintf(line, sizeof(line), "  idle       %.1f%% of step time waiting for input: %s\n", r.idle_pct,
                VerdictName(r.verdict));
  o += line;
  std::snprintf(line, sizeof(line), "  matrix     %.1f%% utilization of %.1f GFLOP/s per core\n", r.utilization_pct,
                r.peak_gflops_per_core);
  o += line;
  for (const std::string& c : r.peak_corrections) o += "  peak       " + c + "\n";
  if (!r.slowest_stage.empty()) {
    o += "  slowest    " + r.slowest_stage + (r.slowest_stage_path.empty() ? "" : " (stage " + r.slowest_stage_path + ")") +
         "\n";
  }
  o += "  suggestion " + r.suggestion + "\n";
  if (!r.stages.empty()) {
    std::snprintf(line, sizeof(line), "  %-8s %-20s %10s %9s %5s %12s %7s %9s\n", "path", "stage", "elements", "busy s",
                  "par", "ms/element", "share", "MB/s/str");
    o += line;
    for (const auto& s : r.stages) {
      std::snprintf(line, sizeof(line), "  %-8.8s %-20.20s %10lld %9.2f %5lld %12.3f %6.1f%% %9.1f\n", s.path.c_str(),
                    s.name.c_str(), static_cast<long long>(s.elements), s.busy_seconds,
                    static_cast<long long>(s.parallelism), s.ms_per_root_element, s.share_pct,
                    s.stream_mb_per_second);
      o += line;
    }
  }
  return o;
}

}  // namespace strata::monitor
