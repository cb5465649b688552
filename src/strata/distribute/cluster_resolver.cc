#include "strata/distribute/cluster_resolver.h"

#include <unistd.h>

#include "strata/core/cpu.h"

namespace strata::distribute {

Result<ClusterSpec> ClusterResolver::Local(Options options) {
  HostInfo h;
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) == 0) h.hostname = name;
  h.cpu_model = CpuModelName();
  h.cpu_ids = UsableCpuList();
  h.cores = UsableCores();
  h.isa = HostIsa().Names();
  h.memory_bytes = UsableMemoryBytes();
  STRATA_ASSIGN_OR_RETURN(h.peak, CalibratedPeakFlops(options.recalibrate));
  ClusterSpec spec;
  spec.hosts = 1;
  spec.replicas_per_host = h.cores;
  spec.host_info.push_back(std::move(h));
  return spec;
}

}  // namespace strata::distribute
