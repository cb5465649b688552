// What fit tells whoever watches its steps, without knowing who listens: the utilization /
// idle monitor (monitor/fit_monitor.h) implements it; a profiler or a test could too.
//
// Threads: InputWait* and OnTrainBegin/Pause/Resume/OnTrainEnd come from the thread that
// called fit; StepBegin/StepEnd from each replica's own thread, concurrently.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <vector>

#include "strata/core/status.h"
#include "strata/data/dataset.h"
#include "strata/distribute/reducer.h"

namespace strata::keras {

struct FitStart {
  int replicas = 1;             // in this process
  bool bf16 = false;            // the step runs mixed_bfloat16
  int64_t initial_step = 0;     // global step of the first training step (a resumed run starts later)
  // The training pipeline's per-stage statistics now (valid until OnTrainEnd returns).
  std::function<std::vector<data::StageStatsSnapshot>()> pipeline;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Once the step is compiled, before the first step; an error ends fit.
  virtual Status OnTrainBegin(const FitStart& start) = 0;
  // Every replica waits while the next global batch is produced.
  virtual void InputWaitBegin(int replica) = 0;
  virtual void InputWaitEnd(int replica) = 0;
  // One replica's step: forward, backward, reduction and update; `matrix_flops` its program's
  // counted FLOPs, `executed_flops` what its kernels executed of them (Winograd: fewer),
  // `examples` its shard of the batch.
  virtual void StepBegin(int replica) = 0;
  virtual void StepEnd(int replica, double matrix_flops, int64_t examples, double executed_flops) = 0;
  // After a step whose gradient all-reduce across workers overlapped the backward pass: this
  // worker's timeline of it (fit's thread; valid during the call). The communication timeline.
  virtual void AllReduceStep(const distribute::StepTiming& timing) {}
  // Validation runs between Pause and Resume: no training steps.
  virtual void Pause() = 0;
  virtual void Resume() = 0;
  // After the last step; also, its status ignored, when fit ends early with an error. Once for
  // each OnTrainBegin that succeeded.
  virtual Status OnTrainEnd() = 0;
};

}  // namespace strata::keras

#pragma GCC visibility pop
