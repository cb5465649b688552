#include "strata/monitor/trace_writer.h"

#include "strata/monitor/json_util.h"

namespace strata::monitor {
namespace {

using nlohmann::json;

constexpr int kReplicaPid = 1;
constexpr int kStagePid = 2;
constexpr int kWindowPid = 3;
constexpr int kAllReducePid = 4;

double Micros(int64_t ns, int64_t start_ns) { return static_cast<double>(ns - start_ns) * 1e-3; }

json Meta(const char* what, int pid, int tid, const std::string& name) {
  json j = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) j["tid"] = tid;
  return j;
}

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto file, NewAppendingFile(path));
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(file)));
}

TraceWriter::~TraceWriter() {
  if (!finished_) (void)FlushBuffer();
}

Status TraceWriter::Emit(const std::string& obj) {
  buf_ += events_ == 0 ? "\n" : ",\n";
  buf_ += obj;
  ++events_;
  if (buf_.size() > (64u << 10)) return FlushBuffer();
  return Status::OK();
}

Status TraceWriter::FlushBuffer() {
  if (buf_.empty()) return Status::OK();
  Status st = file_->Append(buf_);
  buf_.clear();
  STRATA_RETURN_IF_ERROR(st);
  return file_->Flush();
}

Status TraceWriter::Begin(const RunInfo& info) {
  buf_ = "{\"traceEvents\":[";
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("process_name", kReplicaPid, -1, "strata replicas"))));
  STRATA_RETURN_IF_ERROR(Emit(Dump(json({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", kReplicaPid},
                                         {"args", {{"sort_index", 1}}}}))));
  for (int r = 0; r < info.replicas; ++r) {
    STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("thread_name", kReplicaPid, r, "replica " + std::to_string(r)))));
    STRATA_RETURN_IF_ERROR(Emit(Dump(json({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", kReplicaPid},
                                           {"tid", r}, {"args", {{"sort_index", r}}}}))));
  }
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("process_name", kStagePid, -1, "input pipeline stages"))));
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("process_name", kWindowPid, -1, "monitor windows"))));
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("thread_name", kWindowPid, 0, "windows"))));
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("process_name", kAllReducePid, -1, "gradient all-reduce"))));
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("thread_name", kAllReducePid, 0, "buckets"))));
  STRATA_RETURN_IF_ERROR(Emit(Dump(Meta("thread_name", kAllReducePid, 1, "wait after the backward pass"))));
  return FlushBuffer();
}

Status TraceWriter::AddClock(const RunInfo& info) {
  if (finished_) return Status::OK();
  STRATA_RETURN_IF_ERROR(Emit(Dump(json({{"ph", "M"}, {"name", "strata_clock"}, {"pid", kAllReducePid},
                                         {"args", {{"worker", info.worker}, {"trace_start_ns", info.trace_start_ns},
                                                   {"clock_sync_ns", info.clock_sync_ns}}}}))));
  return FlushBuffer();
}

