#include "strata/monitor/fit_monitor.h"

#include <cstdio>

#include "strata/core/file.h"
#include "strata/monitor/console_reporter.h"
#include "strata/monitor/event_reporter.h"
#include "strata/monitor/http_server.h"
#include "strata/monitor/input_report.h"

namespace strata::monitor {

Status FitMonitor::OnTrainBegin(const keras::FitStart& start) {
  MonitorOptions o;
  o.interval_seconds = options_.interval_seconds;
  o.replicas = start.replicas;
  o.dtype = start.bf16 ? DType::kBF16 : DType::kF32;
  o.example_unit = "img";
  o.initial_step = start.initial_step;
  o.worker = options_.worker;
  o.clock_sync_ns = options_.clock_sync_ns;
  o.clock_offset_ns = options_.clock_offset_ns;
  o.pipeline = [pipeline = start.pipeline] {
    std::vector<StageSample> out;
    for (const data::StageStatsSnapshot& s : pipeline())
      out.push_back({.name = s.name, .path = s.path, .elements = s.elements, .bytes = s.bytes, .busy_ns = s.busy_ns,
                     .blocked_upstream_ns = s.blocked_upstream_ns, .blocked_downstream_ns = s.blocked_downstream_ns,
                     .buffer_fill = s.buffer_fill, .buffer_capacity = s.buffer_capacity, .parallelism = s.parallelism});
    return out;
  };
  STRATA_ASSIGN_OR_RETURN(auto mon, Monitor::Create(o));
  if (options_.console) mon->AddReporter(std::make_unique<ConsoleReporter>());
  if (!options_.tensorboard_dir.empty()) {
    STRATA_ASSIGN_OR_RETURN(auto events, EventFileReporter::Create(options_.tensorboard_dir));
    mon->AddReporter(std::move(events));
  }
  if (options_.http_port >= 0) {
    STRATA_ASSIGN_OR_RETURN(auto server, HttpServer::Start({.bind = options_.http_bind, .port = options_.http_port}));
    url_ = server->url();
    std::fprintf(stderr, "monitor: %s\n", url_.c_str());
    mon->AddReporter(std::move(server));
  }
  if (!options_.trace_path.empty()) STRATA_RETURN_IF_ERROR(mon->EnableTrace(options_.trace_path));
  STRATA_RETURN_IF_ERROR(mon->Start());
  monitor_ = std::move(mon);
  return Status::OK();
}

void FitMonitor::AllReduceStep(const distribute::StepTiming& timing) {
  for (size_t b = 0; b < timing.buckets.size(); ++b) {
    const distribute::StepTiming::Bucket& k = timing.buckets[b];
    if (k.start_ns != 0 && k.finish_ns != 0)
      monitor_->AllReduceBucket(static_cast<int>(b), k.bytes, k.ready_ns, k.start_ns, k.finish_ns);
  }
  if (timing.backward_end_ns != 0 && timing.wait_end_ns != 0)
    monitor_->AllReduceWait(timing.backward_end_ns, timing.wait_end_ns);
}

Status FitMonitor::OnTrainEnd() {
  if (!monitor_) return Status::OK();
  std::unique_ptr<Monitor> mon = std::move(monitor_);
  STRATA_ASSIGN_OR_RETURN(InputPipelineReport report, mon->Stop());
  if (!options_.report_json.empty())
    STRATA_RETURN_IF_ERROR(WriteFileAtomic(options_.report_json, ReportToJson(report) + "\n"));
  return Status::OK();
}

}  // namespace strata::monitor
