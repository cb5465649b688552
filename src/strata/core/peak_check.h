// An independent figure for the calibrated peak (core/peak_flops.h): the same multiply-adds
// written as straight-line inline assembly (no intrinsics, no compiler scheduling), a fixed
// count of iterations timed by the wall clock, best of 7 runs, on one core alone and on every
// usable core at once. It shares no kernel, sizing or timing code with the calibration, so a
// fault in either shows as a difference. `strata devices --check` and bench/peak_bench print it
// beside the cached figure; it is not a test (tests have no timing thresholds).
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>
#include <vector>

namespace strata {

struct IndependentPeak {
  std::string unit;               // "f32" or "bf16"
  std::string kernel;             // "avx512-fma", "avx2-fma", "avx512-bf16-dp": the calibration's names
  double one_core_gflops = 0;     // one core alone, the others idle
  double all_cores_gflops = 0;    // per core with every usable core running it (the best core)
  int cores = 0;                  // cores in the all-at-once run
};

// Every path this CPU has, STRATA_MAX_ISA honoured: AVX-512 f32 and bf16 (AVX512_BF16), AVX2
// f32 (on an AVX-512 CPU too, as the narrower path). Empty on a CPU without AVX2. About
// 0.6 s a path.
std::vector<IndependentPeak> MeasureIndependentPeaks();

}  // namespace strata

#pragma GCC visibility pop
