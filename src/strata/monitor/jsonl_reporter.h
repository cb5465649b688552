// JsonLinesReporter: one JSON object per line, flushed after each, so `tail -f` and scripts
// can follow a run:
//   {"type":"start","run":{...RunInfo...}}
//   {"type":"window","window":{...Window (window.h, WindowToJson)...}}
//   {"type":"report","report":{...InputPipelineReport (input_report.h)...}}
#pragma once

#include <memory>
#include <string>

#include "strata/core/file.h"
#include "strata/monitor/reporter.h"

namespace strata::monitor {

class JsonLinesReporter : public Reporter {
 public:
  // Creates or truncates `path` now, so a bad path fails before the run starts.
  static Result<std::unique_ptr<JsonLinesReporter>> Open(const std::string& path);
  Status OnStart(const RunInfo& info) override;
  Status OnWindow(const Window& w) override;
  Status OnStop(const InputPipelineReport& report) override;

 private:
  explicit JsonLinesReporter(std::unique_ptr<WritableFile> f) : file_(std::move(f)) {}
  Status Line(const std::string& json);
  std::unique_ptr<WritableFile> file_;
};

}  // namespace strata::monitor
