// Reporter: where windows go. The monitor calls these on its own thread, in order:
// OnStart once, OnWindow for every closed window, OnStop once with the post-run report.
// Implementations: ConsoleReporter (console_reporter.h), JsonLinesReporter
// (jsonl_reporter.h), EventFileReporter (event_reporter.h, TensorBoard), HttpServer
// (http_server.h, the live page). A returned error is logged once and returned by Stop().
#pragma once

#include "strata/core/status.h"
#include "strata/monitor/input_report.h"
#include "strata/monitor/window.h"

namespace strata::monitor {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual Status OnStart(const RunInfo& info) { return Status::OK(); }
  virtual Status OnWindow(const Window& window) = 0;
  virtual Status OnStop(const InputPipelineReport& report) { return Status::OK(); }
};

}  // namespace strata::monitor
