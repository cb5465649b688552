// A fixed-size thread pool. Threads are created once; tasks go through one queue.
// With `pin_threads`, worker i is bound to the i-th CPU of the process's affinity mask
// (a replica per core).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class ThreadPool {
 public:
  struct Options {
    int num_threads = 1;       // fixed for the pool's life
    bool pin_threads = false;  // bind worker i to usable CPU i (mod the usable count)
    const char* name = "strata-pool";  // thread name shown by top/gdb (15 chars max)
  };
  explicit ThreadPool(Options options);
  ~ThreadPool();  // finishes queued tasks, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()); }
  void Schedule(std::function<void()> task);
  // Blocks until every scheduled task has finished.
  void Wait();
  // Runs fn(i) for i in [0, n), spread over the workers, and waits. Not re-entrant from a
  // worker of the same pool.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  Options options_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<std::function<void()>> queue_;
  int64_t pending_ = 0;  // queued + running
  bool stopping_ = false;
};

}  // namespace strata
