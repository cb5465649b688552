#include "strata/data/worker_pool.h"

#include <pthread.h>
#include <sched.h>

namespace strata::data {

WorkerPool::WorkerPool(Work* work, Options o) : work_(work), o_(std::move(o)) {
  if (o_.tunable)
    sub_ = o_.tunable->Subscribe([this] {
      std::lock_guard<std::mutex> l(mu_);
      worker_cv_.notify_all();
    });
}

WorkerPool::Options WorkerPool::Parallel(const IteratorContext& ctx, const std::string& path, int64_t n,
                                         int64_t autotune_max) {
  Options o;
  if (n == AUTOTUNE) {
    o.tunable = ctx.pipeline->GetTunable(path, Tunable::Kind::kParallelism, 1, 1, autotune_max);
    o.threads = static_cast<int>(o.tunable->max());
  } else {
    o.parallelism = n;
    o.threads = static_cast<int>(n);
  }
  return o;
}

void WorkerPool::Start() {
  if (!threads_.empty()) return;
  for (int i = 0; i < o_.threads; ++i) threads_.emplace_back([this] { Loop(); });
}

void WorkerPool::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    stop_ = true;
  }
  worker_cv_.notify_all();
  for (auto& t : threads_) t.join();
  if (o_.tunable) o_.tunable->Unsubscribe(sub_);
}

void WorkerPool::WaitForWorkers(Lock& l) {
  ++consumer_waiting_;
  consumer_cv_.wait(l);
  --consumer_waiting_;
}

WorkerPool::Parked::Parked(WorkerPool* pool) : pool_(pool), l_(pool->mu_) {
  pool_->parked_ = true;
  pool_->parked_cv_.wait(l_, [&] { return pool_->active_ == 0; });
}

WorkerPool::Parked::~Parked() {
  pool_->parked_ = false;
  l_.unlock();
  pool_->worker_cv_.notify_all();
}

void WorkerPool::Loop() {
  if (o_.batch_scheduling) {
    // SCHED_BATCH: a woken worker does not preempt the running thread (often the one that
    // woke it); it runs at the next scheduling point, with the same CPU share.
    sched_param batch{};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
  }
  Lock l(mu_);
  while (true) {
    if (!stop_ && !Ready()) {
      const bool charge = work_->WillSleep() && o_.blocked_downstream_ns;
      const int64_t t0 = charge ? NowNanos() : 0;
      ++idle_;
      worker_cv_.wait(l, [&] { return stop_ || Ready(); });
      --idle_;
      if (charge) o_.blocked_downstream_ns->fetch_add(NowNanos() - t0, std::memory_order_relaxed);
      if (o_.wakeups) o_.wakeups->fetch_add(1, std::memory_order_relaxed);
    }
    if (stop_) return;
    ++active_;
    const bool news = work_->Turn(l);
    --active_;
    if (parked_ && active_ == 0) parked_cv_.notify_all();
    if (news && consumer_waiting_ > 0) {
      l.unlock();
      consumer_cv_.notify_one();  // only the consumer waits on it
      l.lock();
    }
  }
}

}  // namespace strata::data

