#include "strata/keras/fault_point.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace strata::keras {
namespace {

struct FaultSpec {
  bool set = false;
  FaultPoint point = FaultPoint::kAfterStep;
  int64_t n = 0;
  int worker = -1;  // -1: every worker
  std::string text;
};

// "after-step:K[@W]" or "backup-write:N[@W]"; anything else is reported once and ignored.
FaultSpec ParseSpec() {
  FaultSpec spec;
  const char* env = std::getenv("STRATA_FAULT_PAUSE");
  if (env == nullptr || *env == '\0') return spec;
  spec.text = env;
  const std::string s = env;
  const size_t colon = s.find(':');
  const std::string name = s.substr(0, colon);
  spec.point = name == "backup-write" ? FaultPoint::kBackupWrite : FaultPoint::kAfterStep;
  long long n = 0;
  int worker = -1, used = 0;
  const bool known = name == "after-step" || name == "backup-write";
  const std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  const bool parsed = known && !rest.empty() &&
                      (std::sscanf(rest.c_str(), "%lld@%d%n", &n, &worker, &used) == 2 ||
                       (worker = -1, std::sscanf(rest.c_str(), "%lld%n", &n, &used) == 1)) &&
                      used == static_cast<int>(rest.size()) && n > 0;
  if (!parsed) {
    std::fprintf(stderr, "strata: STRATA_FAULT_PAUSE=%s is not after-step:K[@W] or backup-write:N[@W]; ignored\n", env);
    return spec;
  }
  spec.set = true;
  spec.n = n;
  spec.worker = worker;
  return spec;
}

}  // namespace

void PauseAtFaultPoint(FaultPoint point, int64_t n, int worker, const std::string& detail) {
  static const FaultSpec spec = ParseSpec();
  if (!spec.set || spec.point != point || spec.n != n || (spec.worker >= 0 && spec.worker != worker)) return;
  std::fprintf(stderr, "strata: fault point %s reached (STRATA_FAULT_PAUSE): worker %d, pid %ld paused%s%s\n", spec.text.c_str(),
               worker, static_cast<long>(::getpid()), detail.empty() ? "" : "; ", detail.c_str());
  std::fflush(stderr);
  // The test kills the process here; a test that does not goes on after ten minutes.
  for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::fprintf(stderr, "strata: fault point %s: not killed within 10 minutes; going on\n", spec.text.c_str());
}

}  // namespace strata::keras
