// Independent check of `strata devices`' calibrated peak: straight-line AVX-512 code in
// inline assembly (no compiler scheduling, no intrinsics), one core, best of several runs,
// printed beside Strata's own calibration from the same run.
//
//   build/bench/peak_bench            (prints both figures and their ratio, f32 and bf16)
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
  const auto& isa = strata::HostIsa();
  if (!isa.avx512f) {
    std::printf("peak_bench: this CPU has no AVX-512; nothing to compare\n");
    return 0;
  }
  strata::PeakFlops strata_peak = strata::MeasurePeakFlops();
  double asm_f32 = Best(AsmFma);
  std::printf("f32  strata calibration %7.1f GFLOP/s/core   straight-line asm %7.1f   ratio %.3f\n",
              strata_peak.f32_gflops_per_core, asm_f32, strata_peak.f32_gflops_per_core / asm_f32);
  if (isa.avx512_bf16) {
    double asm_bf16 = Best(AsmBf16);
    std::printf("bf16 strata calibration %7.1f GFLOP/s/core   straight-line asm %7.1f   ratio %.3f\n",
                strata_peak.bf16_gflops_per_core, asm_bf16, strata_peak.bf16_gflops_per_core / asm_bf16);
  }
  return 0;
}
