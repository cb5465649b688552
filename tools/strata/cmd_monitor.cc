// strata monitor: the live numbers of a running job, the recorded ones of a finished one, or
// a pure matrix-multiply program run under the monitor (the acceptance workload and a demo).
//
//   strata monitor http://127.0.0.1:8080/        live, from a job started with --monitor-port
//   strata monitor logs/train                    recorded, from the run's event files
//   strata monitor matmul --seconds 10 --monitor-port 8080 --trace trace.json
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "command.h"
#include "strata/core/cpu.h"
#include "strata/core/file.h"
#include "strata/monitor/console_reporter.h"
#include "strata/monitor/event_reporter.h"
#include "strata/monitor/http_server.h"
#include "strata/monitor/jsonl_reporter.h"
#include "strata/monitor/matmul_workload.h"
#include "strata/monitor/monitor.h"
#include "strata/record/event.h"

namespace strata::cli {
namespace {

constexpr const char* kCmd = "monitor";

struct Flags {
  bool json = false, follow = false, per_replica = false;
  int64_t count = 0;
  double timeout = 5, poll = 1;
  // matmul
  int64_t replicas = 0, n = 256, matmuls_per_step = 8, batch_size = 32, map_parallelism = 1, prefetch = 8;
  int64_t port = -1;
  double seconds = 10, map_cost_ms = 0, interval = 10, peak = 0, linger = 0;
  std::string bind = "127.0.0.1", trace, logdir, jsonl, report;
};

void PrintWindow(const monitor::Window& w, const std::string& unit, bool per_replica) {
  std::printf("%s\n", monitor::FormatConsoleLine(w, unit).c_str());
  if (per_replica) {
    for (size_t r = 0; r < w.replicas.size(); ++r)
      std::printf("  replica %zu: matrix %.0f%% · idle %.0f%% · step %.0f ms\n", r, w.replicas[r].utilization_pct,
                  w.replicas[r].idle_pct, w.replicas[r].step_ms);
    for (const auto& s : w.stages)
      std::printf("  stage %s %s: %s elements/s · busy %.0f%% · buffer %lld/%lld\n", s.path.c_str(), s.name.c_str(),
                  monitor::FormatCount(s.elements_per_s).c_str(), s.busy_pct, static_cast<long long>(s.buffer_fill),
                  static_cast<long long>(s.buffer_capacity));
  }
  std::fflush(stdout);
}

// ---- strata monitor URL -------------------------------------------------------------------

int RunUrl(const std::string& url, const Flags& f) {
  std::string api = url;
  if (api.find("/api/v1/monitor") == std::string::npos) {
    if (api.empty() || api.back() != '/') api += '/';
    api += "api/v1/monitor";
  }
  int64_t printed = 0, last_index = -2;
  for (;;) {
    auto res = monitor::HttpGet(api, f.timeout);
    if (!res.ok()) return Fail(kCmd, res.status().ToString());
    if (res->status != 200) return Fail(kCmd, "GET " + api + ": HTTP " + std::to_string(res->status));
    nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Fail(kCmd, "GET " + api + ": the answer is not a monitor's JSON");
    const bool running = j.value("running", false);
    std::string unit = "examples";
    if (j.contains("run") && j["run"].is_object()) unit = j["run"].value("example_unit", unit);
    if (j["latest"].is_null()) {
      if (!f.follow) {
        std::printf("%s\n", running ? "running: no window closed yet" : "waiting for the computation to start");
        return kExitOk;
      }
    } else {
      auto w = monitor::WindowFromJson(res->body);
      if (!w.ok()) return Fail(kCmd, "GET " + api + ": " + w.status().ToString());
      if (w->index != last_index) {
        last_index = w->index;
        if (f.json) {
          std::printf("%s\n", monitor::WindowToJson(*w).c_str());
          std::fflush(stdout);
        } else {
          PrintWindow(*w, unit, f.per_replica || !f.follow);
        }
        ++printed;
      }
    }
    if (!f.follow || (f.count > 0 && printed >= f.count)) break;
    if (!running && j.value("started", false)) {
      if (j.contains("report") && j["report"].is_object() && !f.json)
        std::printf("finished: %s, idle %.1f%%%s\n", j["report"].value("verdict", std::string()).c_str(),
                    j["report"].value("idle_pct", 0.0),
                    j["report"].value("slowest_stage", std::string()).empty()
                        ? ""
                        : (", slowest stage " + j["report"].value("slowest_stage", std::string())).c_str());
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(f.poll));
  }
  return kExitOk;
}

// ---- strata monitor EVENTFILE|DIR ---------------------------------------------------------

std::vector<std::string> EventFiles(const std::string& path, std::string* error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *error = "no such file or directory: " + path;
    return {};
  }
  if (!S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> files;
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d))
      if (record::IsEventFileName(e->d_name)) files.push_back(path + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) *error = "no event files (events.out.tfevents.*) in " + path;
  return files;
}

