#include "strata/core/peak_flops.h"

#include <immintrin.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/file.h"

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

// The best GFLOP/s of `repeats` runs of about `seconds` of CPU time each, by the thread's CPU
// time (what the core did while it ran this thread: a busy machine that shares the core
// stretches the wall clock, not this) and by the wall clock (which only a quiet core matches).
struct Rates {
  double cpu = 0, wall = 0;
};

Rates BestGflops(const std::function<double(int64_t, float*)>& kernel, int repeats, double seconds) {
  float sink = 0;
  // Size the iteration count from a short probe so each repeat lasts about `seconds`.
  int64_t iters = 1 << 14;
  for (;;) {
    const double c0 = ThreadCpuSeconds();
    kernel(iters, &sink);
    double t = ThreadCpuSeconds() - c0;
    if (t > 0.01) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * seconds / t) + 1;
      break;
    }
    iters *= 4;
  }
  Rates best;
  for (int r = 0; r < repeats; ++r) {
    Stopwatch sw;
    const double c0 = ThreadCpuSeconds();
    const double flops = kernel(iters, &sink);
    const double cpu = ThreadCpuSeconds() - c0, wall = sw.ElapsedSeconds();
    if (cpu > 0) best.cpu = std::max(best.cpu, flops / cpu * 1e-9);
    best.wall = std::max(best.wall, flops / wall * 1e-9);
  }
  volatile float keep = sink;  // the results are used, so the chains cannot be dropped
  (void)keep;
  return best;
}

// Keeps the calling thread on the core it is on while it measures (a migration mid-run
// would mix two cores' clocks), and restores its affinity after.
class PinToThisCore {
 public:
  PinToThisCore() {
    const int cpu = ::sched_getcpu();
    pinned_ = cpu >= 0 && ::sched_getaffinity(0, sizeof(old_), &old_) == 0;
    if (!pinned_) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = ::sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinToThisCore() {
    if (pinned_) ::sched_setaffinity(0, sizeof(old_), &old_);
  }
  PinToThisCore(const PinToThisCore&) = delete;
  PinToThisCore& operator=(const PinToThisCore&) = delete;

 private:
  cpu_set_t old_{};
  bool pinned_ = false;
};

// A line when the wall clock says the core was shared (its best rate under 90 % of the
// CPU-time rate): the figure kept is the CPU-time one, which the sharing does not lower.
void NoteSharing(const char* what, const Rates& r, std::string* note) {
  if (r.cpu <= 0 || r.wall >= 0.9 * r.cpu) return;
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%sthe core was shared while measuring the %s peak (by the wall clock %.0f%% of it): kept %.1f GFLOP/s from CPU time",
                note->empty() ? "" : "; ", what, 100.0 * r.wall / r.cpu, r.cpu);
  *note += buf;
}

}  // namespace

PeakFlops MeasurePeakFlops() {
  const CpuIsa& isa = HostIsa();
  PeakFlops p;
  constexpr int kRepeats = 5;
  constexpr double kSeconds = 0.05;
  PinToThisCore pin;
  Rates f32;
  if (isa.avx512f) {
    p.f32_kernel = "avx512-fma";
    f32 = BestGflops(Avx512FmaKernel, kRepeats, kSeconds);
  } else if (isa.avx2) {
    p.f32_kernel = "avx2-fma";
    f32 = BestGflops(Avx2FmaKernel, kRepeats, kSeconds);
  } else {
    p.f32_kernel = "scalar";
    f32 = BestGflops(ScalarKernel, kRepeats, kSeconds);
  }
  p.f32_gflops_per_core = f32.cpu;
  NoteSharing("f32", f32, &p.note);
  if (isa.avx512_bf16) {
    p.bf16_kernel = "avx512-bf16-dp";
    const Rates bf16 = BestGflops(Avx512Bf16Kernel, kRepeats, kSeconds);
    p.bf16_gflops_per_core = bf16.cpu;
    NoteSharing("bf16", bf16, &p.note);
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

Result<PeakFlops> CalibratedPeakFlops(bool recalibrate) {
  const std::string path = UserCacheDir() + "/peak-flops-" + MachineKey() + ".json";
  if (!recalibrate) {
    auto text = ReadFileToString(path);
    if (text.ok()) {
      auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("f32_gflops_per_core") && j["f32_gflops_per_core"].is_number() &&
          j.contains("bf16_gflops_per_core") && j["bf16_gflops_per_core"].is_number()) {
        PeakFlops p;
        p.f32_gflops_per_core = j["f32_gflops_per_core"].get<double>();
        p.bf16_gflops_per_core = j["bf16_gflops_per_core"].get<double>();
        p.f32_kernel = j.value("f32_kernel", "");
        p.bf16_kernel = j.value("bf16_kernel", "");
        p.note = j.value("note", "");
        p.from_cache = true;
        if (p.f32_gflops_per_core > 0) return p;
      }
    }
  }
  PeakFlops p = MeasurePeakFlops();
  nlohmann::json j = {{"cpu_model", CpuModelName()},
                      {"f32_gflops_per_core", p.f32_gflops_per_core},
                      {"bf16_gflops_per_core", p.bf16_gflops_per_core},
                      {"f32_kernel", p.f32_kernel},
                      {"bf16_kernel", p.bf16_kernel},
                      {"note", p.note}};
  std::error_code ec;
  std::filesystem::create_directories(UserCacheDir(), ec);
  (void)WriteFileAtomic(path, j.dump(2) + "\n");  // a read-only cache only costs a re-measure
  return p;
}

}  // namespace strata
