#include "strata/core/peak_flops.h"

#include <immintrin.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/file.h"
#include "strata/core/pinned_threads.h"

namespace strata {
namespace {

// Each kernel runs `iters` rounds of kChains independent multiply-adds and returns the
// FLOPs done. Chains are independent so that the FMA latency (4 cycles) is hidden behind
// the two FMA pipes: 2 pipes x 4 cycles needs >= 8 chains; 16 leaves room.
constexpr int kChains = 16;

__attribute__((target("avx512f"))) double Avx512FmaKernel(int64_t iters, float* sink) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * c);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  *sink = out[0];
  return static_cast<double>(iters) * kChains * 16 * 2;
}

// AVX2 has 16 ymm registers, not 32: 16 chains plus the two constants would spill to the
// stack and measure loads and stores as well. 12 chains + 2 constants fit and still cover
// the 8 multiply-adds in flight.
constexpr int kAvx2Chains = 12;

__attribute__((target("avx2,fma"))) double Avx2FmaKernel(int64_t iters, float* sink) {
  __m256 acc[kAvx2Chains];
  for (int c = 0; c < kAvx2Chains; ++c) acc[c] = _mm256_set1_ps(0.001f * c);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kAvx2Chains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  float out[8];
  __m256 s = acc[0];
  for (int c = 1; c < kAvx2Chains; ++c) s = _mm256_add_ps(s, acc[c]);
  _mm256_storeu_ps(out, s);
  *sink = out[0];
  return static_cast<double>(iters) * kAvx2Chains * 8 * 2;
}

double ScalarKernel(int64_t iters, float* sink) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = 0.001f * c;
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : acc) s += v;
  *sink = s;
  return static_cast<double>(iters) * kChains * 2;
}

// vdpbf16ps: for each of 16 f32 lanes, acc += a[2i]*b[2i] + a[2i+1]*b[2i+1]: 64 FLOPs.
__attribute__((target("avx512f,avx512bf16"))) double Avx512Bf16Kernel(int64_t iters, float* sink) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * c);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  *sink = out[0];
  return static_cast<double>(iters) * kChains * 16 * 4;
}

double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

using Kernel = double (*)(int64_t, float*);

// The multiply-add kernel of a unit on this CPU (STRATA_MAX_ISA honoured), or none.
struct UnitKernel {
  Kernel fn = nullptr;
  std::string name;
};

UnitKernel KernelFor(DType dtype, const CpuIsa& isa) {
  if (dtype == DType::kBF16) {
    if (isa.avx512_bf16) return {Avx512Bf16Kernel, "avx512-bf16-dp"};
    return {};
  }
  if (isa.avx512f) return {Avx512FmaKernel, "avx512-fma"};
  if (isa.avx2) return {Avx2FmaKernel, "avx2-fma"};
  return {ScalarKernel, "scalar"};
}

// The iteration count that makes one run of `kernel` last about `seconds` of CPU time.
int64_t SizeRun(Kernel kernel, double seconds, float* sink) {
  int64_t iters = 1 << 14;
  for (;;) {
    const double c0 = ThreadCpuSeconds();
    kernel(iters, sink);
    const double t = ThreadCpuSeconds() - c0;
    if (t > 0.01) return static_cast<int64_t>(static_cast<double>(iters) * seconds / t) + 1;
    iters *= 4;
  }
}

// One core's runs of a kernel: each run's GFLOP/s by the thread's CPU time and by the wall clock.
struct CoreRuns {
  int cpu = -1;
  std::vector<double> by_cpu, by_wall;
  double best_cpu() const { return by_cpu.empty() ? 0 : *std::max_element(by_cpu.begin(), by_cpu.end()); }
  double best_wall() const { return by_wall.empty() ? 0 : *std::max_element(by_wall.begin(), by_wall.end()); }
  // Runs within 5 % of the best: one alone does not confirm it.
  int confirming() const {
    const double b = best_cpu();
    return static_cast<int>(std::count_if(by_cpu.begin(), by_cpu.end(), [b](double g) { return g >= 0.95 * b; }));
  }
};

