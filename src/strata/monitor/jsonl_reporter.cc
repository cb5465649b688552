#include "strata/monitor/jsonl_reporter.h"

#include "strata/monitor/json_util.h"

namespace strata::monitor {

using nlohmann::json;

Result<std::unique_ptr<JsonLinesReporter>> JsonLinesReporter::Open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto f, NewAppendingFile(path));
  return std::unique_ptr<JsonLinesReporter>(new JsonLinesReporter(std::move(f)));
}

Status JsonLinesReporter::Line(const std::string& j) {
  STRATA_RETURN_IF_ERROR(file_->Append(j + "\n"));
  return file_->Flush();
}

Status JsonLinesReporter::OnStart(const RunInfo& info) {
  return Line(Dump(json{{"type", "start"}, {"run", RunInfoJson(info)}}));
}

Status JsonLinesReporter::OnWindow(const Window& w) {
  return Line(Dump(json{{"type", "window"}, {"window", WindowJson(w)}}));
}

Status JsonLinesReporter::OnStop(const InputPipelineReport& report) {
  STRATA_RETURN_IF_ERROR(Line(Dump(json{{"type", "report"}, {"report", ReportJson(report)}})));
  return file_->Close();
}

}  // namespace strata::monitor