Status TraceWriter::Add(const TraceEvent& e, int64_t start_ns) {
  if (finished_) return Status::OK();
  if (e.kind == TraceEvent::kBucket) {
    // Async begin/end: buckets in flight overlap, which one thread's complete events cannot.
    const std::string name = "bucket " + std::to_string(e.replica);
    json b = {{"ph", "b"}, {"name", name}, {"cat", "allreduce"}, {"id", e.replica}, {"pid", kAllReducePid}, {"tid", 0},
              {"ts", Micros(e.begin_ns, start_ns)},
              {"args", {{"bytes", e.bytes}, {"ready_ts", Micros(e.ready_ns, start_ns)},
                        {"queued_us", static_cast<double>(e.begin_ns - e.ready_ns) * 1e-3}}}};
    STRATA_RETURN_IF_ERROR(Emit(Dump(b)));
    return Emit(Dump(json({{"ph", "e"}, {"name", name}, {"cat", "allreduce"}, {"id", e.replica}, {"pid", kAllReducePid},
                           {"tid", 0}, {"ts", Micros(e.end_ns, start_ns)}})));
  }
  if (e.kind == TraceEvent::kAllReduceWait)
    return Emit(Dump(json({{"ph", "X"}, {"name", "all-reduce wait"}, {"cat", "allreduce"}, {"pid", kAllReducePid},
                           {"tid", 1}, {"ts", Micros(e.begin_ns, start_ns)},
                           {"dur", static_cast<double>(e.end_ns - e.begin_ns) * 1e-3}})));
  json j = {{"ph", "X"},
            {"name", e.kind == TraceEvent::kStep ? "step" : "input wait"},
            {"cat", e.kind == TraceEvent::kStep ? "step" : "input"},
            {"pid", kReplicaPid},
            {"tid", e.replica},
            {"ts", Micros(e.begin_ns, start_ns)},
            {"dur", static_cast<double>(e.end_ns - e.begin_ns) * 1e-3}};
  if (e.kind == TraceEvent::kStep) j["args"] = {{"matrix_flops", e.matrix_flops}, {"examples", e.examples}};
  return Emit(Dump(j));
}

Status TraceWriter::AddStageCounters(const std::vector<StageSample>& stages, int64_t now_ns, int64_t start_ns) {
  if (finished_) return Status::OK();
  for (const auto& s : stages) {
    const std::string key = s.path.empty() ? s.name : s.path + " " + s.name;
    Prev& p = prev_[key];
    json args = {{"buffer fill", s.buffer_fill}, {"parallelism", s.parallelism}};
    if (p.ns != 0 && now_ns > p.ns) {
      const double dt = static_cast<double>(now_ns - p.ns);
      args["busy cores"] = s.busy_ns >= p.busy_ns ? static_cast<double>(s.busy_ns - p.busy_ns) / dt : 0.0;
      args["elements/s"] = s.elements >= p.elements ? static_cast<double>(s.elements - p.elements) * 1e9 / dt : 0.0;
    }
    p = {now_ns, s.elements, s.busy_ns};
    STRATA_RETURN_IF_ERROR(Emit(Dump(json({{"ph", "C"}, {"name", key}, {"pid", kStagePid},
                                           {"ts", Micros(now_ns, start_ns)}, {"args", args}}))));
  }
  return FlushBuffer();
}

Status TraceWriter::AddWindow(const Window& w, int64_t start_ns) {
  if (finished_) return Status::OK();
  char name[96];
  std::snprintf(name, sizeof(name), "matrix %.0f%% · idle %.0f%%", w.utilization_pct, w.idle_pct);
  json j = {{"ph", "X"},
            {"name", name},
            {"cat", "window"},
            {"pid", kWindowPid},
            {"tid", 0},
            {"ts", w.start_seconds * 1e6},
            {"dur", w.seconds * 1e6},
            {"args",
             {{"window", w.index},
              {"utilization_pct", w.utilization_pct},
              {"idle_pct", w.idle_pct},
              {"step_ms", w.step_ms},
              {"examples_per_s", w.examples_per_s},
              {"step", w.step},
              {"peak_gflops_per_core", w.peak_gflops_per_core}}}};
  if (!w.peak_correction.empty()) j["args"]["peak_correction"] = w.peak_correction;
  STRATA_RETURN_IF_ERROR(Emit(Dump(j)));
  return FlushBuffer();
}

Status TraceWriter::Finish(const InputPipelineReport& report, int64_t dropped_events) {
  if (finished_) return Status::OK();
  finished_ = true;
  buf_ += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":";
  json other = {{"report", ReportJson(report)}, {"dropped_events", dropped_events}};
  buf_ += Dump(other);
  buf_ += "}\n";
  STRATA_RETURN_IF_ERROR(FlushBuffer());
  return file_->Close();
}

}  // namespace strata::monitor
