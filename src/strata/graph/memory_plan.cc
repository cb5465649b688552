#include "strata/graph/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace strata::graph {

MemoryPlan PlanMemory(const std::vector<BufferLife>& buffers) {
  constexpr int64_t kAlign = 64;
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  for (size_t b : order) {
    const BufferLife& me = buffers[b];
    const int64_t size = (me.bytes + kAlign - 1) / kAlign * kAlign;
    plan.naive_bytes += size;
    // Intervals [offset, offset + size) of placed buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t p : placed) {
      const BufferLife& o = buffers[p];
      if (o.first <= me.last && me.first <= o.last) {
        const int64_t osize = (o.bytes + kAlign - 1) / kAlign * kAlign;
        busy.push_back({plan.offsets[p], plan.offsets[p] + osize});
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo - offset >= size) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[b] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(b);
  }
  return plan;
}

}  // namespace strata::graph
