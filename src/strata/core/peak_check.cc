#include "strata/core/peak_check.h"

#include <algorithm>
#include <cstdint>

#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/pinned_threads.h"

namespace strata {
namespace {

// 16 independent accumulators (zmm0-15) and two sources (zmm16, zmm17), 16 instructions
// `insn` an iteration: straight-line code, one multiply-add chain a register.
#define STRATA_ZMM_CHAINS(insn)                                                                          \
  asm volatile(                                                                                          \
      "vxorps %%zmm0, %%zmm0, %%zmm0\n vxorps %%zmm1, %%zmm1, %%zmm1\n"                                  \
      "vxorps %%zmm2, %%zmm2, %%zmm2\n vxorps %%zmm3, %%zmm3, %%zmm3\n"                                  \
      "vxorps %%zmm4, %%zmm4, %%zmm4\n vxorps %%zmm5, %%zmm5, %%zmm5\n"                                  \
      "vxorps %%zmm6, %%zmm6, %%zmm6\n vxorps %%zmm7, %%zmm7, %%zmm7\n"                                  \
      "vxorps %%zmm8, %%zmm8, %%zmm8\n vxorps %%zmm9, %%zmm9, %%zmm9\n"                                  \
      "vxorps %%zmm10, %%zmm10, %%zmm10\n vxorps %%zmm11, %%zmm11, %%zmm11\n"                            \
      "vxorps %%zmm12, %%zmm12, %%zmm12\n vxorps %%zmm13, %%zmm13, %%zmm13\n"                            \
      "vxorps %%zmm14, %%zmm14, %%zmm14\n vxorps %%zmm15, %%zmm15, %%zmm15\n"                            \
      "vpxord %%zmm16, %%zmm16, %%zmm16\n vpxord %%zmm17, %%zmm17, %%zmm17\n"                            \
      "mov %0, %%rcx\n"                                                                                  \
      "1:\n"                                                                                             \
      insn " %%zmm16, %%zmm17, %%zmm0\n " insn " %%zmm16, %%zmm17, %%zmm1\n"                             \
      insn " %%zmm16, %%zmm17, %%zmm2\n " insn " %%zmm16, %%zmm17, %%zmm3\n"                             \
      insn " %%zmm16, %%zmm17, %%zmm4\n " insn " %%zmm16, %%zmm17, %%zmm5\n"                             \
      insn " %%zmm16, %%zmm17, %%zmm6\n " insn " %%zmm16, %%zmm17, %%zmm7\n"                             \
      insn " %%zmm16, %%zmm17, %%zmm8\n " insn " %%zmm16, %%zmm17, %%zmm9\n"                             \
      insn " %%zmm16, %%zmm17, %%zmm10\n " insn " %%zmm16, %%zmm17, %%zmm11\n"                           \
      insn " %%zmm16, %%zmm17, %%zmm12\n " insn " %%zmm16, %%zmm17, %%zmm13\n"                           \
      insn " %%zmm16, %%zmm17, %%zmm14\n " insn " %%zmm16, %%zmm17, %%zmm15\n"                           \
      "dec %%rcx\n"                                                                                      \
      "jnz 1b\n"                                                                                         \
      :                                                                                                  \
      : "r"(iters)                                                                                       \
      : "rcx", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10",  \
        "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "cc")

// vfmadd231ps: 16 lanes x 2 FLOPs an instruction.
__attribute__((target("avx512f"))) double AsmFma(int64_t iters) {
  STRATA_ZMM_CHAINS("vfmadd231ps");
  return static_cast<double>(iters) * 16 * 16 * 2;
}

// vdpbf16ps: 16 lanes x (2 multiplies + 2 adds) = 64 FLOPs an instruction.
__attribute__((target("avx512f,avx512bf16"))) double AsmBf16(int64_t iters) {
  STRATA_ZMM_CHAINS("vdpbf16ps");
  return static_cast<double>(iters) * 16 * 16 * 4;
}

#undef STRATA_ZMM_CHAINS

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

// Best of 7 wall-clock runs of a fixed count (counts below: about 0.04 s each on a Zen 5 core).
double BestByWallClock(double (*kernel)(int64_t), int64_t iters) {
  double best = 0;
  for (int r = 0; r < 7; ++r) {
    Stopwatch sw;
    const double flops = kernel(iters);
    best = std::max(best, flops / sw.ElapsedSeconds() * 1e-9);
  }
  return best;
}

IndependentPeak Measure(const char* unit, const char* name, double (*kernel)(int64_t), int64_t iters) {
  IndependentPeak p;
  p.unit = unit;
  p.kernel = name;
  const std::vector<int> cpus = UsableCoreList();
  p.cores = static_cast<int>(cpus.size());
  RunPinnedAtOnce({cpus[0]}, [](size_t) {}, [&](size_t) { p.one_core_gflops = BestByWallClock(kernel, iters); });
  std::vector<double> each(cpus.size());
  RunPinnedAtOnce(cpus, [](size_t) {}, [&](size_t i) { each[i] = BestByWallClock(kernel, iters); });
  p.all_cores_gflops = *std::max_element(each.begin(), each.end());
  return p;
}

}  // namespace

std::vector<IndependentPeak> MeasureIndependentPeaks() {
  const CpuIsa& isa = HostIsa();
  std::vector<IndependentPeak> out;
  if (isa.avx512f) out.push_back(Measure("f32", "avx512-fma", AsmFma, 16'000'000));
  if (isa.avx512_bf16) out.push_back(Measure("bf16", "avx512-bf16-dp", AsmBf16, 16'000'000));
  if (isa.avx2) out.push_back(Measure("f32", "avx2-fma", AsmFmaAvx2, 20'000'000));
  return out;
}

}  // namespace strata
