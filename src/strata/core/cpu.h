// What this host's CPUs can do: instruction sets, usable cores, memory.
//
// "Usable" honours the process's CPU affinity mask (taskset, Slurm, MPI binding) and the
// cgroup CPU quota (containers), not only the number of cores the kernel reports.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/status.h"

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

// What Strata's own kernels may use: the detected ISA (cpuid through __builtin_cpu_supports
// plus /proc/cpuinfo for AMX), capped by STRATA_MAX_ISA when it is set. Detected once.
//
// STRATA_MAX_ISA=scalar|avx2|avx512 makes a wider machine behave as a narrower one for every
// hand-written kernel (optimizer updates, image kernels, Winograd, bf16 availability), so an
// AVX-512 machine tests the AVX2 and scalar paths. It does not cap oneDNN: set
// ONEDNN_MAX_CPU_ISA=AVX2 beside it to emulate an AVX2-only host completely.
const CpuIsa& HostIsa();
// The ISA the CPU reports, ignoring STRATA_MAX_ISA.
const CpuIsa& DetectedIsa();

// STRATA_MAX_ISA's value as "scalar", "avx2" or "avx512"; "" when unset. An unknown value is
// an error naming it (the CLI checks it at start; HostIsa() then applies no cap).
Result<std::string> MaxIsaSetting();
// `isa` limited to what `cap` ("scalar", "avx2", "avx512", "") allows; "avx512" is plain
// AVX-512, without AVX512_BF16 and AMX.
CpuIsa CapIsa(CpuIsa isa, std::string_view cap);

// The CPU model string ("AMD EPYC 9R45"), or "unknown".
std::string CpuModelName();

// CPU ids in this process's affinity mask, ascending.
std::vector<int> UsableCpuList();

// Cores this process may use: the affinity count, lowered by a cgroup CPU quota
// (rounded up: a quota of 1.5 CPUs allows 2 busy threads part of the time).
int UsableCores();

// The CPUs that many threads can keep busy at once: UsableCpuList(), its first UsableCores().
std::vector<int> UsableCoreList();

// Physical memory available to this process in bytes: the smaller of RAM and the
// cgroup memory limit.
int64_t UsableMemoryBytes();

// Parses a cgroup v2 "cpu.max" line ("max 100000" or "150000 100000") into CPUs.
// std::nullopt means no quota.
std::optional<double> ParseCgroupCpuMax(std::string_view text);

}  // namespace strata

#pragma GCC visibility pop
