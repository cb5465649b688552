// Whether bf16 (mixed_bfloat16) must run on this machine, decided apart from the code under
// test: from the kernel's CPU flags (/proc/cpuinfo) and the ISA caps in the environment, never
// from backend::PrecisionSupported. oneDNN 2.6 runs bf16 on avx512_core (AVX-512 F, BW, VL,
// DQ): natively with AVX512_BF16 or AMX, emulated without. So a test that branches on bf16
// can fail both ways: bf16 refused where it must run, or run where it cannot.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace strata::testing {

inline bool CpuFlagsHave(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

inline bool Bf16MustRun() {
  for (const char* f : {"avx512f", "avx512bw", "avx512vl", "avx512dq"})
    if (!CpuFlagsHave(f)) return false;
  // A cap below AVX-512 (the "avx2:" copies of the unit tests, or a user's setting).
  const char* onednn = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (onednn != nullptr && *onednn != 0) {
    const std::string v = onednn;
    if (v.rfind("AVX512_CORE", 0) != 0 && v != "ALL") return false;
  }
  const char* strata = std::getenv("STRATA_MAX_ISA");
  if (strata != nullptr && (std::string(strata) == "avx2" || std::string(strata) == "scalar")) return false;
  return true;
}

}  // namespace strata::testing
