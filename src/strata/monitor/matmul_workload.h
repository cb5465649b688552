// A pure matrix-multiply program with known FLOPs, run under a Monitor: the acceptance
// workload for the utilization number (it must agree with FLOPs / time / peak computed
// independently) and the demo behind `strata monitor matmul`.
//
// Each replica thread loops: take a batch from the synthetic input pipeline (inside
// InputWaitBegin/End), then run `matmuls_per_step` single-threaded f32 GEMMs of
// [n, n] x [n, n] with oneDNN's dnnl_sgemm (2 n^3 FLOPs each) between StepBegin/StepEnd.
//
// The synthetic pipeline has three stages, like a small tf.data pipeline:
//   "0.0.0 source"     makes an element (a few bytes, no cost)
//   "0.0 slow_map"     the map function: `map_cost_ms` of sleep per element, on
//                      `map_parallelism` threads (the artificial cost a starved pipeline has)
//   "0 prefetch"       a bounded buffer of `prefetch` batches the replicas take from
// With map_cost_ms = 0 the replicas never wait (the pipeline is not input-bound).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "strata/core/status.h"
#include "strata/monitor/monitor.h"

namespace strata::monitor {

struct MatmulWorkloadOptions {
  int replicas = 1;
  int n = 256;                 // GEMM size: [n, n] x [n, n]
  int matmuls_per_step = 8;
  int batch_size = 32;         // examples per step per replica (reported, not computed)
  double seconds = 2.0;        // run length (steps stop after this)
  double map_cost_ms = 0.0;    // per element of the slow_map stage; 0 = no input cost
  int map_parallelism = 1;
  int prefetch = 8;
};

// What the workload measured itself, independently of the monitor.
struct MatmulWorkloadResult {
  double seconds = 0;          // from Monitor::Start() to Monitor::Stop()
  double matrix_flops = 0;     // 2 n^3 x GEMMs run, all replicas
  int64_t steps = 0;           // all replicas
  double input_wait_seconds = 0;  // all replicas, timed by the workload's own clock reads
  double gemm_seconds = 0;     // all replicas
  InputPipelineReport report;  // what Monitor::Stop() returned
};

// Runs the workload: creates replica threads, calls monitor->Start(), runs for
// options.seconds, calls monitor->Stop(). The monitor must have been created with
// options.replicas replicas and, for the pipeline stages to show, with
// MatmulWorkload::PipelineSource() of the same object as its pipeline; so:
//   MatmulWorkload w(opts);
//   auto mon = Monitor::Create({.replicas = opts.replicas, .pipeline = w.PipelineSource()});
//   STRATA_ASSIGN_OR_RETURN(auto result, w.Run(mon->get()));
class MatmulWorkload {
 public:
  explicit MatmulWorkload(MatmulWorkloadOptions options);
  ~MatmulWorkload();
  MatmulWorkload(const MatmulWorkload&) = delete;
  MatmulWorkload& operator=(const MatmulWorkload&) = delete;

  PipelineStatsSource PipelineSource();
  Result<MatmulWorkloadResult> Run(Monitor* monitor);

  struct Pipeline;  // the synthetic input pipeline (matmul_workload.cc)

 private:
  MatmulWorkloadOptions options_;
  Pipeline* pipeline_;
};

// Runs one single-threaded f32 GEMM C = A x B, [n, n] each; returns its FLOPs (2 n^3).
// The buffers must hold n*n floats. Used by the workload and the tests.
Result<double> SingleThreadedSgemm(int n, const float* a, const float* b, float* c);

}  // namespace strata::monitor
