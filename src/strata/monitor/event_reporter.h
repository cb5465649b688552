// EventFileReporter: the monitor's numbers as TensorBoard scalars, in the run's event files
// next to loss and accuracy (record/event.h writes the file; TensorBoard reads all event
// files of a run directory as one run).
//
// Per window, at step = Window::step and wall_time = Window::wall_time:
//   monitor/matrix_unit_utilization       %, all replicas
//   monitor/idle_time                     %, all replicas
//   monitor/step_time_ms                  wall time per step
//   monitor/examples_per_second           all replicas
//   monitor/replica_<r>/matrix_unit_utilization, monitor/replica_<r>/idle_time   (per_replica)
//   monitor/input/<stage>/busy_percent    own work of each pipeline stage, % of one core (stages)
// Scalars are written as simple_value, like the Keras event files in testdata/real.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "strata/monitor/reporter.h"
#include "strata/record/event.h"

namespace strata::monitor {

struct EventFileReporterOptions {
  bool per_replica = true;
  bool stages = true;
  // Suffix of an event file the reporter creates itself (TensorFlow 2 uses ".v2").
  std::string filename_suffix = ".v2";
};

class EventFileReporter : public Reporter {
 public:
  // Creates its own event file in `dir` (which must exist).
  static Result<std::unique_ptr<EventFileReporter>> Create(const std::string& dir,
                                                           EventFileReporterOptions options = {});
  // Writes into the training loop's writer (not owned); `mu` guards it, since the monitor
  // writes from its own thread. The caller keeps both alive until Monitor::Stop() returns.
  EventFileReporter(record::EventWriter* shared, std::mutex* mu, EventFileReporterOptions options = {});

  Status OnWindow(const Window& w) override;
  Status OnStop(const InputPipelineReport& report) override;
  // The file written (own or shared).
  const std::string& path() const { return writer_->path(); }

 private:
  EventFileReporter(std::unique_ptr<record::EventWriter> own, EventFileReporterOptions options);
  std::unique_ptr<record::EventWriter> own_;
  record::EventWriter* writer_;
  std::mutex own_mu_;
  std::mutex* mu_;
  EventFileReporterOptions options_;
};

}  // namespace strata::monitor