void TimedRuns(Kernel kernel, int64_t iters, int repeats, float* sink, CoreRuns* out) {
  for (int r = 0; r < repeats; ++r) {
    Stopwatch sw;
    const double c0 = ThreadCpuSeconds();
    const double flops = kernel(iters, sink);
    const double cpu = ThreadCpuSeconds() - c0, wall = sw.ElapsedSeconds();
    out->by_cpu.push_back(cpu > 0 ? flops / cpu * 1e-9 : 0);
    out->by_wall.push_back(wall > 0 ? flops / wall * 1e-9 : 0);
  }
}

// Runs `kernel` on every CPU of `cpus` at once, one pinned thread each: each sizes its runs,
// waits for the others (a core's sibling busy or idle changes its rate), then does `repeats`
// runs of about `seconds`.
std::vector<CoreRuns> RunOnCores(Kernel kernel, const std::vector<int>& cpus, int repeats, double seconds) {
  std::vector<CoreRuns> runs(cpus.size());
  std::vector<int64_t> iters(cpus.size());
  std::vector<float> sinks(cpus.size());
  RunPinnedAtOnce(
      cpus, [&](size_t i) { iters[i] = SizeRun(kernel, seconds, &sinks[i]); },
      [&](size_t i) {
        runs[i].cpu = cpus[i];
        TimedRuns(kernel, iters[i], repeats, &sinks[i], &runs[i]);
      });
  volatile float keep = sinks.empty() ? 0 : sinks[0];  // the results are used, so the chains cannot be dropped
  (void)keep;
  return runs;
}

// What the runs of one unit say: the figure (the best core's best run by CPU time) and what
// may have made it low.
struct UnitReading {
  double gflops = 0;
  double wall_share = 1;  // the best core's best wall-clock rate / its CPU-time rate
  double disagree = 0;    // 0: confirmed; else how far the runs or the cores are apart (0.14 = 14 %)
};

UnitReading Read(const std::vector<CoreRuns>& cores) {
  UnitReading u;
  double lowest = 0;
  const CoreRuns* best = nullptr;
  for (const CoreRuns& c : cores) {
    if (!best || c.best_cpu() > best->best_cpu()) best = &c;
    lowest = lowest == 0 ? c.best_cpu() : std::min(lowest, c.best_cpu());
  }
  if (!best || best->best_cpu() <= 0) return u;
  u.gflops = best->best_cpu();
  for (const CoreRuns& c : cores)
    if (c.best_cpu() > 0) u.wall_share = std::min(u.wall_share, c.best_wall() / c.best_cpu());
  const double across = 1 - lowest / u.gflops;
  if (across > 0.10) u.disagree = across;
  if (best->confirming() < 2) {
    // The best run stands alone: how far the next one is below it.
    std::vector<double> v = best->by_cpu;
    std::sort(v.rbegin(), v.rend());
    u.disagree = std::max(u.disagree, v.size() > 1 ? 1 - v[1] / v[0] : 0.0);
  }
  return u;
}

std::string Percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * share);
  return buf;
}

void Append(std::string* note, const std::string& part) { *note += (note->empty() ? "" : "; ") + part; }

// Says what may have made a unit's reading low; true when anything did.
bool Judge(const char* what, const UnitReading& u, std::string* note) {
  bool doubtful = false;
  if (u.wall_share < 0.9) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "the core was shared while measuring the %s peak (by the wall clock %s of it): kept %.1f GFLOP/s "
                  "from CPU time",
                  what, Percent(u.wall_share).c_str(), u.gflops);
    Append(note, buf);
    doubtful = true;
  }
  if (u.disagree > 0) {
    Append(note, std::string("the ") + what + " runs disagreed by " + Percent(u.disagree));
    doubtful = true;
  }
  return doubtful;
}

int64_t ProcStatSteal(const std::vector<int>& cpus) {
  auto text = ReadFileToString("/proc/stat");
  return text.ok() ? StealTicks(*text, cpus) : 0;
}

constexpr int kRepeats = 5;
constexpr double kSeconds = 0.04;  // per run: 5 runs + sizing ~0.25 s a unit, every core at once

}  // namespace

