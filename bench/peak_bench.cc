// Independent check of the calibrated peak (core/peak_flops.h) against straight-line inline
// assembly (core/peak_check.h), from the same run: the calibration measured now (not the cache),
// beside the independent loop on one core alone and on every usable core at once.
//
//   build/bench/peak_bench                        (every path of this CPU, f32 and bf16)
//   STRATA_MAX_ISA=avx2 build/bench/peak_bench    (the AVX2 calibration against AVX2 asm)
//
// `strata devices --check` compares the *cached* figure with the same independent loop.
#include <cstdio>

#include "strata/core/cpu.h"
#include "strata/core/peak_check.h"
#include "strata/core/peak_flops.h"

int main() {
  const std::vector<strata::IndependentPeak> independent = strata::MeasureIndependentPeaks();
  if (independent.empty()) {
    std::printf("peak_bench: this CPU has no AVX2; nothing to compare\n");
    return 0;
  }
  const strata::PeakFlops calibration = strata::MeasurePeakFlops();
  std::printf("CPU %s, ISA", strata::CpuModelName().c_str());
  for (const auto& n : strata::HostIsa().Names()) std::printf(" %s", n.c_str());
  std::printf(", %d core(s) at once\n", calibration.cores_measured);
  if (!calibration.note.empty()) std::printf("calibration note: %s\n", calibration.note.c_str());
  std::printf("%-5s %-15s %12s %14s %14s %10s\n", "unit", "kernel", "calibration", "asm all cores", "asm one core",
              "ratio");
  for (const auto& p : independent) {
    const bool bf16 = p.unit == "bf16";
    const std::string& used = bf16 ? calibration.bf16_kernel : calibration.f32_kernel;
    const double g = bf16 ? calibration.bf16_gflops_per_core : calibration.f32_gflops_per_core;
    if (used == p.kernel)
      std::printf("%-5s %-15s %12.1f %14.1f %14.1f %10.3f\n", p.unit.c_str(), p.kernel.c_str(), g, p.all_cores_gflops,
                  p.one_core_gflops, g / p.all_cores_gflops);
    else
      std::printf("%-5s %-15s %12s %14.1f %14.1f %10s\n", p.unit.c_str(), p.kernel.c_str(), "(not used)",
                  p.all_cores_gflops, p.one_core_gflops, "");
  }
  return 0;
}
