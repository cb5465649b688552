#include "strata/monitor/event_reporter.h"

namespace strata::monitor {

Result<std::unique_ptr<EventFileReporter>> EventFileReporter::Create(const std::string& dir,
                                                                     EventFileReporterOptions options) {
  STRATA_ASSIGN_OR_RETURN(auto writer, record::EventWriter::Create(dir, {.filename_suffix = options.filename_suffix}));
  return std::unique_ptr<EventFileReporter>(new EventFileReporter(std::move(writer), std::move(options)));
}

EventFileReporter::EventFileReporter(std::unique_ptr<record::EventWriter> own, EventFileReporterOptions options)
    : own_(std::move(own)), writer_(own_.get()), mu_(&own_mu_), options_(std::move(options)) {}

EventFileReporter::EventFileReporter(record::EventWriter* shared, std::mutex* mu, EventFileReporterOptions options)
    : writer_(shared), mu_(mu ? mu : &own_mu_), options_(std::move(options)) {}

Status EventFileReporter::OnWindow(const Window& w) {
  std::lock_guard<std::mutex> lock(*mu_);
  const int64_t step = w.step;
  const double t = w.wall_time;
  STRATA_RETURN_IF_ERROR(writer_->WriteScalar("monitor/matrix_unit_utilization", step, static_cast<float>(w.utilization_pct), t));
  STRATA_RETURN_IF_ERROR(writer_->WriteScalar("monitor/idle_time", step, static_cast<float>(w.idle_pct), t));
  STRATA_RETURN_IF_ERROR(writer_->WriteScalar("monitor/step_time_ms", step, static_cast<float>(w.step_ms), t));
  STRATA_RETURN_IF_ERROR(
      writer_->WriteScalar("monitor/examples_per_second", step, static_cast<float>(w.examples_per_s), t));
  // The peak the utilization divides by: a step in this curve is a correction (core/peak_flops.h).
  if (w.peak_gflops_per_core > 0)
    STRATA_RETURN_IF_ERROR(
        writer_->WriteScalar("monitor/peak_gflops_per_core", step, static_cast<float>(w.peak_gflops_per_core), t));
  if (options_.per_replica) {
    for (size_t r = 0; r < w.replicas.size(); ++r) {
      const std::string prefix = "monitor/replica_" + std::to_string(r) + "/";
      STRATA_RETURN_IF_ERROR(writer_->WriteScalar(prefix + "matrix_unit_utilization", step,
                                                  static_cast<float>(w.replicas[r].utilization_pct), t));
      STRATA_RETURN_IF_ERROR(
          writer_->WriteScalar(prefix + "idle_time", step, static_cast<float>(w.replicas[r].idle_pct), t));
    }
  }
  if (options_.stages) {
    for (const auto& s : w.stages) {
      const std::string name = s.path.empty() ? s.name : s.path + "_" + s.name;
      STRATA_RETURN_IF_ERROR(
          writer_->WriteScalar("monitor/input/" + name + "/busy_percent", step, static_cast<float>(s.busy_pct), t));
    }
  }
  return writer_->Flush();
}

Status EventFileReporter::OnStop(const InputPipelineReport& report) {
  std::lock_guard<std::mutex> lock(*mu_);
  if (!own_) return writer_->Flush();
  return own_->Close();
}

}  // namespace strata::monitor