int RunEvents(const std::string& path, const Flags& f) {
  std::string error;
  const auto files = EventFiles(path, &error);
  if (files.empty()) return Fail(kCmd, error);
  // step -> tag -> value, for the monitor's tags only.
  std::map<int64_t, std::map<std::string, double>> rows;
  for (const auto& file : files) {
    auto reader = record::EventReader::Open(file);
    if (!reader.ok()) return Fail(kCmd, reader.status().ToString());
    record::Event e;
    Status st;
    while ((st = (*reader)->Next(&e)).ok()) {
      for (const auto& v : e.summary) {
        if (v.tag.rfind("monitor/", 0) != 0) continue;
        double value = 0;
        if (v.kind == record::SummaryValue::Kind::kSimpleValue) value = v.simple_value;
        else if (v.kind != record::SummaryValue::Kind::kTensor || !v.tensor.ScalarValue(&value)) continue;
        rows[e.step][v.tag.substr(8)] = value;
      }
    }
    if (!st.IsOutOfRange()) return Fail(kCmd, st.ToString());
  }
  if (rows.empty()) return Fail(kCmd, "no monitor/ scalars in " + path);
  if (!f.json) std::printf("%10s %8s %8s %14s %10s\n", "step", "matrix%", "idle%", "examples/s", "step ms");
  for (const auto& [step, tags] : rows) {
    auto get = [&](const char* k) {
      auto it = tags.find(k);
      return it == tags.end() ? 0.0 : it->second;
    };
    if (f.json) {
      nlohmann::json j = {{"step", step}};
      for (const auto& [k, v] : tags) j[k] = v;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%10lld %8.1f %8.1f %14s %10.1f\n", static_cast<long long>(step), get("matrix_unit_utilization"),
                  get("idle_time"), monitor::FormatCount(get("examples_per_second")).c_str(), get("step_time_ms"));
    }
  }
  return kExitOk;
}

// ---- strata monitor matmul ----------------------------------------------------------------

