#include "strata/core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>

#include "strata/core/cpu.h"

namespace strata {

ThreadPool::ThreadPool(Options options) : options_(options) {
  const int n = options_.num_threads < 1 ? 1 : options_.num_threads;
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    ++pending_;
  }
  work_cv_.notify_one();
}

void ThreadPool::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  // One task per worker, each pulling indices from a shared counter: balanced without
  // allocating a task per index.
  std::atomic<int64_t> next{0};
  const int tasks = static_cast<int>(std::min<int64_t>(n, num_threads()));
  for (int t = 0; t < tasks; ++t) {
    Schedule([&] {
      for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
    });
  }
  Wait();
}

void ThreadPool::WorkerLoop(int index) {
  pthread_setname_np(pthread_self(), options_.name);
  if (options_.pin_threads) {
    std::vector<int> cpus = UsableCpuList();
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[index % cpus.size()], &set);
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
  }
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace strata
