// strata devices: what this host offers a training job.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "strata/distribute/cluster_resolver.h"

namespace strata::cli {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "(none beyond x86-64)" : s;
}

int RunDevices(const std::vector<std::string>& args) {
  bool json = false, recalibrate = false;
  FlagParser flags("devices", "[--json] [--recalibrate]",
                   "Prints this host's usable cores (CPU affinity and cgroup quota honoured), ISA, memory and\n"
                   "the measured peak FLOP/s per core (f32 and bf16), cached per machine. The default number of\n"
                   "replicas is one per usable core.");
  flags.Bool("json", &json, "print one JSON object");
  flags.Bool("recalibrate", &recalibrate, "measure peak FLOP/s again instead of using the cached figure");
  if (int rc = flags.Parse(args); rc >= 0) return rc;

  auto spec = distribute::ClusterResolver::Local({.recalibrate = recalibrate});
  if (!spec.ok()) return Fail("devices", spec.status().ToString());
  const distribute::HostInfo& h = spec->host_info[0];
  if (json) {
    nlohmann::json j = {
        {"hosts", spec->hosts},
        {"replicas", spec->num_replicas()},
        {"cores", h.cores},
        {"cpu_ids", h.cpu_ids},
        {"cpu_model", h.cpu_model},
        {"hostname", h.hostname},
        {"isa", h.isa},
        {"memory_bytes", h.memory_bytes},
        {"peak_gflops_f32_per_core", h.peak.f32_gflops_per_core},
        {"peak_gflops_bf16_per_core", h.peak.bf16_gflops_per_core},
        {"peak_kernels", {{"f32", h.peak.f32_kernel}, {"bf16", h.peak.bf16_kernel}}},
        {"peak_from_cache", h.peak.from_cache},
    };
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("host      %s (%s)\n", h.hostname.c_str(), h.cpu_model.c_str());
  std::printf("hosts     %d\n", spec->hosts);
  std::printf("cores     %d usable\n", h.cores);
  std::printf("replicas  %d (one per usable core)\n", spec->num_replicas());
  std::printf("isa       %s\n", Join(h.isa).c_str());
  std::printf("memory    %.1f GiB\n", static_cast<double>(h.memory_bytes) / (1ull << 30));
  std::printf("peak f32  %.1f GFLOP/s per core (%s%s)\n", h.peak.f32_gflops_per_core, h.peak.f32_kernel.c_str(),
              h.peak.from_cache ? ", cached" : ", measured now");
  if (h.peak.bf16_gflops_per_core > 0)
    std::printf("peak bf16 %.1f GFLOP/s per core (%s)\n", h.peak.bf16_gflops_per_core, h.peak.bf16_kernel.c_str());
  else
    std::printf("peak bf16 none (no AVX512_BF16)\n");
  return kExitOk;
}

const Registrar kDevices({"devices", "this host's cores, ISA, memory and measured peak FLOP/s", RunDevices});

}  // namespace
}  // namespace strata::cli
