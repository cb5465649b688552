// Reducer: averages the replicas' gradient blocks of a step over every replica of every
// worker. It works on flat f32 buffers and knows nothing of models (flashlight's Reducer).
//
//   auto reducer = distribute::MakeReducer(strategy, {.grads = each_replicas_block, .n = n});
//   strategy.run([&](int r) {
//     ...forward and backward into each_replicas_block[r]...
//     return reducer->Reduce(r, sync);   // every replica; then block 0 holds the mean
//   });
//
// Two implementations:
// - plain: after the backward pass, a deterministic reduce-scatter over the local replicas
//   (replica r sums slice r in replica order), then replica 0 all-reduces the host mean
//   across workers and divides by the worker count;
// - bucketed (several workers, MakeReducer's `ready` given): the block is cut into buckets in
//   the order the backward pass finishes them, and each bucket's all-reduce starts while the
//   backward pass still runs (AfterKernel, called from the program's kernel hook).
// Both give the same bits: the in-host sums are the same sums in the same order.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/core/status.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

// What the replicas of one step share. Every replica makes the same sequence of barrier and
// collective calls even after an error, so none waits forever; a failure anywhere makes every
// replica skip the update.
struct StepSync {
  std::atomic<bool> failed{false};
  Status cross_host;  // the first cross-host failure (written by replica 0 only)
};

// [begin, end) of the gradient block is final after kernel `kernel` of every replica's
// program (-1: before the first). What backend::Program::gradient_ready() says.
struct GradientRange {
  int64_t begin, end;
  int kernel;
};

struct ReducerOptions {
  std::vector<float*> grads;  // [local replicas]: each replica's block; grads[0] receives the mean
  int64_t n = 0;              // elements in each block
  // For the bucketed reducer: when each part of the block is final, and the program's kernel
  // count. Empty: the plain reducer.
  std::vector<GradientRange> ready;
  int kernels = 0;
};

// How the gradient all-reduce ran against the backward pass, over the steps so far (the
// bucketed reducer's; the plain one starts nothing during the backward pass and reports zeros).
// Times are from the start of replica 0's program in each step.
struct ReducerStats {
  int64_t steps = 0;
  double backward_end_seconds = 0;  // summed over steps: when replica 0's backward pass ended
  double wait_end_seconds = 0;      // summed over steps: when the reduction ended
  // Bucket i of the step (start order): its f32 bytes, and when it was ready (every local
  // replica's gradient final and summed in-host), started and seen finished, summed over steps.
  struct Bucket {
    int64_t bytes = 0;
    double ready_seconds = 0, start_seconds = 0, finish_seconds = 0;
  };
  std::vector<Bucket> buckets;
  // Buckets started from the kernel hook while the backward pass ran, and after it ended.
  int64_t started_during_backward = 0, started_after_backward = 0;
};

// One step of the bucketed all-reduce on this worker, as its own clock saw it (NowNanos()):
// what a communication timeline draws (the trace's all-reduce track, docs/monitor.md) and what
// a simulator replays (bench/smpi/). Times are absolute; 0 where a moment did not happen.
struct StepTiming {
  int64_t start_ns = 0;         // replica 0's program began
  int64_t backward_end_ns = 0;  // every local replica's backward pass had ended (the step's barrier)
  int64_t wait_end_ns = 0;      // every bucket had finished: the reduction's end
  struct Bucket {
    int64_t bytes = 0;      // as f32 (a bf16 wire sends half)
    int64_t ready_ns = 0;   // every local replica's gradient final and summed in-host
    int64_t start_ns = 0;   // its all-reduce started (bucket order: after the buckets before it)
    int64_t finish_ns = 0;  // seen finished by a test (Collective::finished_ns)
  };
  std::vector<Bucket> buckets;  // in start order
};

class Reducer {
 public:
  virtual ~Reducer() = default;
  // Replica r's part of the step's reduction, called by every replica after its backward pass
  // (with sync.failed set where that replica failed). Returns when grads[0] holds the mean over
  // all replicas of all workers, unless sync.failed (then the block is left as it is and the
  // update must be skipped); a cross-host failure is recorded in sync.cross_host.
  virtual Status Reduce(int replica, StepSync& sync) = 0;

  // Overlap with the backward pass: the kernels after which replica r must call AfterKernel
  // ([kernels + 1], entry k + 1 for kernel k, entry 0 for "before the first"); empty: never.
  virtual std::vector<uint8_t> HookPoints(int replica) const { return {}; }
  virtual Status AfterKernel(int replica, int kernel) { return Status::OK(); }

  // Read between steps (fit's thread), never while a step runs.
  virtual ReducerStats stats() const { return {}; }
  // The last step's timeline (the bucketed reducer's, after a step that reduced); null where
  // nothing overlapped. Read between steps, as stats().
  virtual const StepTiming* last_step() const { return nullptr; }
};

// The bucketed reducer where the strategy has a collective that can overlap, options.ready
// is given and describes a layout it can cut (STRATA_ALLREDUCE_OVERLAP=0 turns it off);
// the plain one otherwise.
std::unique_ptr<Reducer> MakeReducer(Strategy& strategy, ReducerOptions options);

// Replica 0, after every replica's step: out[i] = the mean over the local replicas'
// inputs[q][i] (summed in replica order; `out` may alias inputs[0]), then over the workers.
// What the replicas' moving statistics go through. It divides by the replica count rather
// than multiplying by its reciprocal as Strategy::ReduceRange does: the moving statistics keep
// the bits they had before the reducer existed (checkpoints, fit against the custom loop).
Status MeanOverReplicas(Strategy& strategy, const std::vector<const float*>& inputs, float* out, int64_t n);

// Across workers: data[i] = the mean over workers of data[i] (a no-op for one worker). The
// one place the worker count divides.
Status MeanOverWorkers(Strategy& strategy, float* data, int64_t n);
// The division alone, after a started all-reduce has finished.
void DivideByWorkers(const Strategy& strategy, float* data, int64_t n);

}  // namespace strata::distribute

#pragma GCC visibility pop
