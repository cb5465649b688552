// Work on several CPUs at once: one thread pinned to each, started together. The peak
// calibration (peak_flops.cc) and its independent check (peak_check.cc) measure every core at
// once this way, as training's replicas use them.
#pragma once

#include <sched.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace strata {

// Pins the calling thread to `cpu`; false when the kernel refuses.
inline bool PinThisThread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::sched_setaffinity(0, sizeof(one), &one) == 0;  // 0: the calling thread
}

// For each i, a thread pinned to cpus[i] runs prepare(i), waits until every thread has
// prepared, then runs run(i). Returns when all have finished.
inline void RunPinnedAtOnce(const std::vector<int>& cpus, const std::function<void(size_t)>& prepare,
                            const std::function<void(size_t)>& run) {
  std::atomic<size_t> prepared{0};
  std::vector<std::thread> threads;
  threads.reserve(cpus.size());
  for (size_t i = 0; i < cpus.size(); ++i) {
    threads.emplace_back([&, i] {
      (void)PinThisThread(cpus[i]);
      prepare(i);
      prepared.fetch_add(1);
      while (prepared.load() < cpus.size()) std::this_thread::yield();
      run(i);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace strata
