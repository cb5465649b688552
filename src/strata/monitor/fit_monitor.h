// The monitor of a Keras fit: a keras::StepObserver that, once the step is compiled, builds the
// utilization / idle monitor and the reporters its options ask for, and after the last step
// writes the input-pipeline report. keras knows only the observer interface; the command line
// (or any program) builds this and hands it to fit:
//
//   monitor::FitMonitor mon({.interval_seconds = 10, .tensorboard_dir = "logs/train"});
//   model->fit(train, {.epochs = 12, .observer = &mon});
//
// The one file of this layer that sees keras and data (docs/architecture.md).
#pragma once

#include <memory>
#include <string>

#include "strata/keras/step_observer.h"
#include "strata/monitor/monitor.h"

namespace strata::monitor {

struct FitMonitorOptions {
  double interval_seconds = 10;  // one window (console line, event scalars) per interval
  bool console = true;           // "matrix 61% · idle 3% · 1,840 img/s · step 69 ms" on stderr
  std::string tensorboard_dir;   // monitor/* scalars into event files here ("": none)
  std::string trace_path;        // Chrome trace event file ("": none)
  int http_port = -1;            // live page on 127.0.0.1:port (0: any free port; -1: none)
  std::string http_bind = "127.0.0.1";
  std::string report_json;       // the post-run input-pipeline report as JSON ("": none)
  // A multi-worker job's trace (MonitorOptions): this worker, and its clock at a moment every
  // worker shared; with a trace, each step's all-reduce timeline goes into it.
  int worker = 0;
  int64_t clock_sync_ns = 0, clock_offset_ns = 0;
};

class FitMonitor final : public keras::StepObserver {
 public:
  explicit FitMonitor(FitMonitorOptions options) : options_(std::move(options)) {}

  Status OnTrainBegin(const keras::FitStart& start) override;
  void InputWaitBegin(int replica) override { monitor_->InputWaitBegin(replica); }
  void InputWaitEnd(int replica) override { monitor_->InputWaitEnd(replica); }
  void StepBegin(int replica) override { monitor_->StepBegin(replica); }
  void StepEnd(int replica, double matrix_flops, int64_t examples, double executed_flops) override {
    monitor_->StepEnd(replica, matrix_flops, examples, executed_flops);
  }
  void AllReduceStep(const distribute::StepTiming& timing) override;
  void Pause() override { monitor_->Pause(); }
  void Resume() override { monitor_->Resume(); }
  Status OnTrainEnd() override;

  // The live page's address ("http://127.0.0.1:8080/") once OnTrainBegin has started it
  // (port 0 picks a free port: this says which); "" without http_port. Kept after the run.
  const std::string& url() const { return url_; }
  // Between a successful OnTrainBegin and OnTrainEnd (the hooks may be called only then).
  bool running() const { return monitor_ != nullptr; }

 private:
  FitMonitorOptions options_;
  std::string url_;
  std::unique_ptr<Monitor> monitor_;  // from OnTrainBegin to OnTrainEnd
};

}  // namespace strata::monitor
