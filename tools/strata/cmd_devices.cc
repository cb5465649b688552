// strata devices: what this host offers a training job.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "strata/backend/compile.h"
#include "strata/distribute/cluster_resolver.h"
#include "strata/distribute/collective.h"

namespace strata::cli {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "(none beyond x86-64)" : s;
}

// The precisions a host trains in. This process asks its backend (which honours
// ONEDNN_MAX_CPU_ISA and STRATA_MAX_ISA); another worker's answer follows from its ISA list.
std::vector<std::string> Precisions(const distribute::HostInfo& h, bool this_host) {
  if (this_host) return backend::TrainablePrecisions();
  std::vector<std::string> v = {"f32"};
  if (std::find(h.isa.begin(), h.isa.end(), "AVX-512") != h.isa.end()) v.push_back("bf16");
  return v;
}

int RunDevices(const std::vector<std::string>& args) {
  bool json = false, recalibrate = false;
  FlagParser flags("devices", "[--json] [--recalibrate]",
                   "Prints this host's usable cores (CPU affinity and cgroup quota honoured), ISA, memory and\n"
                   "the measured peak FLOP/s per core (f32 and bf16), cached per machine. The default number of\n"
                   "replicas is one per usable core. Under mpirun/srun (or with STRATA_CLUSTER), the first worker\n"
                   "prints every worker's host.");
  flags.Bool("json", &json, "print one JSON object");
  flags.Bool("recalibrate", &recalibrate, "measure peak FLOP/s again instead of using the cached figure");
  if (int rc = flags.Parse(args); rc >= 0) return rc;

  // Under mpirun/srun every worker describes its host and the chief prints them all.
  auto resolver = distribute::ClusterResolver::FromEnvironment({.recalibrate = recalibrate});
  if (!resolver.ok()) return Fail("devices", resolver.status().ToString());
  if (Status s = resolver->connect(); !s.ok()) return Fail("devices", s.ToString());
  if (resolver->collective() && resolver->collective()->rank() != 0) return kExitOk;
  const distribute::ClusterSpec& spec = resolver->cluster_spec();
  const distribute::ClusterEnvironment& env = resolver->environment();
  int total_replicas = 0;
  for (const auto& h : spec.host_info) total_replicas += h.replicas;
  if (json) {
    nlohmann::json hosts = nlohmann::json::array();
    for (size_t i = 0; i < spec.host_info.size(); ++i) {
      hosts.push_back(nlohmann::json::parse(distribute::HostInfoJson(spec.host_info[i])));
      hosts.back()["precisions"] = Precisions(spec.host_info[i], i == 0);
    }
    // This host's fields at the top level (as for one host), then the cluster's.
    nlohmann::json j = hosts[0];
    j["hosts"] = spec.hosts;
    j["replicas"] = total_replicas;
    j["cluster_source"] = env.source;
    j["host_list"] = hosts;
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  if (spec.hosts > 1)
    std::printf("cluster   %d workers (%s), %d replicas in sync\n\n", spec.hosts, env.source.c_str(), total_replicas);
  for (size_t i = 0; i < spec.host_info.size(); ++i) {
    const distribute::HostInfo& x = spec.host_info[i];
    if (spec.hosts > 1) std::printf("worker %zu\n", i);
    std::printf("host      %s (%s)\n", x.hostname.c_str(), x.cpu_model.c_str());
    if (spec.hosts == 1) std::printf("hosts     1\n");
    std::printf("cores     %d usable\n", x.cores);
    std::printf("replicas  %d (one per usable core)\n", x.replicas);
    std::printf("isa       %s\n", Join(x.isa).c_str());
    std::printf("memory    %.1f GiB\n", static_cast<double>(x.memory_bytes) / (1ull << 30));
    std::printf("peak f32  %.1f GFLOP/s per core (%s%s)\n", x.peak.f32_gflops_per_core, x.peak.f32_kernel.c_str(),
                x.peak.from_cache ? ", cached" : ", measured now");
    const std::vector<std::string> precisions = Precisions(x, i == 0);
    const bool bf16 = precisions.size() > 1;
    std::printf("precision %s\n", bf16 ? (x.peak.bf16_gflops_per_core > 0 ? "f32 bf16 (native AVX512_BF16)"
                                                                           : "f32 bf16 (emulated by oneDNN on AVX-512)")
                                       : "f32 (bf16 needs AVX-512)");
    if (x.peak.bf16_gflops_per_core > 0)
      std::printf("peak bf16 %.1f GFLOP/s per core (%s)\n", x.peak.bf16_gflops_per_core, x.peak.bf16_kernel.c_str());
    else
      std::printf("peak bf16 none (no AVX512_BF16)\n");
    if (!x.peak.note.empty()) std::printf("note      %s\n", x.peak.note.c_str());
    if (i + 1 < spec.host_info.size()) std::printf("\n");
  }
  return kExitOk;
}

const Registrar kDevices({"devices", "this host's cores, ISA, memory and measured peak FLOP/s", RunDevices});

}  // namespace
}  // namespace strata::cli
