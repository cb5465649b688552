// strata devices: what this host offers a training job.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "strata/backend/compile.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_check.h"
#include "strata/core/peak_flops.h"
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

// --check: the cached peaks beside an independent straight-line asm loop (core/peak_check.h).
// A difference over 10 % is worth a recalibration on a quiet machine; it is not an error.
int RunCheck(bool json, bool recalibrate) {
  auto cached = CalibratedPeakFlops(recalibrate);
  if (!cached.ok()) return Fail("devices", cached.status().ToString());
  const std::vector<IndependentPeak> independent = MeasureIndependentPeaks();
  nlohmann::json rows = nlohmann::json::array();
  if (!json) {
    std::printf("peak check on %s (%s): cached figure against an independent straight-line asm loop, "
                "%d core(s) at once\n", CpuModelName().c_str(), Join(HostIsa().Names()).c_str(), independent.empty() ? 0 : independent[0].cores);
    std::printf("%-5s %-15s %9s %15s %15s %10s\n", "unit", "kernel", "cached", "asm all cores", "asm one core",
                "cached vs");
  }
  std::vector<std::string> advice;
  for (const IndependentPeak& p : independent) {
    const bool bf16 = p.unit == "bf16";
    const bool used = (bf16 ? cached->bf16_kernel : cached->f32_kernel) == p.kernel;
    const double g = bf16 ? cached->bf16_gflops_per_core : cached->f32_gflops_per_core;
    // The calibration runs every core at once, as training does: compare like with like.
    const double diff = used && p.all_cores_gflops > 0 ? g / p.all_cores_gflops - 1 : 0;
    nlohmann::json row = {{"unit", p.unit},
                          {"kernel", p.kernel},
                          {"independent_all_cores_gflops_per_core", p.all_cores_gflops},
                          {"independent_one_core_gflops", p.one_core_gflops},
                          {"cores", p.cores},
                          {"in_use", used}};
    if (used) {
      row["cached_gflops_per_core"] = g;
      row["difference"] = diff;
    }
    rows.push_back(row);
    if (used && std::abs(diff) > 0.10)
      advice.push_back("the cached " + p.unit + " peak differs from the independent loop by more than 10 %: run "
                       "`strata devices --recalibrate` on a quiet machine");
    if (json) continue;
    if (used)
      std::printf("%-5s %-15s %9.1f %15.1f %15.1f %+9.1f%%\n", p.unit.c_str(), p.kernel.c_str(), g, p.all_cores_gflops,
                  p.one_core_gflops, 100 * diff);
    else
      std::printf("%-5s %-15s %9s %15.1f %15.1f %10s\n", p.unit.c_str(), p.kernel.c_str(), "-", p.all_cores_gflops,
                  p.one_core_gflops, "(narrower)");
  }
  if (json) {
    std::printf("%s\n", nlohmann::json({{"cpu_model", CpuModelName()},
                                        {"isa", HostIsa().Names()},
                                        {"peak_from_cache", cached->from_cache},
                                        {"peak_provisional", cached->provisional},
                                        {"peak_note", cached->note},
                                        {"check", rows}})
                             .dump()
                             .c_str());
    return kExitOk;
  }
  if (independent.empty()) std::printf("no AVX2 on this CPU: no independent loop to compare with\n");
  std::printf("cached    %s%s\n", cached->from_cache ? "from the cache" : "measured now",
              cached->provisional ? ", provisional (measured again at the next start)" : "");
  for (const std::string& a : advice) std::printf("advice    %s\n", a.c_str());
  return kExitOk;
}

int RunDevices(const std::vector<std::string>& args) {
  bool json = false, recalibrate = false, check = false;
  FlagParser flags("devices", "[--json] [--recalibrate] [--check]",
                   "Prints this host's usable cores (CPU affinity and cgroup quota honoured), ISA, memory and\n"
                   "the measured peak FLOP/s per core (f32 and bf16), cached per machine. The default number of\n"
                   "replicas is one per usable core. Under mpirun/srun (or with STRATA_CLUSTER), the first worker\n"
                   "prints every worker's host.");
  flags.Bool("json", &json, "print one JSON object");
  flags.Bool("recalibrate", &recalibrate, "measure peak FLOP/s again instead of using the cached figure");
  flags.Bool("check", &check,
             "compare the cached peaks with an independent straight-line asm FMA loop (this host only)");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (check) return RunCheck(json, recalibrate);

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
    std::printf("peak f32  %.1f GFLOP/s per core (%s%s%s)\n", x.peak.f32_gflops_per_core, x.peak.f32_kernel.c_str(),
                x.peak.from_cache ? ", cached" : ", measured now", x.peak.provisional ? ", provisional" : "");
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
