#include "strata/monitor/window.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "strata/monitor/json_util.h"

namespace strata::monitor {

using nlohmann::json;

std::string FormatCount(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  if (std::fabs(v) < 100) {
    std::snprintf(buf, sizeof(buf), "%.1f", v);
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.0f", std::fabs(v));
  std::string digits = buf, out;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[static_cast<size_t>(i)];
  }
  return v < 0 ? "-" + out : out;
}

std::string FormatConsoleLine(const Window& w, const std::string& example_unit) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "matrix %.0f%% · idle %.0f%% · %s %s/s · step %.0f ms", w.utilization_pct,
                w.idle_pct, FormatCount(w.examples_per_s).c_str(), example_unit.c_str(), w.step_ms);
  return buf;
}

json WindowJson(const Window& w) {
  json replicas = json::array();
  for (const auto& r : w.replicas)
    replicas.push_back({{"idle_pct", r.idle_pct},
                        {"utilization_pct", r.utilization_pct},
                        {"steps", r.steps},
                        {"step_ms", r.step_ms},
                        {"compute_ms", r.compute_ms},
                        {"examples_per_s", r.examples_per_s},
                        {"matrix_flops", r.matrix_flops},
                        {"executed_flops", r.executed_flops}});
  json stages = json::array();
  for (const auto& s : w.stages)
    stages.push_back({{"name", s.name},
                      {"path", s.path},
                      {"elements_per_s", s.elements_per_s},
                      {"mb_per_s", s.mb_per_s},
                      {"busy_pct", s.busy_pct},
                      {"blocked_upstream_pct", s.blocked_upstream_pct},
                      {"blocked_downstream_pct", s.blocked_downstream_pct},
                      {"buffer_fill", s.buffer_fill},
                      {"buffer_capacity", s.buffer_capacity},
                      {"parallelism", s.parallelism},
                      {"elements", s.elements}});
  return {{"index", w.index},
          {"final", w.final},
          {"start_seconds", w.start_seconds},
          {"seconds", w.seconds},
          {"wall_time", w.wall_time},
          {"step", w.step},
          {"idle_pct", w.idle_pct},
          {"utilization_pct", w.utilization_pct},
          {"step_ms", w.step_ms},
          {"compute_ms", w.compute_ms},
          {"examples_per_s", w.examples_per_s},
          {"matrix_flops", w.matrix_flops},
          {"executed_flops", w.executed_flops},
          {"peak_flops", w.peak_flops},
          {"peak_gflops_per_core", w.peak_gflops_per_core},
          {"peak_correction", w.peak_correction},
          {"replicas", replicas},
          {"stages", stages}};
}

std::string WindowToJson(const Window& w) { return Dump(WindowJson(w)); }

json RunInfoJson(const RunInfo& info) {
  return {{"replicas", info.replicas},
          {"interval_seconds", info.interval_seconds},
          {"dtype", info.dtype},
          {"peak_gflops_per_core", info.peak_gflops_per_core},
          {"example_unit", info.example_unit},
          {"start_wall_time", info.start_wall_time},
          {"initial_step", info.initial_step}};
}

std::string RunInfoToJson(const RunInfo& info) { return Dump(RunInfoJson(info)); }

namespace {

// Reads an optional number; a present field of the wrong type is an error.
template <typename T>
Status Get(const json& j, const char* key, T* out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::OK();
  if (it->is_boolean()) {
    *out = static_cast<T>(it->get<bool>());
    return Status::OK();
  }
  if (!it->is_number()) return InvalidArgument("monitor JSON: " + where + "field '" + key + "' is not a number");
  const double v = it->get<double>();
  if constexpr (std::is_integral_v<T>) {
    if (!(v >= -9.2e18 && v <= 9.2e18))
      return InvalidArgument("monitor JSON: " + where + "field '" + key + "' is out of range");
    *out = it->is_number_integer() ? static_cast<T>(it->get<int64_t>()) : static_cast<T>(v);
  } else {
    *out = static_cast<T>(v);
  }
  return Status::OK();
}

Status GetString(const json& j, const char* key, std::string* out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::OK();
  if (!it->is_string()) return InvalidArgument("monitor JSON: " + where + "field '" + key + "' is not a string");
  *out = it->get<std::string>();
  return Status::OK();
}

}  // namespace

