#include "strata/core/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <set>

#include "strata/core/cpu.h"

namespace strata {
namespace {

TEST(ThreadPool, RunsEveryTaskAndWaits) {
  ThreadPool pool({.num_threads = 3});
  std::atomic<int> sum{0};
  for (int i = 1; i <= 100; ++i) pool.Schedule([&sum, i] { sum += i; });
  pool.Wait();
  EXPECT_EQ(sum.load(), 5050);
}

TEST(ThreadPool, ParallelForCoversEachIndexOnce) {
  ThreadPool pool({.num_threads = 4});
  std::vector<std::atomic<int>> hits(1000);
  pool.ParallelFor(1000, [&](int64_t i) { hits[i]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  pool.ParallelFor(0, [&](int64_t) { FAIL(); });
}

TEST(ThreadPool, DestructorDrainsQueue) {
  std::atomic<int> n{0};
  {
    ThreadPool pool({.num_threads = 2});
    for (int i = 0; i < 50; ++i) pool.Schedule([&n] { n++; });
  }
  EXPECT_EQ(n.load(), 50);
}

TEST(ThreadPool, PinnedWorkersRunOnTheirCpu) {
  std::vector<int> cpus = UsableCpuList();
  ThreadPool pool({.num_threads = static_cast<int>(cpus.size()), .pin_threads = true});
  std::mutex mu;
  std::set<int> masks;
  for (int i = 0; i < static_cast<int>(cpus.size()) * 4; ++i) {
    pool.Schedule([&] {
      cpu_set_t set;
      CPU_ZERO(&set);
      sched_getaffinity(0, sizeof(set), &set);
      std::lock_guard<std::mutex> lock(mu);
      masks.insert(CPU_COUNT(&set));
    });
  }
  pool.Wait();
  EXPECT_EQ(masks, std::set<int>{1});  // every worker is bound to exactly one CPU
}

}  // namespace
}  // namespace strata