int64_t StealTicks(const std::string& proc_stat, const std::vector<int>& cpus) {
  int64_t ticks = 0;
  std::istringstream in(proc_stat);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream f(line.substr(3));
    int cpu = -1;
    int64_t v[8] = {};  // user nice system idle iowait irq softirq steal
    f >> cpu;
    for (int64_t& x : v) f >> x;
    if (f && std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) ticks += v[7];
  }
  return ticks;
}

PeakFlops MeasurePeakFlops() {
  const CpuIsa& isa = HostIsa();
  const std::vector<int> cpus = UsableCoreList();  // the affinity mask, no more than a CPU quota allows
  PeakFlops p;
  p.cores_measured = static_cast<int>(cpus.size());
  const int64_t steal0 = ProcStatSteal(cpus);
  Stopwatch sw;
  const UnitKernel f32 = KernelFor(DType::kF32, isa);
  p.f32_kernel = f32.name;
  const UnitReading f32_reading = Read(RunOnCores(f32.fn, cpus, kRepeats, kSeconds));
  p.f32_gflops_per_core = f32_reading.gflops;
  bool doubtful = Judge("f32", f32_reading, &p.note);
  if (const UnitKernel bf16 = KernelFor(DType::kBF16, isa); bf16.fn) {
    p.bf16_kernel = bf16.name;
    const UnitReading bf16_reading = Read(RunOnCores(bf16.fn, cpus, kRepeats, kSeconds));
    p.bf16_gflops_per_core = bf16_reading.gflops;
    doubtful |= Judge("bf16", bf16_reading, &p.note);
  }
  // Steal is counted in clock ticks (10 ms): more than one and 2 % of the cores' time is not noise.
  const double tick = 1.0 / static_cast<double>(std::max(1L, ::sysconf(_SC_CLK_TCK)));
  const double stolen = static_cast<double>(ProcStatSteal(cpus) - steal0) * tick;
  const double core_seconds = sw.ElapsedSeconds() * static_cast<double>(cpus.size());
  if (stolen > 1.5 * tick && stolen > 0.02 * core_seconds) {
    Append(&p.note, "the hypervisor stole " + Percent(stolen / core_seconds) + " of the measuring cores' time");
    doubtful = true;
  }
  if (doubtful) {
    p.provisional = true;
    p.note = "measured on " + std::to_string(cpus.size()) + " core(s) at once: " + p.note +
             ": provisional, measured again at the next start";
  }
  return p;
}

