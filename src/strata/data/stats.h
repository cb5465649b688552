// Per-stage pipeline statistics, readable at any time from any thread.
//
// Every iterator made from one dataset node shares one StageStats (a repeat re-creates its
// input iterators each epoch; an interleave makes one per file), so a stage's counters
// cover the whole run. Counters are relaxed atomics: a snapshot is consistent per field,
// not across fields, which is what a monitor needs.
//
// Time accounting, per stage:
//   busy_ns                the stage's own work (the map function, copying into a batch,
//                          reading and checking records), summed over its threads
//   blocked_upstream_ns    time a consumer of this stage's input waited for that input
//                          (in sync stages: time inside the input's GetNext)
//   blocked_downstream_ns  time a producer thread of this stage waited for buffer space
//                          (the consumer is slower: this stage is ahead)
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::data {

struct StageStats {
  StageStats(std::string n, std::string p) : name(std::move(n)), path(std::move(p)) {}
  const std::string name;  // "parallel_map", "batch", ...
  // Where the stage sits: "0" is the stage the user iterates, "0.0" its first input,
  // "0.1" its second (zip), "0.0.f" the per-file datasets an interleave opens, ...
  const std::string path;
  std::atomic<int64_t> elements{0};  // elements produced
  std::atomic<int64_t> inputs{0};    // elements consumed from the input stage
  std::atomic<int64_t> bytes{0};     // bytes of the elements produced
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int64_t> blocked_upstream_ns{0};
  std::atomic<int64_t> blocked_downstream_ns{0};
  std::atomic<int64_t> buffer_fill{0};      // elements buffered now (async stages)
  std::atomic<int64_t> buffer_capacity{0};  // the buffer's current bound
  std::atomic<int64_t> parallelism{0};      // worker threads allowed to run now
  std::atomic<int64_t> errors_ignored{0};   // ignore_errors: elements dropped

  void AddElement(int64_t nbytes) {
    elements.fetch_add(1, std::memory_order_relaxed);
    bytes.fetch_add(nbytes, std::memory_order_relaxed);
  }
};

struct StageStatsSnapshot {
  std::string name;
  std::string path;
  int64_t elements = 0, inputs = 0, bytes = 0;
  int64_t busy_ns = 0, blocked_upstream_ns = 0, blocked_downstream_ns = 0;
  int64_t buffer_fill = 0, buffer_capacity = 0, parallelism = 0, errors_ignored = 0;
  bool autotuned = false;

  static StageStatsSnapshot Of(const StageStats& s);
  // Own work per produced element, in nanoseconds (0 before the first element).
  double busy_ns_per_element() const { return elements ? static_cast<double>(busy_ns) / elements : 0.0; }
};

// A fixed-width table, one stage per line, in the order given (the iterator lists sources first):
//   stage            elements      MB   busy s  wait-up s  wait-down s  buffer  par
std::string FormatStatsTable(const std::vector<StageStatsSnapshot>& stages, double wall_seconds);

}  // namespace strata::data

#pragma GCC visibility pop
