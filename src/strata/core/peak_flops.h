// Peak FLOP/s of one core, measured, not looked up; cached per machine; corrected when a run
// proves it low.
//
// Calibration. The kernel runs independent chains of the widest multiply-add the core has
// (AVX-512 FMA for f32, AVX512_BF16 vdpbf16ps for bf16; AVX2 FMA or scalar otherwise) on every
// usable core at once, one pinned thread a core, as training uses them (two busy vCPUs may be
// one physical core's two threads, and then each gets less than either alone). Each core keeps
// the best of several short runs, timed by the thread's CPU time (a busy machine stretches the
// wall clock, not what the core does while it runs the kernel); the figure is the best core's.
// Three things can still make the figure low, and each is checked:
//   shared    a core's wall clock ran slower than its CPU time (another thread had the core);
//   stolen    /proc/stat's steal time grew on the measured cores (the hypervisor ran another VM);
//   disagree  the runs do not confirm the best one, or the cores differ by more than 10 %.
// Any of them marks the figure provisional, says so in one line (PeakFlops::note), and the next
// start measures again (about 0.3 s); a start whose cache is not provisional measures nothing.
//
// Self-correction. A peak is an upper bound: when the FLOPs the kernels executed in a window
// (a Winograd convolution counts the multiplies it does, not the direct count) beat the peak in
// use by more than the window's noise, the peak is wrong. CorrectPeak re-measures it, keeps the
// larger of that and the observed rate, and caches it (provisional); the monitor and
// `strata bench-step` call it and print its line. Figures are never clamped to 100 %.
//
// The cache is one JSON file per machine under the user's cache directory, keyed by CPU model
// and ISA (docs/monitor.md, "The peak").
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <optional>
#include <string>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/status.h"

namespace strata {

struct PeakFlops {
  double f32_gflops_per_core = 0;
  double bf16_gflops_per_core = 0;  // 0 when the core has no bf16 dot-product instruction
  std::string f32_kernel;           // "avx512-fma", "avx2-fma", "scalar"
  std::string bf16_kernel;          // "avx512-bf16-dp", or "" when none
  bool from_cache = false;
  // The figure may be low (cores shared, time stolen, runs disagreeing, or raised to a rate a
  // run observed): the next start measures it again.
  bool provisional = false;
  int cores_measured = 0;           // cores that ran the calibration at once (0: from a cache without it)
  std::string note;                 // how the measurement went, when worth saying ("" otherwise)
};

// Runs the calibration kernels now, on every usable core at once (the calling thread waits).
PeakFlops MeasurePeakFlops();

// The cached figure for this machine. Measures (and caches) it when there is none, when the
// cached one is provisional (keeping the larger figure unless this measurement is clean), or
// when `recalibrate` is set. Cache write failures are not fatal: the measured figure is returned.
Result<PeakFlops> CalibratedPeakFlops(bool recalibrate = false);

// True when `observed_gflops` beats `peak_gflops` by more than the relative `noise`.
inline bool BeatsPeak(double observed_gflops, double peak_gflops, double noise) {
  return peak_gflops > 0 && observed_gflops > peak_gflops * (1 + noise);
}

struct PeakCorrection {
  DType dtype = DType::kF32;
  double was_gflops = 0;         // the peak in use
  double observed_gflops = 0;    // the executed rate of one core that beat it
  double remeasured_gflops = 0;  // the calibration kernel, run again now on this thread
  double gflops = 0;             // the corrected peak: max(observed, remeasured)
  std::string line;              // one line saying so, for the console
};

// Corrects the cached peak of `dtype`'s unit (kF32 or kBF16) after a run executed
// `observed_gflops` per core against `was_gflops` in use: re-measures it now on the caller's
// core (a pinned thread timed by CPU time, so work beside it costs little accuracy), keeps
// the larger of that and the observed rate, and writes the cache marked provisional, with the
// observed rate kept as a floor for later measurements. A cache that cannot be written is not
// an error (the line says so).
Result<PeakCorrection> CorrectPeak(DType dtype, double was_gflops, double observed_gflops);

// One core's rates over a run or a window.
struct RunRates {
  double executed_gflops = 0;  // FLOPs the kernels executed per second (KernelInfo::ExecutedMatrixFlops)
  double counted_gflops = 0;   // the direct count per second, what utilization % quotes
  double noise = 0.05;         // relative uncertainty of both
};

// What a run's rates say about the peak in use (`peak_gflops`, of `dtype`'s unit), for the
// monitor and `strata bench-step`:
//   - an executed rate above the peak (beyond the noise) proves it low: CorrectPeak;
//   - a counted rate above it only raises a doubt (a Winograd convolution counts 4x the products
//     it executes), settled once a run (`*doubt_settled` set) by measuring the unit again now:
//     a measurement above the peak proves it low as well, and corrects it.
// Returns the correction made, or nullopt when the rates prove nothing.
Result<std::optional<PeakCorrection>> CheckPeak(DType dtype, double peak_gflops, const RunRates& rates,
                                                bool* doubt_settled);

// Where cached figures live: $STRATA_CACHE_DIR, else $XDG_CACHE_HOME/strata, else ~/.cache/strata.
std::string UserCacheDir();

// The cache key of this machine: a hash of CPU model and ISA flags.
std::string MachineKey();

// The cache file of this machine's peak.
std::string PeakCachePath();

// Sums the steal column of /proc/stat's per-CPU lines ("cpuN user nice system idle iowait irq
// softirq steal ...") for `cpus`, in clock ticks; CPUs without a line count 0.
int64_t StealTicks(const std::string& proc_stat, const std::vector<int>& cpus);

}  // namespace strata

#pragma GCC visibility pop
