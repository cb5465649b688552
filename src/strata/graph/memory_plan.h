// Compile pass: liveness-based placement of a program's intermediate buffers in one arena.
//
// Each buffer is live from the kernel that first writes it to the last kernel that reads it
// (inclusive, kernel positions). Two buffers may share bytes only when their live ranges do
// not overlap. Placement is greedy, largest buffer first, lowest offset that fits (the
// classic offset assignment of TFLite's arena planner); offsets are 64-byte aligned.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::graph {

struct BufferLife {
  int64_t bytes = 0;
  int first = 0;  // kernel position of the first write
  int last = 0;   // kernel position of the last read (>= first)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per buffer, bytes into the arena
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;       // the sum of all buffers: what no reuse would cost
};

MemoryPlan PlanMemory(const std::vector<BufferLife>& buffers);

}  // namespace strata::graph
