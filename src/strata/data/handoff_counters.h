// Process-wide counters of the pipeline's thread hand-offs and buffer allocations, for
// tests and benchmarks that pin how often threads are woken and batch memory is allocated
// (tests/data/handoff_test.cc, bench/data_bench.cc). Relaxed atomics; read deltas around
// the code of interest. Internal: not part of the dataset API.
#pragma once

#include <atomic>
#include <cstdint>

namespace strata::data::internal {

struct HandoffCounters {
  std::atomic<int64_t> interleave_worker_wakeups{0};  // a parallel interleave worker woke to read
  std::atomic<int64_t> batch_buffers_allocated{0};    // batch / map_and_batch allocated a new batch buffer
};

HandoffCounters& Counters();

}  // namespace strata::data::internal
