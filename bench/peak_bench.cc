// Independent check of `strata devices`' calibrated peak: straight-line AVX-512 (or AVX2) code in
// inline assembly (no compiler scheduling, no intrinsics), one core, best of several runs,
// printed beside Strata's own calibration from the same run.
//
//   build/bench/peak_bench                        (both figures and their ratio, f32 and bf16)
//   STRATA_MAX_ISA=avx2 build/bench/peak_bench    (the AVX2 calibration against AVX2 asm)
#include <cstdio>
#include <cstdint>

#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_flops.h"

namespace {

// 16 independent accumulators, 16 FMAs per iteration: 16 * 16 lanes * 2 FLOPs.
__attribute__((target("avx512f"))) double AsmFma(int64_t iters) {
  asm volatile(
      "vxorps %%zmm0, %%zmm0, %%zmm0\n"
      "vxorps %%zmm1, %%zmm1, %%zmm1\n"
      "vxorps %%zmm2, %%zmm2, %%zmm2\n"
      "vxorps %%zmm3, %%zmm3, %%zmm3\n"
      "vxorps %%zmm4, %%zmm4, %%zmm4\n"
      "vxorps %%zmm5, %%zmm5, %%zmm5\n"
      "vxorps %%zmm6, %%zmm6, %%zmm6\n"
      "vxorps %%zmm7, %%zmm7, %%zmm7\n"
      "vxorps %%zmm8, %%zmm8, %%zmm8\n"
      "vxorps %%zmm9, %%zmm9, %%zmm9\n"
      "vxorps %%zmm10, %%zmm10, %%zmm10\n"
      "vxorps %%zmm11, %%zmm11, %%zmm11\n"
      "vxorps %%zmm12, %%zmm12, %%zmm12\n"
      "vxorps %%zmm13, %%zmm13, %%zmm13\n"
      "vxorps %%zmm14, %%zmm14, %%zmm14\n"
      "vxorps %%zmm15, %%zmm15, %%zmm15\n"
      "vpxord %%zmm16, %%zmm16, %%zmm16\n"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n"
      "mov %0, %%rcx\n"
      "1:\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm0\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm1\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm2\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm3\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm4\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm5\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm6\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm7\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm8\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm9\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm10\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm11\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm12\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm13\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm14\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm15\n"
      "dec %%rcx\n"
      "jnz 1b\n"
      :
      : "r"(iters)
      : "rcx", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "cc");
  return static_cast<double>(iters) * 16 * 16 * 2;
}

// vdpbf16ps: 16 lanes x (2 multiplies + 2 adds) = 64 FLOPs per instruction.
__attribute__((target("avx512f,avx512bf16"))) double AsmBf16(int64_t iters) {
  asm volatile(
      "vxorps %%zmm0, %%zmm0, %%zmm0\n"
      "vxorps %%zmm1, %%zmm1, %%zmm1\n"
      "vxorps %%zmm2, %%zmm2, %%zmm2\n"
      "vxorps %%zmm3, %%zmm3, %%zmm3\n"
      "vxorps %%zmm4, %%zmm4, %%zmm4\n"
      "vxorps %%zmm5, %%zmm5, %%zmm5\n"
      "vxorps %%zmm6, %%zmm6, %%zmm6\n"
      "vxorps %%zmm7, %%zmm7, %%zmm7\n"
      "vxorps %%zmm8, %%zmm8, %%zmm8\n"
      "vxorps %%zmm9, %%zmm9, %%zmm9\n"
      "vxorps %%zmm10, %%zmm10, %%zmm10\n"
      "vxorps %%zmm11, %%zmm11, %%zmm11\n"
      "vxorps %%zmm12, %%zmm12, %%zmm12\n"
      "vxorps %%zmm13, %%zmm13, %%zmm13\n"
      "vxorps %%zmm14, %%zmm14, %%zmm14\n"
      "vxorps %%zmm15, %%zmm15, %%zmm15\n"
      "vpxord %%zmm16, %%zmm16, %%zmm16\n"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n"
      "mov %0, %%rcx\n"
      "1:\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm0\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm1\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm2\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm3\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm4\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm5\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm6\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm7\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm8\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm9\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm10\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm11\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm12\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm13\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm14\n"
      "vdpbf16ps %%zmm16, %%zmm17, %%zmm15\n"
      "dec %%rcx\n"
      "jnz 1b\n"
      :
      : "r"(iters)
      : "rcx", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "cc");
  return static_cast<double>(iters) * 16 * 16 * 4;
}

// AVX2: 12 independent accumulators (ymm0-11) and two sources (ymm12, ymm13): 16 registers.
__attribute__((target("avx2,fma"))) double AsmFmaAvx2(int64_t iters) {
  asm volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n"
      "vxorps %%ymm1, %%ymm1, %%ymm1\n"
      "vxorps %%ymm2, %%ymm2, %%ymm2\n"
      "vxorps %%ymm3, %%ymm3, %%ymm3\n"
      "vxorps %%ymm4, %%ymm4, %%ymm4\n"
      "vxorps %%ymm5, %%ymm5, %%ymm5\n"
      "vxorps %%ymm6, %%ymm6, %%ymm6\n"
      "vxorps %%ymm7, %%ymm7, %%ymm7\n"
      "vxorps %%ymm8, %%ymm8, %%ymm8\n"
      "vxorps %%ymm9, %%ymm9, %%ymm9\n"
      "vxorps %%ymm10, %%ymm10, %%ymm10\n"
      "vxorps %%ymm11, %%ymm11, %%ymm11\n"
      "vxorps %%ymm12, %%ymm12, %%ymm12\n"
      "vxorps %%ymm13, %%ymm13, %%ymm13\n"
      "mov %0, %%rcx\n"
      "1:\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n"
      "dec %%rcx\n"
      "jnz 1b\n"
      :
      : "r"(iters)
      : "rcx", "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11", "ymm12", "ymm13", "cc");
  return static_cast<double>(iters) * 12 * 8 * 2;
}