std::string UserCacheDir() {
  if (const char* d = std::getenv("STRATA_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/strata";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/strata";
  return "/tmp/strata-cache";
}

std::string MachineKey() {
  std::string id = CpuModelName();
  for (const auto& n : HostIsa().Names()) id += "," + n;
  // FNV-1a: stable across runs and builds (std::hash is not guaranteed to be).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string PeakCachePath() { return UserCacheDir() + "/peak-flops-" + MachineKey() + ".json"; }

namespace {

// The cache file: the figures, how they were measured, and the highest rates runs observed
// (floors: a later measurement that reads below a rate the kernels reached is low).
struct CachedPeak {
  PeakFlops peak;
  double observed_f32 = 0, observed_bf16 = 0;
};

std::optional<CachedPeak> ParseCache(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("f32_gflops_per_core") || !j["f32_gflops_per_core"].is_number() ||
      !j.contains("bf16_gflops_per_core") || !j["bf16_gflops_per_core"].is_number())
    return std::nullopt;
  CachedPeak c;
  PeakFlops& p = c.peak;
  p.f32_gflops_per_core = j["f32_gflops_per_core"].get<double>();
  p.bf16_gflops_per_core = j["bf16_gflops_per_core"].get<double>();
  if (!(p.f32_gflops_per_core > 0) || !std::isfinite(p.f32_gflops_per_core) || !std::isfinite(p.bf16_gflops_per_core))
    return std::nullopt;
  auto number = [&](const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; };
  p.f32_kernel = j.value("f32_kernel", "");
  p.bf16_kernel = j.value("bf16_kernel", "");
  p.note = j.value("note", "");
  p.provisional = j.contains("provisional") && j["provisional"].is_boolean() && j["provisional"].get<bool>();
  p.cores_measured = static_cast<int>(number("cores_measured"));
  p.from_cache = true;
  c.observed_f32 = number("observed_f32_gflops_per_core");
  c.observed_bf16 = number("observed_bf16_gflops_per_core");
  return c;
}

std::optional<CachedPeak> ReadCache(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? ParseCache(*text) : std::nullopt;
}

// This process's last calibration and the cache text it wrote. A provisional figure is measured
// again at the next start, not at every call of the same start (`strata train`'s cluster
// resolver and its monitor both ask): while the file holds what this process wrote, that stands.
struct LastCalibration {
  std::mutex mu;
  std::string path, text;
  PeakFlops peak;
};
LastCalibration& Last() {
  static LastCalibration last;
  return last;
}

// The text written; nullopt when the cache cannot be written, which only costs a measurement at
// the next start.
std::optional<std::string> WriteCache(const std::string& path, const CachedPeak& c) {
  const PeakFlops& p = c.peak;
  nlohmann::json j = {{"cpu_model", CpuModelName()},
                      {"f32_gflops_per_core", p.f32_gflops_per_core},
                      {"bf16_gflops_per_core", p.bf16_gflops_per_core},
                      {"f32_kernel", p.f32_kernel},
                      {"bf16_kernel", p.bf16_kernel},
                      {"provisional", p.provisional},
                      {"cores_measured", p.cores_measured},
                      {"observed_f32_gflops_per_core", c.observed_f32},
                      {"observed_bf16_gflops_per_core", c.observed_bf16},
                      {"note", p.note}};
  std::error_code ec;
  std::filesystem::create_directories(UserCacheDir(), ec);
  std::string text = j.dump(2) + "\n";
  if (!WriteFileAtomic(path, text).ok()) return std::nullopt;
  return text;
}

std::string Gflops(double g) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", g);
  return buf;
}

}  // namespace

Result<PeakFlops> CalibratedPeakFlops(bool recalibrate) {
  const std::string path = PeakCachePath();
  auto text = recalibrate ? Result<std::string>(NotFound("recalibrating")) : ReadFileToString(path);
  std::optional<CachedPeak> cached = text.ok() ? ParseCache(*text) : std::nullopt;
  if (cached && !cached->peak.provisional) return cached->peak;
  if (cached) {
    LastCalibration& last = Last();
    std::lock_guard<std::mutex> lock(last.mu);
    if (last.path == path && *text == last.text) {
      PeakFlops p = last.peak;  // measured by this start already
      p.from_cache = true;
      return p;
    }
  }
  CachedPeak now;
  now.peak = MeasurePeakFlops();
  PeakFlops& p = now.peak;
  if (cached) {
    const PeakFlops& was = cached->peak;
    now.observed_f32 = cached->observed_f32;
    now.observed_bf16 = cached->observed_bf16;
    if (p.provisional) {
      // Neither measurement is clean: a peak is an upper bound, so the larger of the two stands.
      p.f32_gflops_per_core = std::max(p.f32_gflops_per_core, was.f32_gflops_per_core);
      p.bf16_gflops_per_core = std::max(p.bf16_gflops_per_core, was.bf16_gflops_per_core);
      p.note += " (kept the larger of this and the cached provisional figure)";
    } else {
      p.note = "measured again at a quiet start: the cached figure (f32 " + Gflops(was.f32_gflops_per_core) +
               " GFLOP/s per core) was provisional";
    }
  }
  // A rate a run reached is a floor: a measurement below it read the unit low.
  if (now.observed_f32 > p.f32_gflops_per_core) {
    p.f32_gflops_per_core = now.observed_f32;
    Append(&p.note, "f32 raised to the rate a run executed");
  }
  if (p.bf16_gflops_per_core > 0 && now.observed_bf16 > p.bf16_gflops_per_core) {
    p.bf16_gflops_per_core = now.observed_bf16;
    Append(&p.note, "bf16 raised to the rate a run executed");
  }
  if (std::optional<std::string> text = WriteCache(path, now)) {
    LastCalibration& last = Last();
    std::lock_guard<std::mutex> lock(last.mu);
    last.path = path;
    last.text = std::move(*text);
    last.peak = p;
  }
  return p;
}

namespace {

// The unit's calibration kernel run now on the core the caller is on (a thread pinned there while
// the caller waits): timed by CPU time, so replicas beside it cost little accuracy. A lower bound
// of the unit's peak.
Result<double> MeasureUnitNow(DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    return InvalidArgument("peak correction: no matrix unit for dtype " + std::string(DTypeName(dtype)));
  const UnitKernel kernel = KernelFor(dtype, HostIsa());
  if (!kernel.fn) return InvalidArgument("peak correction: this CPU has no bf16 unit (no AVX512_BF16)");
  const int cpu = ::sched_getcpu();
  return RunOnCores(kernel.fn, {cpu >= 0 ? cpu : UsableCoreList().front()}, kRepeats, kSeconds).front().best_cpu();
}

// Caches max(observed, remeasured) as `dtype`'s peak, provisional, the observed rate as a floor;
// `why` says what proved the peak in use low.
PeakCorrection Correct(DType dtype, double was_gflops, double observed_gflops, double remeasured_gflops,
                       const std::string& why) {
  PeakCorrection c;
  c.dtype = dtype;
  c.was_gflops = was_gflops;
  c.observed_gflops = observed_gflops;
  c.remeasured_gflops = remeasured_gflops;
  c.gflops = std::max(observed_gflops, remeasured_gflops);
  const std::string path = PeakCachePath();
  std::optional<CachedPeak> cached = ReadCache(path);
  CachedPeak next;
  if (cached) {
    next = *cached;
  } else {
    next.peak.f32_kernel = KernelFor(DType::kF32, HostIsa()).name;
    next.peak.bf16_kernel = KernelFor(DType::kBF16, HostIsa()).name;
  }
  const bool bf16 = dtype == DType::kBF16;
  (bf16 ? next.peak.bf16_gflops_per_core : next.peak.f32_gflops_per_core) = c.gflops;
  double& floor = bf16 ? next.observed_bf16 : next.observed_f32;
  floor = std::max(floor, observed_gflops);  // executed, so the unit does at least this much
  next.peak.provisional = true;
  c.line = std::string("peak ") + (bf16 ? "bf16" : "f32") + " corrected: " + why + "; measured " +
           Gflops(remeasured_gflops) + " now; using " + Gflops(c.gflops);
  next.peak.note = c.line + " (provisional: measured again at the next start)";
  c.line += WriteCache(path, next).has_value() ? " (cached as provisional: measured again at the next start)"
                                   : " (the cache " + path + " could not be written)";
  return c;
}

}  // namespace

Result<PeakCorrection> CorrectPeak(DType dtype, double was_gflops, double observed_gflops) {
  STRATA_ASSIGN_OR_RETURN(double now, MeasureUnitNow(dtype));
  return Correct(dtype, was_gflops, observed_gflops, now,
                 "the kernels executed " + Gflops(observed_gflops) + " GFLOP/s per core, above the " +
                     Gflops(was_gflops) + " in use");
}

Result<std::optional<PeakCorrection>> CheckPeak(DType dtype, double peak_gflops, const RunRates& rates,
                                                bool* doubt_settled) {
  if (BeatsPeak(rates.executed_gflops, peak_gflops, rates.noise)) {
    STRATA_ASSIGN_OR_RETURN(PeakCorrection c, CorrectPeak(dtype, peak_gflops, rates.executed_gflops));
    return std::optional<PeakCorrection>(std::move(c));
  }
  if (*doubt_settled || !BeatsPeak(rates.counted_gflops, peak_gflops, rates.noise)) return std::optional<PeakCorrection>();
  *doubt_settled = true;
  STRATA_ASSIGN_OR_RETURN(double now, MeasureUnitNow(dtype));
  if (!BeatsPeak(now, peak_gflops, rates.noise)) return std::optional<PeakCorrection>();  // right: the count is Winograd's
  return std::optional<PeakCorrection>(
      Correct(dtype, peak_gflops, rates.executed_gflops, now,
              "the counted FLOPs ran at " + Gflops(rates.counted_gflops) + " GFLOP/s per core, above the " +
                  Gflops(peak_gflops) + " in use (Winograd counts more than it executes, so the unit was measured again)"));
}

}  // namespace strata