Result<Window> WindowFromJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("monitor JSON: not valid JSON (" + std::to_string(text.size()) + " bytes)");
  // /api/v1/monitor wraps the window: {"run": {...}, "latest": {...}, "history": [...]}.
  if (j.is_object() && j.contains("latest")) j = j["latest"];
  if (!j.is_object()) return InvalidArgument("monitor JSON: a window must be an object");
  Window w;
  STRATA_RETURN_IF_ERROR(Get(j, "index", &w.index, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "final", &w.final, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "start_seconds", &w.start_seconds, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "seconds", &w.seconds, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "wall_time", &w.wall_time, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "step", &w.step, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "idle_pct", &w.idle_pct, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "utilization_pct", &w.utilization_pct, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "step_ms", &w.step_ms, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "compute_ms", &w.compute_ms, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "examples_per_s", &w.examples_per_s, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "matrix_flops", &w.matrix_flops, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "executed_flops", &w.executed_flops, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "peak_flops", &w.peak_flops, ""));
  STRATA_RETURN_IF_ERROR(Get(j, "peak_gflops_per_core", &w.peak_gflops_per_core, ""));
  STRATA_RETURN_IF_ERROR(GetString(j, "peak_correction", &w.peak_correction, ""));
  if (auto it = j.find("replicas"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const json& r = (*it)[i];
      if (!r.is_object()) return InvalidArgument("monitor JSON: replicas[" + std::to_string(i) + "] is not an object");
      const std::string where = "replicas[" + std::to_string(i) + "] ";
      ReplicaWindow rw;
      STRATA_RETURN_IF_ERROR(Get(r, "idle_pct", &rw.idle_pct, where));
      STRATA_RETURN_IF_ERROR(Get(r, "utilization_pct", &rw.utilization_pct, where));
      STRATA_RETURN_IF_ERROR(Get(r, "steps", &rw.steps, where));
      STRATA_RETURN_IF_ERROR(Get(r, "step_ms", &rw.step_ms, where));
      STRATA_RETURN_IF_ERROR(Get(r, "compute_ms", &rw.compute_ms, where));
      STRATA_RETURN_IF_ERROR(Get(r, "examples_per_s", &rw.examples_per_s, where));
      STRATA_RETURN_IF_ERROR(Get(r, "matrix_flops", &rw.matrix_flops, where));
      STRATA_RETURN_IF_ERROR(Get(r, "executed_flops", &rw.executed_flops, where));
      w.replicas.push_back(rw);
    }
  }
  if (auto it = j.find("stages"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const json& s = (*it)[i];
      if (!s.is_object()) return InvalidArgument("monitor JSON: stages[" + std::to_string(i) + "] is not an object");
      const std::string where = "stages[" + std::to_string(i) + "] ";
      StageWindow sw;
      STRATA_RETURN_IF_ERROR(GetString(s, "name", &sw.name, where));
      STRATA_RETURN_IF_ERROR(GetString(s, "path", &sw.path, where));
      STRATA_RETURN_IF_ERROR(Get(s, "elements_per_s", &sw.elements_per_s, where));
      STRATA_RETURN_IF_ERROR(Get(s, "mb_per_s", &sw.mb_per_s, where));
      STRATA_RETURN_IF_ERROR(Get(s, "busy_pct", &sw.busy_pct, where));
      STRATA_RETURN_IF_ERROR(Get(s, "blocked_upstream_pct", &sw.blocked_upstream_pct, where));
      STRATA_RETURN_IF_ERROR(Get(s, "blocked_downstream_pct", &sw.blocked_downstream_pct, where));
      STRATA_RETURN_IF_ERROR(Get(s, "buffer_fill", &sw.buffer_fill, where));
      STRATA_RETURN_IF_ERROR(Get(s, "buffer_capacity", &sw.buffer_capacity, where));
      STRATA_RETURN_IF_ERROR(Get(s, "parallelism", &sw.parallelism, where));
      STRATA_RETURN_IF_ERROR(Get(s, "elements", &sw.elements, where));
      w.stages.push_back(std::move(sw));
    }
  }
  return w;
}