double Best(double (*kernel)(int64_t)) {
  const int64_t iters = 20'000'000;  // ~0.1 s per run at ~200 GFLOP/s
  double best = 0;
  for (int r = 0; r < 7; ++r) {
    strata::Stopwatch sw;
    double flops = kernel(iters);
    double g = flops / sw.ElapsedSeconds() * 1e-9;
    if (g > best) best = g;
  }
  return best;
}

}  // namespace

int main() {
  // Capped by STRATA_MAX_ISA, as the calibration is: STRATA_MAX_ISA=avx2 checks the AVX2 figure.
  const auto& isa = strata::HostIsa();
  if (!isa.avx2) {
    std::printf("peak_bench: this CPU has no AVX2; nothing to compare\n");
    return 0;
  }
  strata::PeakFlops strata_peak = strata::MeasurePeakFlops();
  double asm_f32 = isa.avx512f ? Best(AsmFma) : Best(AsmFmaAvx2);
  std::printf("CPU %s, calibration kernel %s\n", strata::CpuModelName().c_str(), strata_peak.f32_kernel.c_str());
  std::printf("f32  strata calibration %7.1f GFLOP/s/core   straight-line asm %7.1f   ratio %.3f\n",
              strata_peak.f32_gflops_per_core, asm_f32, strata_peak.f32_gflops_per_core / asm_f32);
  if (isa.avx512_bf16) {
    double asm_bf16 = Best(AsmBf16);
    std::printf("bf16 strata calibration %7.1f GFLOP/s/core   straight-line asm %7.1f   ratio %.3f\n",
                strata_peak.bf16_gflops_per_core, asm_bf16, strata_peak.bf16_gflops_per_core / asm_bf16);
  }
  return 0;
}
