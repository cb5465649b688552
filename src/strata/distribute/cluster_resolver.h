// ClusterResolver: what hardware this job runs on.
//
// This is the local half: this host's usable cores, ISA, memory and measured peak FLOP/s.
// The default number of replicas is one per usable core (a replica is a core). The
// multi-host half (MPI/Slurm environment, a cluster spec) adds hosts on top of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/peak_flops.h"
#include "strata/core/status.h"

namespace strata::distribute {

struct HostInfo {
  std::string hostname;
  std::string cpu_model;
  int cores = 1;                  // usable: affinity mask and cgroup quota honoured
  std::vector<int> cpu_ids;       // the affinity mask
  std::vector<std::string> isa;   // "AVX2", "AVX-512", "AVX512_BF16", "AMX-BF16"
  int64_t memory_bytes = 0;
  PeakFlops peak;
};

struct ClusterSpec {
  int hosts = 1;
  int replicas_per_host = 1;
  int num_replicas() const { return hosts * replicas_per_host; }
  std::vector<HostInfo> host_info;  // this host first
};

class ClusterResolver {
 public:
  struct Options {
    bool recalibrate = false;  // re-measure peak FLOP/s instead of using the cache
  };
  // Describes this host alone.
  static Result<ClusterSpec> Local(Options options);
  static Result<ClusterSpec> Local() { return Local(Options{}); }
};

}  // namespace strata::distribute
