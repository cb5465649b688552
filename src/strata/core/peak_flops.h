// Peak FLOP/s of one core, measured, not looked up.
//
// The calibration kernel runs independent chains of the widest multiply-add the core has
// (AVX-512 FMA for f32, AVX512_BF16 vdpbf16ps for bf16; AVX2 FMA or scalar otherwise) on one
// thread pinned to its core, long enough to be stable (a few hundred ms in all), and keeps the
// best of several repeats, timed by the thread's CPU time: a machine busy with other work
// stretches the wall clock but not what the core does while it runs the kernel, so a first
// calibration taken beside a build is not low for good (a note says the core was shared).
// The result is cached per machine under the user's cache directory, keyed by CPU model and
// ISA, because the monitor's utilization % divides by it on every report.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>

#include "strata/core/status.h"

namespace strata {

struct PeakFlops {
  double f32_gflops_per_core = 0;
  double bf16_gflops_per_core = 0;  // 0 when the core has no bf16 dot-product instruction
  std::string f32_kernel;           // "avx512-fma", "avx2-fma", "scalar"
  std::string bf16_kernel;          // "avx512-bf16-dp", or "" when none
  bool from_cache = false;
  std::string note;                 // how the measurement went, when worth saying ("" otherwise)
};

// Runs the calibration kernels now (on the calling thread).
PeakFlops MeasurePeakFlops();

// The cached figure for this machine, measuring (and caching) it when there is none or when
// `recalibrate` is set. Cache write failures are not fatal: the measured figure is returned.
Result<PeakFlops> CalibratedPeakFlops(bool recalibrate = false);

// Where cached figures live: $STRATA_CACHE_DIR, else $XDG_CACHE_HOME/strata, else ~/.cache/strata.
std::string UserCacheDir();

// The cache key of this machine: a hash of CPU model and ISA flags.
std::string MachineKey();

}  // namespace strata

#pragma GCC visibility pop