namespace {

// Prometheus label values escape backslash, double quote and newline.
std::string Label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void Metric(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void Sample(std::string* out, const std::string& name, const std::string& labels, double v) {
  char num[64];
  if (std::isnan(v)) std::snprintf(num, sizeof(num), "NaN");
  else if (std::isinf(v)) std::snprintf(num, sizeof(num), v > 0 ? "+Inf" : "-Inf");
  else *std::to_chars(num, num + sizeof(num) - 1, v).ptr = '\0';  // the shortest text that reads back as v
  *out += name;
  if (!labels.empty()) *out += "{" + labels + "}";
  *out += ' ';
  *out += num;
  *out += '\n';
}

}  // namespace

std::string FormatPrometheus(const RunInfo& info, const Window& w) {
  std::string o;
  Metric(&o, "strata_monitor_replicas", "gauge", "Replicas (one per core) running the step.");
  Sample(&o, "strata_monitor_replicas", "", info.replicas);
  // The latest window's peak: a run whose kernels beat the calibrated peak corrects it.
  const double peak = w.peak_gflops_per_core > 0 ? w.peak_gflops_per_core : info.peak_gflops_per_core;
  Metric(&o, "strata_monitor_peak_flops_per_core", "gauge",
         "Peak FLOP/s of one core for the step's dtype (calibrated; corrected when a window's kernels beat it).");
  Sample(&o, "strata_monitor_peak_flops_per_core", "dtype=\"" + Label(info.dtype) + "\"", peak * 1e9);
  Metric(&o, "strata_monitor_window_index", "gauge", "Index of the latest closed window (-1: none yet).");
  Sample(&o, "strata_monitor_window_index", "", static_cast<double>(w.index));
  Metric(&o, "strata_monitor_window_seconds", "gauge", "Length of the latest window in seconds.");
  Sample(&o, "strata_monitor_window_seconds", "", w.seconds);
  Metric(&o, "strata_monitor_step", "gauge", "Global step at the end of the latest window.");
  Sample(&o, "strata_monitor_step", "", static_cast<double>(w.step));
  Metric(&o, "strata_monitor_matrix_unit_utilization_ratio", "gauge",
         "Matrix-kernel FLOPs / (window x replicas x peak), 0 to 1, latest window.");
  Sample(&o, "strata_monitor_matrix_unit_utilization_ratio", "", w.utilization_pct / 100);
  for (size_t r = 0; r < w.replicas.size(); ++r)
    Sample(&o, "strata_monitor_matrix_unit_utilization_ratio", "replica=\"" + std::to_string(r) + "\"",
           w.replicas[r].utilization_pct / 100);
  Metric(&o, "strata_monitor_idle_ratio", "gauge", "Share of wall time the replicas waited for input, 0 to 1, latest window.");
  Sample(&o, "strata_monitor_idle_ratio", "", w.idle_pct / 100);
  for (size_t r = 0; r < w.replicas.size(); ++r)
    Sample(&o, "strata_monitor_idle_ratio", "replica=\"" + std::to_string(r) + "\"", w.replicas[r].idle_pct / 100);
  Metric(&o, "strata_monitor_step_seconds", "gauge", "Wall time per step, latest window.");
  Sample(&o, "strata_monitor_step_seconds", "", w.step_ms / 1000);
  Metric(&o, "strata_monitor_examples_per_second", "gauge", "Examples per second over all replicas, latest window.");
  Sample(&o, "strata_monitor_examples_per_second", "", w.examples_per_s);
  if (!w.stages.empty()) {
    Metric(&o, "strata_monitor_stage_busy_ratio", "gauge", "Own work of a pipeline stage in cores (1: one core busy).");
    for (const auto& s : w.stages)
      Sample(&o, "strata_monitor_stage_busy_ratio", "stage=\"" + Label(s.name) + "\",path=\"" + Label(s.path) + "\"",
             s.busy_pct / 100);
    Metric(&o, "strata_monitor_stage_elements_per_second", "gauge", "Elements a pipeline stage produced per second.");
    for (const auto& s : w.stages)
      Sample(&o, "strata_monitor_stage_elements_per_second",
             "stage=\"" + Label(s.name) + "\",path=\"" + Label(s.path) + "\"", s.elements_per_s);
    Metric(&o, "strata_monitor_stage_buffer_fill", "gauge", "Elements buffered by a pipeline stage now.");
    for (const auto& s : w.stages)
      Sample(&o, "strata_monitor_stage_buffer_fill", "stage=\"" + Label(s.name) + "\",path=\"" + Label(s.path) + "\"",
             static_cast<double>(s.buffer_fill));
  }
  return o;
}

}  // namespace strata::monitor