int RunMatmul(const Flags& f) {
  const int replicas = static_cast<int>(f.replicas > 0 ? f.replicas : UsableCores());
  if (f.n < 1 || f.n > 8192) return Fail(kCmd, "--n must be in [1, 8192]", kExitUsage);
  if (f.matmuls_per_step < 1 || f.matmuls_per_step > 100000) return Fail(kCmd, "--matmuls-per-step must be >= 1", kExitUsage);
  if (!(f.seconds > 0) || f.seconds > 86400) return Fail(kCmd, "--seconds must be in (0, 86400]", kExitUsage);
  if (f.map_cost_ms < 0) return Fail(kCmd, "--map-cost-ms must be >= 0", kExitUsage);
  if (f.map_parallelism < 1 || f.map_parallelism > 256) return Fail(kCmd, "--map-parallelism must be in [1, 256]", kExitUsage);
  if (replicas < 1 || replicas > 1024) return Fail(kCmd, "--replicas must be in [1, 1024]", kExitUsage);
  if (f.port > 65535) return Fail(kCmd, "--monitor-port must be in [0, 65535]", kExitUsage);

  monitor::MatmulWorkload work({.replicas = replicas,
                                .n = static_cast<int>(f.n),
                                .matmuls_per_step = static_cast<int>(f.matmuls_per_step),
                                .batch_size = static_cast<int>(f.batch_size),
                                .seconds = f.seconds,
                                .map_cost_ms = f.map_cost_ms,
                                .map_parallelism = static_cast<int>(f.map_parallelism),
                                .prefetch = static_cast<int>(f.prefetch)});
  auto mon = monitor::Monitor::Create({.interval_seconds = f.interval,
                                       .replicas = replicas,
                                       .dtype = DType::kF32,
                                       .peak_gflops_per_core = f.peak,
                                       .pipeline = work.PipelineSource()});
  if (!mon.ok()) return Fail(kCmd, mon.status().ToString(), mon.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure);
  (*mon)->AddReporter(std::make_unique<monitor::ConsoleReporter>(
      monitor::ConsoleReporterOptions{.sink = {}, .per_replica = f.per_replica, .print_report = false}));
  if (!f.jsonl.empty()) {
    auto r = monitor::JsonLinesReporter::Open(f.jsonl);
    if (!r.ok()) return Fail(kCmd, r.status().ToString());
    (*mon)->AddReporter(std::move(*r));
  }
  if (!f.logdir.empty()) {
    auto r = monitor::EventFileReporter::Create(f.logdir);
    if (!r.ok()) return Fail(kCmd, r.status().ToString());
    std::fprintf(stderr, "monitor: writing TensorBoard scalars to %s\n", (*r)->path().c_str());
    (*mon)->AddReporter(std::move(*r));
  }
  monitor::HttpServer* server = nullptr;
  if (f.port >= 0) {
    auto s = monitor::HttpServer::Start({.bind = f.bind, .port = static_cast<int>(f.port)});
    if (!s.ok()) return Fail(kCmd, s.status().ToString());
    server = s->get();
    std::fprintf(stderr, "monitor: serving %s\n", server->url().c_str());
    std::fflush(stderr);
    (*mon)->AddReporter(std::move(*s));  // the monitor owns it; it serves until the monitor is destroyed
  }
  if (!f.trace.empty()) {
    Status st = (*mon)->EnableTrace(f.trace);
    if (!st.ok()) return Fail(kCmd, st.ToString());
  }
  std::fprintf(stderr, "monitor: %d replica(s) x %lld GEMMs of %lld^3 per step for %.1f s, peak %.1f GFLOP/s per core (f32)\n",
               replicas, static_cast<long long>(f.matmuls_per_step), static_cast<long long>(f.n), f.seconds,
               (*mon)->info().peak_gflops_per_core);
  auto res = work.Run(mon->get());
  if (!res.ok()) return Fail(kCmd, res.status().ToString());
  const monitor::InputPipelineReport& report = res->report;
  std::printf("%s", monitor::FormatReportText(report).c_str());
  const double independent =
      100.0 * res->matrix_flops / (res->seconds * replicas * (*mon)->info().peak_gflops_per_core * 1e9);
  std::printf("check      %.3g FLOPs in %.2f s on %d replica(s): FLOPs / time / peak = %.1f%% (monitor %.1f%%)\n",
              res->matrix_flops, res->seconds, replicas, independent, report.utilization_pct);
  if (!f.report.empty()) {
    Status st = WriteFileAtomic(f.report, monitor::ReportToJson(report) + "\n");
    if (!st.ok()) return Fail(kCmd, st.ToString());
  }
  if (server && f.linger > 0) {
    std::fprintf(stderr, "monitor: the page stays up for %.0f s more\n", f.linger);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.linger));
  }
  return kExitOk;
}

