#include "strata/monitor/console_reporter.h"

namespace strata::monitor {

ConsoleReporter::ConsoleReporter(ConsoleReporterOptions options) : options_(std::move(options)) {}

void ConsoleReporter::Emit(const std::string& line) {
  if (options_.sink) {
    options_.sink(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}

Status ConsoleReporter::OnStart(const RunInfo& info) {
  unit_ = info.example_unit;
  return Status::OK();
}

Status ConsoleReporter::OnWindow(const Window& w) {
  if (!w.peak_correction.empty()) Emit(w.peak_correction);
  Emit(FormatConsoleLine(w, unit_));
  if (options_.per_replica) {
    for (size_t r = 0; r < w.replicas.size(); ++r) {
      const ReplicaWindow& rw = w.replicas[r];
      char buf[160];
      std::snprintf(buf, sizeof(buf), "  replica %zu: matrix %.0f%% · idle %.0f%% · %s %s/s · step %.0f ms", r,
                    rw.utilization_pct, rw.idle_pct, FormatCount(rw.examples_per_s).c_str(), unit_.c_str(),
                    rw.step_ms);
      Emit(buf);
    }
  }
  return Status::OK();
}

Status ConsoleReporter::OnStop(const InputPipelineReport& report) {
  if (!options_.print_report) return Status::OK();
  std::string text = FormatReportText(report);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    Emit(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return Status::OK();
}

}  // namespace strata::monitor
