#include "strata/data/stats.h"

#include <cstdio>

#include "strata/data/handoff_counters.h"

namespace strata::data {

StageStatsSnapshot StageStatsSnapshot::Of(const StageStats& s) {
  auto ld = [](const std::atomic<int64_t>& a) { return a.load(std::memory_order_relaxed); };
  StageStatsSnapshot r;
  r.name = s.name;
  r.path = s.path;
  r.elements = ld(s.elements);
  r.inputs = ld(s.inputs);
  r.bytes = ld(s.bytes);
  r.busy_ns = ld(s.busy_ns);
  r.blocked_upstream_ns = ld(s.blocked_upstream_ns);
  r.blocked_downstream_ns = ld(s.blocked_downstream_ns);
  r.buffer_fill = ld(s.buffer_fill);
  r.buffer_capacity = ld(s.buffer_capacity);
  r.parallelism = ld(s.parallelism);
  r.errors_ignored = ld(s.errors_ignored);
  return r;
}

// "MB/s/str": bytes over busy seconds. Busy time is summed over a stage's threads, so for a
// file source (the "tfrecord" stage that every file of an interleave shares) it is the rate of
// one stream while it reads: local or remote (docs/remote.md). Sources only (no input stage):
// for a stage that passes its input's elements on, bytes per busy second means nothing.
std::string FormatStatsTable(const std::vector<StageStatsSnapshot>& stages, double wall_seconds) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %-16s %10s %10s %9s %9s %9s %9s %9s %9s %7s %5s\n", "path", "stage", "elements",
                "elem/s", "MB", "MB/s/str", "busy s", "wait-up s", "wait-dn s", "us/elem", "buffer", "par");
  out += line;
  for (const auto& s : stages) {
    char buf[32];
    if (s.buffer_capacity > 0)
      std::snprintf(buf, sizeof buf, "%lld/%lld", static_cast<long long>(s.buffer_fill),
                    static_cast<long long>(s.buffer_capacity));
    else
      std::snprintf(buf, sizeof buf, "-");
    char par[32];
    if (s.parallelism > 0)
      std::snprintf(par, sizeof par, "%lld%s", static_cast<long long>(s.parallelism), s.autotuned ? "*" : "");
    else
      std::snprintf(par, sizeof par, "-");
    std::snprintf(line, sizeof line, "%-9s %-16s %10lld %10.0f %9.1f %9.1f %9.2f %9.2f %9.2f %9.2f %7s %5s\n",
                  s.path.c_str(), s.name.c_str(), static_cast<long long>(s.elements),
                  wall_seconds > 0 ? static_cast<double>(s.elements) / wall_seconds : 0.0,
                  static_cast<double>(s.bytes) / 1e6,
                  s.inputs == 0 && s.busy_ns > 0 ? static_cast<double>(s.bytes) * 1e3 / static_cast<double>(s.busy_ns) : 0.0,
                  static_cast<double>(s.busy_ns) * 1e-9,
                  static_cast<double>(s.blocked_upstream_ns) * 1e-9, static_cast<double>(s.blocked_downstream_ns) * 1e-9,
                  s.busy_ns_per_element() * 1e-3, buf, par);
    out += line;
  }
  return out;
}

}  // namespace strata::data

namespace strata::data::internal {
HandoffCounters& Counters() {
  static HandoffCounters c;
  return c;
}
}  // namespace strata::data::internal