int RunMonitor(const std::vector<std::string>& args) {
  Flags f;
  FlagParser flags(kCmd, "URL | EVENTFILE | LOGDIR | matmul [flags]",
                   "URL      prints the live numbers of a job started with --monitor-port (its /api/v1/monitor).\n"
                   "EVENTFILE or LOGDIR  prints the monitor/ scalars a finished run recorded, one line per step.\n"
                   "matmul   runs a pure matrix-multiply program (single-threaded f32 GEMMs, one thread per\n"
                   "         replica) fed by a synthetic input pipeline, under the monitor with every reporter.");
  flags.Bool("json", &f.json, "URL/EVENTFILE: print JSON (one object per window or step)");
  flags.Bool("follow", &f.follow, "URL: keep printing each new window until the job finishes");
  flags.Int("count", &f.count, "URL --follow: stop after this many windows");
  flags.Double("poll", &f.poll, "URL --follow: seconds between requests (default 1)");
  flags.Double("timeout", &f.timeout, "URL: seconds to wait for an answer (default 5)");
  flags.Bool("per-replica", &f.per_replica, "also print each replica's (and stage's) numbers");
  flags.Int("replicas", &f.replicas, "matmul: replica threads (default: usable cores)");
  flags.Int("n", &f.n, "matmul: GEMM size n for [n,n]x[n,n] (default 256)");
  flags.Int("matmuls-per-step", &f.matmuls_per_step, "matmul: GEMMs per step (default 8)");
  flags.Int("batch-size", &f.batch_size, "matmul: examples counted per step and replica (default 32)");
  flags.Double("seconds", &f.seconds, "matmul: run length (default 10)");
  flags.Double("map-cost-ms", &f.map_cost_ms, "matmul: artificial cost per batch of the slow_map stage (default 0)");
  flags.Int("map-parallelism", &f.map_parallelism, "matmul: threads of the slow_map stage (default 1)");
  flags.Int("prefetch", &f.prefetch, "matmul: batches the prefetch stage buffers (default 8)");
  flags.Double("monitor-interval", &f.interval, "seconds per window (default 10)");
  flags.Int("monitor-port", &f.port, "serve the live page on this port (0: any free port; default off)");
  flags.String("monitor-bind", &f.bind, "address the page listens on (default 127.0.0.1)");
  flags.Double("linger", &f.linger, "matmul: keep serving the page this many seconds after the run");
  flags.Double("peak-gflops", &f.peak, "peak GFLOP/s per core (default: calibrated, core/peak_flops.h)");
  flags.String("trace", &f.trace, "write a Chrome trace event file (Perfetto, chrome://tracing)");
  flags.String("logdir", &f.logdir, "write TensorBoard scalars into an event file in this directory");
  flags.String("jsonl", &f.jsonl, "write every window as a JSON line to this file");
  flags.String("report", &f.report, "write the input-pipeline report as JSON to this file");
  std::vector<std::string> pos;
  if (int rc = flags.Parse(args, &pos); rc >= 0) return rc;
  if (pos.size() != 1) return Fail(kCmd, "expected one URL, event file, log directory or 'matmul' (see 'strata monitor --help')", kExitUsage);
  if (!(f.interval > 0)) return Fail(kCmd, "--monitor-interval must be positive", kExitUsage);
  if (!(f.poll > 0) || !(f.timeout > 0)) return Fail(kCmd, "--poll and --timeout must be positive", kExitUsage);
  const std::string& what = pos[0];
  if (what == "matmul") return RunMatmul(f);
  if (what.rfind("http://", 0) == 0 || what.rfind("https://", 0) == 0) return RunUrl(what, f);
  return RunEvents(what, f);
}

const Registrar kMonitor({"monitor", "live or recorded utilization and idle %; `matmul` runs the monitor's check program",
                          RunMonitor});

}  // namespace
}  // namespace strata::cli
