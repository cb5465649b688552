// Cross-host collectives: one process per host (a worker), MPI underneath (OpenMPI, MPICH;
// launched with mpirun or srun). Replicas inside a host reduce through shared memory first
// (Strategy::ReduceScatter); only the host-reduced gradients cross the network.
//
// Liveness (docs/distribute.md, "Faults"): every worker sends its peers a heartbeat each second
// from a thread of its own; a collective waiting on a peer silent for `heartbeat_timeout_seconds`
// ends the job naming that peer (rank, host, pid) and the collective. Alive but slow peers keep
// answering, so a loaded machine is no fault. A collective that outlives max(`timeout_seconds`,
// 10 x the job's pace between collectives) while every peer answers (a deadlock) ends the job
// too. Either way the worker calls MPI_Abort with error code 3.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"

namespace strata::distribute {

// What crossed the network: the MPI path's overhead per step is reported from this.
struct CollectiveStats {
  int64_t all_reduce_calls = 0;
  int64_t all_reduce_bytes = 0;     // payload per worker (each worker sends and receives it), as f32
  int64_t wire_bytes = 0;           // the same as sent: half of it for gradient buckets sent as bf16
  double all_reduce_seconds = 0;    // wall time inside all-reduce, this worker (overlapped: in flight)
  // Of all_reduce_seconds, the time the caller was blocked waiting (the rest was hidden behind
  // the backward pass by StartAllReduceSum; equal without overlap).
  double all_reduce_wait_seconds = 0;
  // The longest any one collective waited, and the longest deadline the watchdog gave one
  // (what a fixed timeout would have had to allow).
  double longest_wait_seconds = 0;
  double longest_deadline_seconds = 0;
  double deadline_floor_seconds = 0;  // the floor in force (MpiOptions::timeout_seconds)
  bool heartbeats = false;  // peers' liveness came from heartbeats (MPI_THREAD_MULTIPLE)
  bool bf16_wire = false;   // gradient buckets travel as bf16 (MpiOptions::bf16_wire)
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place: data[i] = sum over workers of data[i].
  virtual Status AllReduceSum(float* data, int64_t n) = 0;
  virtual Status AllReduceSum(double* data, int64_t n) = 0;
  // Every worker's string, in rank order.
  virtual Result<std::vector<std::string>> AllGather(const std::string& mine) = 0;
  virtual Status Barrier() = 0;
  virtual CollectiveStats stats() const = 0;

  // Overlapped all-reduce: gradient buckets started while the backward pass still runs. They
  // travel on a channel of their own (their own MPI communicator), so when they start never
  // reorders them against the blocking collectives above; every worker starts the same
  // buckets in the same order. One thread at a time (the one that calls the others).
  // False when the MPI library cannot be called from the replica threads (thread level below
  // MPI_THREAD_SERIALIZED): then only the blocking AllReduceSum is used.
  virtual bool can_overlap() const = 0;
  // The bucket size the caller should cut its gradient block into (STRATA_ALLREDUCE_BUCKET_BYTES).
  virtual int64_t bucket_bytes() const = 0;
  // Starts data[0, n) = sum over workers, in place; data stays untouched until WaitAll. With
  // a bf16 wire the values are rounded to bf16 before they leave and each partial sum is
  // rounded again (every worker ends with the same bits).
  virtual Status StartAllReduceSum(float* data, int64_t n) = 0;
  // Lets started all-reduces advance (MPI moves data only inside MPI calls); never blocks.
  virtual Status Progress() = 0;
  // Blocks until every started all-reduce has finished (bounded by the timeout).
  virtual Status WaitAll() = 0;
  // After WaitAll, until the next StartAllReduceSum: when each all-reduce it waited for
  // finished (NowNanos(), in start order), as the first Progress or WaitAll test that found it
  // done saw it, so up to one testing interval late. Empty where the collective keeps no times.
  virtual const std::vector<int64_t>& finished_ns() const {
    static const std::vector<int64_t> kNone;
    return kNone;
  }
};

// True when this process was started by an MPI launcher (OpenMPI, MPICH/PMI, Slurm srun).
bool LaunchedUnderMpi();

struct MpiOptions {
  // The floor of a collective's deadline (scaled up with the job's pace); STRATA_COLLECTIVE_TIMEOUT.
  double timeout_seconds = 30;
  // A peer silent this long while a collective waits is taken for dead; STRATA_HEARTBEAT_TIMEOUT
  // (0: no heartbeats, the deadline alone).
  double heartbeat_timeout_seconds = 10;
  // A silent peer on another host is named at once, but the job is left to the launcher to end
  // (it must give that host up first; an MPI_Abort before would leave Open MPI's mpirun waiting
  // on the lost daemon) for this long, then ended by MPI_Abort; STRATA_LAUNCHER_GRACE.
  double launcher_grace_seconds = 30;
  // All-reduces go in buckets of this size, all in flight at once (MPI_Iallreduce), so MPI
  // can pipeline them instead of one huge message; STRATA_ALLREDUCE_BUCKET_BYTES overrides.
  int64_t bucket_bytes = 4 << 20;
  // Gradient buckets (StartAllReduceSum) sent as bf16: half the bytes on the wire, the sum
  // rounded to bf16 (8 significant bits) at each step of the reduction. Off by default
  // (docs/scaling.md has its accuracy cost); STRATA_ALLREDUCE_WIRE=bf16 turns it on. The
  // blocking AllReduceSum (batch-norm statistics, STRATA_ALLREDUCE_OVERLAP=0) stays f32.
  bool bf16_wire = false;
  // A rank waiting for an all-reduce yields its core between tests instead of spinning in
  // MPI_Waitall: for hosts whose ranks share cores (more ranks than cores), where it shortens
  // each exchange round; off by default, since with a core of its own the yields hand it to the
  // input pipeline's threads (docs/scaling.md has both measurements); STRATA_ALLREDUCE_WAIT=yield.
  bool yield_core_while_waiting = false;
};
// Initialises MPI once per process (MPI_THREAD_MULTIPLE: the heartbeat thread talks to MPI
// beside the main thread or replica 0, which never talk at the same time) and returns the
// world's collective. MPI_Finalize runs at exit, after the heartbeats stop.
Result<std::shared_ptr<Collective>> MpiCollective(MpiOptions options = {});

}  // namespace strata::distribute

#pragma GCC visibility pop
