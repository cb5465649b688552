// ClusterResolver: what hardware this job runs on.
//
// The local half: this host's usable cores, ISA, memory and measured peak FLOP/s; the
// default number of replicas is one per usable core (a replica is a core). The cluster half
// reads the launch environment, in this order:
//   STRATA_CLUSTER   a JSON spec in the spirit of TF_CONFIG (see below)
//   OpenMPI          OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_RANK   (mpirun)
//   MPICH / PMI      PMI_SIZE / PMI_RANK                           (mpiexec.hydra)
//   Slurm            SLURM_NTASKS / SLURM_PROCID / SLURM_JOB_NODELIST (srun)
// Hosts talk over MPI (the engine HPC clusters already run); STRATA_CLUSTER describes the
// job and is checked against the launch, it does not replace mpirun/srun:
//   STRATA_CLUSTER='{"cluster": {"worker": ["node1", "node2"]},
//                    "task": {"type": "worker", "index": 0},
//                    "replicas_per_worker": 2}'
//
// As the seed's snippet: resolve, connect, initialize, then make the strategy.
//   auto resolver = distribute::ClusterResolver::FromEnvironment();   // Result<>
//   STRATA_RETURN_IF_ERROR(resolver->connect());     // MPI_Init, every host described
//   STRATA_RETURN_IF_ERROR(resolver->initialize());  // workers agree on replicas per host
//   auto strategy = distribute::MultiWorkerMirroredStrategy(*resolver);
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/peak_flops.h"
#include "strata/core/status.h"

namespace strata::distribute {

class Collective;

struct HostInfo {
  std::string hostname;
  std::string cpu_model;
  int cores = 1;                  // usable: affinity mask and cgroup quota honoured
  std::vector<int> cpu_ids;       // the affinity mask
  std::vector<std::string> isa;   // "AVX2", "AVX-512", "AVX512_BF16", "AMX-BF16"
  int64_t memory_bytes = 0;
  PeakFlops peak;
  int replicas = 0;               // replicas this worker runs (0: one per usable core)
};

struct ClusterSpec {
  int hosts = 1;
  int replicas_per_host = 1;
  int num_replicas() const { return hosts * replicas_per_host; }
  std::vector<HostInfo> host_info;  // this host first before connect(); in rank order after
};

// Where the cluster description came from, and this process's place in it.
struct ClusterEnvironment {
  std::string source = "local";  // local | STRATA_CLUSTER | OpenMPI | MPICH | Slurm
  int num_workers = 1;
  int worker_index = 0;
  // This worker's place among the workers on its host (OMPI_COMM_WORLD_LOCAL_RANK,
  // MPI_LOCALRANKID, SLURM_LOCALID): several workers on one host pin their replicas to
  // different cores.
  int local_worker_index = 0;
  bool launched_under_mpi = false;  // a launcher started this process: MPI can connect
  int replicas_per_worker = 0;      // from STRATA_CLUSTER; 0: one per usable core
  std::vector<std::string> worker_hosts;  // as listed (STRATA_CLUSTER, SLURM_JOB_NODELIST)
};

class ClusterResolver {
 public:
  struct Options {
    bool recalibrate = false;  // re-measure peak FLOP/s instead of using the cache
    int replicas = 0;          // replicas per worker; 0: STRATA_CLUSTER's, else one per core
  };
  // Describes this host alone.
  static Result<ClusterSpec> Local(Options options);
  static Result<ClusterSpec> Local() { return Local(Options{}); }

  // Reads the launch environment (see the top of this file). A malformed STRATA_CLUSTER, or
  // one that disagrees with the launcher (worker count, index), is an error naming both.
  static Result<ClusterResolver> FromEnvironment(Options options);
  static Result<ClusterResolver> FromEnvironment() { return FromEnvironment(Options{}); }
  // The same, from explicit variables (tests): name=value pairs instead of the process's.
  static Result<ClusterResolver> FromVariables(const std::vector<std::pair<std::string, std::string>>& vars,
                                               Options options);

  const ClusterEnvironment& environment() const { return env_; }
  // Joins the other workers (MPI) and gathers every host's description; a no-op for one
  // worker. An error when several workers are described but no launcher started them.
  Status connect();
  // Checks that every worker runs the same number of replicas (num_replicas_in_sync
  // assumes it) and names the workers that differ.
  Status initialize();
  // This host before connect(); every worker's host, in rank order, after.
  const ClusterSpec& cluster_spec() const { return spec_; }
  // The cross-host collective after connect() (null for one worker).
  std::shared_ptr<Collective> collective() const { return collective_; }
  int replicas_per_worker() const { return spec_.replicas_per_host; }

 private:
  ClusterEnvironment env_;
  ClusterSpec spec_;
  std::shared_ptr<Collective> collective_;
  bool connected_ = false;
};

// One line per host, as `strata devices` prints it; and the JSON form.
std::string HostInfoJson(const HostInfo& h);
Result<HostInfo> HostInfoFromJson(const std::string& json);

}  // namespace strata::distribute

#pragma GCC visibility pop
