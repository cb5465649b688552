// WorkerPool on its own (worker_pool.h), with a toy stage: workers claim consecutive
// indices one turn at a time, "process" them without the lock, and queue them for a
// consumer. Checked: start/stop/join (also mid-turn and never started), parking while a
// Save runs (no turn half done, none started, nothing lost or duplicated), resizing by a
// parallelism Tunable (the change alone wakes sleepers; never more turns than allowed), and
// wake-ups only for sleepers that can start.
#include "strata/data/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <set>
#include <thread>

namespace strata::data {
namespace {

using namespace std::chrono_literals;

class ToyStage : public WorkerPool::Work {
 public:
  ToyStage(WorkerPool::Options o, int64_t total) : total_(total), pool(this, std::move(o)) {}
  ~ToyStage() override { pool.Stop(); }

  bool CanStart() const override { return !hold && next_ < total_ && static_cast<int64_t>(ready_.size()) < 8; }
  bool Turn(WorkerPool::Lock& l) override {
    if (pool.parked()) turn_while_parked = true;
    if (pool.active() > pool.parallelism()) too_many = true;
    max_active = std::max(max_active, pool.active());
    const int64_t i = next_++;
    l.unlock();
    std::this_thread::sleep_for(work);
    while (gate.load()) std::this_thread::sleep_for(100us);
    l.lock();
    ready_.push_back(i);
    ++turns;
    return true;
  }

  // The consumer: the next finished index, or -1 at the end.
  int64_t Next() {
    WorkerPool::Lock l(pool.mu());
    pool.Start();
    while (ready_.empty()) {
      if (next_ == total_ && pool.active() == 0) return -1;
      pool.WaitForWorkers(l);
    }
    const int64_t i = ready_.front();
    ready_.pop_front();
    const bool wake = pool.WorkerCanStart();
    l.unlock();
    pool.WakeWorkers(wake);
    return i;
  }
  // Save: with every worker parked, what was claimed is exactly what is ready or consumed.
  void Save(int64_t consumed) {
    WorkerPool::Parked parked = pool.Park();
    EXPECT_EQ(pool.active(), 0);
    EXPECT_EQ(next_, consumed + static_cast<int64_t>(ready_.size())) << "a turn is half done while parked";
    std::this_thread::sleep_for(200us);  // a worker starting now would be caught in Turn
  }

  const int64_t total_;
  int64_t next_ = 0;
  std::deque<int64_t> ready_;
  bool hold = false;  // CanStart() is false while set
  std::chrono::microseconds work{0};
  std::atomic<bool> gate{false};
  bool turn_while_parked = false, too_many = false;
  int64_t max_active = 0, turns = 0;
  WorkerPool pool;  // last
};

// Polls `done` under the pool's lock for up to 10 s.
template <typename F>
bool Eventually(ToyStage& s, F done) {
  for (int i = 0; i < 10000; ++i) {
    {
      WorkerPool::Lock l(s.pool.mu());
      if (done()) return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(WorkerPool, StartsStopsAndJoins) {
  { ToyStage never_started({.threads = 3, .parallelism = 3}, 10); }
  ToyStage s({.threads = 3, .parallelism = 3}, 1000);
  s.work = 1ms;
  EXPECT_GE(s.Next(), 0);
  s.pool.Stop();  // turns in flight end; nobody starts another
  s.pool.Stop();  // idempotent
  WorkerPool::Lock l(s.pool.mu());
  EXPECT_EQ(s.pool.active(), 0);
  EXPECT_LT(s.next_, 1000);
}

TEST(WorkerPool, ParksDuringSaveWithoutLosingOrDuplicating) {
  for (int threads : {1, 2, 4}) {
    ToyStage s({.threads = threads, .parallelism = threads}, 3000);
    std::set<int64_t> seen;
    int64_t consumed = 0;
    for (int64_t i; (i = s.Next()) >= 0;) {
      EXPECT_TRUE(seen.insert(i).second) << "index " << i << " delivered twice";
      if (++consumed % 97 == 0) s.Save(consumed);
    }
    EXPECT_EQ(consumed, 3000);
    EXPECT_EQ(static_cast<int64_t>(seen.size()), 3000);
    EXPECT_FALSE(s.turn_while_parked) << threads << " threads";
    EXPECT_FALSE(s.too_many);
  }
}

TEST(WorkerPool, AutotuneResizesAndWakesSleepers) {
  auto tunable = std::make_shared<Tunable>(Tunable::Kind::kParallelism, 1, 1, 4, nullptr);
  ToyStage s({.threads = 4, .tunable = tunable}, 1 << 20);
  s.gate = true;  // turns block until released
  {
    WorkerPool::Lock l(s.pool.mu());
    s.pool.Start();
  }
  // Parallelism 1: one turn runs, three workers sleep although the stage has work.
  ASSERT_TRUE(Eventually(s, [&] { return s.pool.active() == 1 && s.pool.idle_workers() == 3; }));
  EXPECT_FALSE(s.pool.WorkerCanStart());
  // Raising the tunable is the only signal: the sleepers start turns.
  tunable->Set(3);
  EXPECT_TRUE(Eventually(s, [&] { return s.pool.active() == 3; }));
  // Lowering it: running turns end, then at most one at a time.
  tunable->Set(1);
  s.gate = false;
  ASSERT_TRUE(Eventually(s, [&] { return s.turns >= 8; }));
  {
    WorkerPool::Lock l(s.pool.mu());
    s.max_active = 0;
  }
  for (int i = 0; i < 200; ++i) ASSERT_GE(s.Next(), 0);
  WorkerPool::Lock l(s.pool.mu());
  EXPECT_EQ(s.max_active, 1);
  EXPECT_FALSE(s.too_many);
}

TEST(WorkerPool, WakesOnlySleepersThatCanStart) {
  std::atomic<int64_t> wakeups{0};
  ToyStage s({.threads = 3, .parallelism = 3, .wakeups = &wakeups}, 1000);
  {
    WorkerPool::Lock l(s.pool.mu());
    s.hold = true;
    s.pool.Start();
  }
  ASSERT_TRUE(Eventually(s, [&] { return s.pool.idle_workers() == 3; }));
  {
    WorkerPool::Lock l(s.pool.mu());
    EXPECT_FALSE(s.pool.WorkerCanStart());  // asleep, but nothing to start: no signal
    EXPECT_EQ(s.turns, 0);
    s.hold = false;
    EXPECT_TRUE(s.pool.WorkerCanStart());
  }
  const int64_t w0 = wakeups.load();
  s.pool.WakeWorkers(1);  // one signal wakes one worker, which runs until the buffer is full
  ASSERT_TRUE(Eventually(s, [&] { return s.turns == 8 && s.pool.idle_workers() == 3; }));
  EXPECT_EQ(wakeups.load() - w0, 1) << "a single signal woke more than one worker";
  // The consumer: each element taken frees one buffer slot and wakes at most one worker.
  std::set<int64_t> seen;
  for (int64_t i; (i = s.Next()) >= 0;) EXPECT_TRUE(seen.insert(i).second);
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_LE(wakeups.load() - w0, 1000) << "more wake-ups than elements taken";
}

}  // namespace
}  // namespace strata::data
