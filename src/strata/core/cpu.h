// What this host's CPUs can do: instruction sets, usable cores, memory.
//
// "Usable" honours the process's CPU affinity mask (taskset, Slurm, MPI binding) and the
// cgroup CPU quota (containers), not only the number of cores the kernel reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct CpuIsa {
  bool sse42 = false;
  bool avx2 = false;        // with FMA3
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;    // AMX tiles with bf16 (Sapphire Rapids and later)
  bool amx_int8 = false;
  // The names of the extensions present, in the order above ("AVX2", "AVX-512", ...).
  std::vector<std::string> Names() const;
};

// Detected once (cpuid through __builtin_cpu_supports plus /proc/cpuinfo for AMX).
const CpuIsa& HostIsa();

// The CPU model string ("AMD EPYC 9R45"), or "unknown".
std::string CpuModelName();

// CPU ids in this process's affinity mask, ascending.
std::vector<int> UsableCpuList();

// Cores this process may use: the affinity count, lowered by a cgroup CPU quota
// (rounded up: a quota of 1.5 CPUs allows 2 busy threads part of the time).
int UsableCores();

// Physical memory available to this process in bytes: the smaller of RAM and the
// cgroup memory limit.
int64_t UsableMemoryBytes();

// Parses a cgroup v2 "cpu.max" line ("max 100000" or "150000 100000") into CPUs.
// std::nullopt means no quota.
std::optional<double> ParseCgroupCpuMax(std::string_view text);

}  // namespace strata
