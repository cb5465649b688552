#include "strata/core/cpu.h"

#include <sched.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace strata {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The cgroup v2 path of this process ("0::/user.slice/..."), or "" on cgroup v1.
std::string CgroupV2Path() {
  std::istringstream in(ReadSmallFile("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return {};
}

// Walks from the process's cgroup up to the root and returns the tightest value of
// `file` parsed by `parse`.
template <typename Parse>
auto TightestCgroupLimit(const std::string& file, Parse parse) -> decltype(parse(std::string_view())) {
  decltype(parse(std::string_view())) best;
  std::string path = CgroupV2Path();
  for (;;) {
    auto v = parse(ReadSmallFile("/sys/fs/cgroup" + path + "/" + file));
    if (v && (!best || *v < *best)) best = v;
    if (path.empty() || path == "/") break;
    auto slash = path.rfind('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  return best;
}

std::optional<double> CgroupV1CpuQuota() {
  std::string q = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  std::string p = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (q.empty() || p.empty()) return std::nullopt;
  long quota = std::atol(q.c_str()), period = std::atol(p.c_str());
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<double>(quota) / static_cast<double>(period);
}

std::optional<int64_t> ParseMemoryMax(std::string_view text) {
  if (text.empty() || text.rfind("max", 0) == 0) return std::nullopt;
  long long v = std::atoll(std::string(text).c_str());
  if (v <= 0) return std::nullopt;
  return static_cast<int64_t>(v);
}

}  // namespace

std::vector<std::string> CpuIsa::Names() const {
  std::vector<std::string> n;
  if (sse42) n.push_back("SSE4.2");
  if (avx2) n.push_back("AVX2");
  if (avx512f) n.push_back("AVX-512");
  if (avx512_bf16) n.push_back("AVX512_BF16");
  if (amx_bf16) n.push_back("AMX-BF16");
  if (amx_int8) n.push_back("AMX-INT8");
  return n;
}

const CpuIsa& DetectedIsa() {
  static const CpuIsa isa = [] {
    CpuIsa i;
    __builtin_cpu_init();
    i.sse42 = __builtin_cpu_supports("sse4.2");
    i.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    i.avx512f = __builtin_cpu_supports("avx512f");
    i.avx512bw = __builtin_cpu_supports("avx512bw");
    i.avx512vl = __builtin_cpu_supports("avx512vl");
    // GCC 12's __builtin_cpu_supports knows avx512bf16 but not AMX: read the kernel's
    // flags, which also tells whether the OS enabled the AMX tile state.
    std::string info = ReadSmallFile("/proc/cpuinfo");
    auto flags_pos = info.find("\nflags");
    std::string flags = flags_pos == std::string::npos ? "" : info.substr(flags_pos, info.find('\n', flags_pos + 1) - flags_pos);
    flags += " ";
    i.avx512_bf16 = i.avx512f && flags.find(" avx512_bf16 ") != std::string::npos;
    i.amx_bf16 = flags.find(" amx_bf16 ") != std::string::npos;
    i.amx_int8 = flags.find(" amx_int8 ") != std::string::npos;
    return i;
  }();
  return isa;
}

Result<std::string> MaxIsaSetting() {
  const char* env = std::getenv("STRATA_MAX_ISA");
  if (env == nullptr || *env == 0) return std::string();
  const std::string v = env;
  if (v == "scalar" || v == "avx2" || v == "avx512") return v;
  return InvalidArgument("STRATA_MAX_ISA=\"" + v + "\": expected scalar, avx2 or avx512");
}

CpuIsa CapIsa(CpuIsa isa, std::string_view cap) {
  // "avx512" is plain AVX-512 (F, BW, VL), as oneDNN's AVX512_CORE: no BF16 dot product and no
  // AMX, so an AVX512_BF16 or AMX machine can stand in for Skylake-X or Ice Lake.
  if (cap == "avx512") isa.avx512_bf16 = isa.amx_bf16 = isa.amx_int8 = false;
  if (cap == "scalar" || cap == "avx2") {
    isa.avx512f = isa.avx512bw = isa.avx512vl = isa.avx512_bf16 = false;
    isa.amx_bf16 = isa.amx_int8 = false;
  }
  if (cap == "scalar") isa.avx2 = false;
  return isa;
}

const CpuIsa& HostIsa() {
  static const CpuIsa isa = [] {
    auto cap = MaxIsaSetting();
    return CapIsa(DetectedIsa(), cap.ok() ? *cap : "");
  }();
  return isa;
}

std::string CpuModelName() {
  std::istringstream in(ReadSmallFile("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        while (!name.empty() && name.front() == ' ') name.erase(0, 1);
        return name;
      }
    }
  }
  return "unknown";
}

std::vector<int> UsableCpuList() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < (n > 0 ? n : 1); ++c) cpus.push_back(c);
  }
  return cpus;
}

std::optional<double> ParseCgroupCpuMax(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  long q = std::atol(quota.c_str());
  if (q <= 0) return std::nullopt;
  return static_cast<double>(q) / static_cast<double>(period);
}

int UsableCores() {
  int n = static_cast<int>(UsableCpuList().size());
  std::optional<double> quota = TightestCgroupLimit("cpu.max", ParseCgroupCpuMax);
  if (!quota) quota = CgroupV1CpuQuota();
  if (quota) n = std::min(n, std::max(1, static_cast<int>(std::ceil(*quota - 1e-9))));
  return std::max(1, n);
}

std::vector<int> UsableCoreList() {
  std::vector<int> cpus = UsableCpuList();
  if (cpus.size() > static_cast<size_t>(UsableCores())) cpus.resize(static_cast<size_t>(UsableCores()));
  return cpus;
}

int64_t UsableMemoryBytes() {
  struct sysinfo si {};
  int64_t ram = 0;
  if (sysinfo(&si) == 0) ram = static_cast<int64_t>(si.totalram) * si.mem_unit;
  std::optional<int64_t> limit = TightestCgroupLimit("memory.max", ParseMemoryMax);
  if (!limit) limit = ParseMemoryMax(ReadSmallFile("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  if (limit && (ram == 0 || *limit < ram)) return *limit;
  return ram;
}

}  // namespace strata
