// The worker threads of one threaded stage (parallel map, map_and_batch, parallel interleave,
// prefetch) and the hand-off rules they share. The stage says what a turn of work is
// (WorkerPool::Work); the pool owns the threads, the one lock, sleeping and waking, the
// autotune subscription, parking while Save runs, and stop/join. Internal to data/.
//
// Guarantees. All state named here, and all the stage's shared state, is guarded by mu().
// - Turns. A worker starts a turn when !parked && active() < parallelism() && CanStart(),
//   checked in the same critical section in which the turn begins: what CanStart() saw
//   still holds when Turn() starts. active() counts the turns begun and not ended. Turn() is
//   entered and left with mu held and releases it for the expensive part (reading the input,
//   running the function). A turn is never interrupted, not by Park() nor by Stop().
// - Who waits where. A worker with nothing to start waits on the worker condition variable
//   (counted in idle_workers()) until Stop(), or until it can start. The consumer (one
//   thread) waits in WaitForWorkers() (counted in consumer_waiting()). Save waits in Park().
// - Who signals whom, when. The hand-offs (a turn ended; work to start) signal only a thread
//   that waits, and, except where noted, after mu is released, so the woken thread does not
//   block on it at once. The rare events (stop, unpark, a tunable change) wake everyone.
//   * A worker ending a turn whose Turn() returned true signals the consumer, if it waits
//     (mu released, then retaken before the worker's next check).
//   * The stage wakes workers with WakeWorkers(n), n computed under mu from idle_workers()
//     (WorkerCanStart() for the usual "one, if one sleeps and can start"); with or without
//     mu held (with it held, no signal can fall between a check and a wait that releases mu).
//   * The pool wakes all workers on Stop(), on the end of a Park(), and when the tunable
//     changes (the subscription notifies under mu, so a change is never missed).
//   * The last turn to end while parked signals Park().
// - Parking. Park() sets parked, waits until active() == 0 and returns holding mu: no turn is
//   half done and none starts, so the stage saves its buffers and its input's position with
//   nothing moving (no element lost, none read twice). Ending the Parked object clears
//   parked, releases mu and wakes every worker.
// - Stopping. Stop() (idempotent; the destructor calls it) sets stop under mu, wakes all,
//   joins and unsubscribes. A stage calls it first thing in its destructor, while the members
//   its turns use still exist.
// Exactly-once delivery, order and buffer bounds are the stage's: the pool never sees an element.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/data/pipeline.h"

namespace strata::data {

class WorkerPool {
 public:
  using Lock = std::unique_lock<std::mutex>;

  // What a stage's workers do. Every call is made with mu held.
  class Work {
   public:
    virtual ~Work() = default;
    // The stage's own condition for a turn (the pool adds !parked and the parallelism bound).
    virtual bool CanStart() const = 0;
    // One turn; may release l and must return with it held. True: the consumer may find
    // something new (it is signalled if it waits).
    virtual bool Turn(Lock& l) = 0;
    // A worker is about to sleep (CanStart() is false, or the pool's bounds). True: count the
    // sleep as blocked downstream (Options::blocked_downstream_ns).
    virtual bool WillSleep() { return false; }
  };

  struct Options {
    int threads = 0;          // started by Start(); 0: the stage runs no threads
    int64_t parallelism = 1;  // turns at once, unless `tunable` is a parallelism
    // Subscribed: a change wakes every worker. Kind kParallelism: its value is parallelism().
    std::shared_ptr<Tunable> tunable;
    std::atomic<int64_t>* blocked_downstream_ns = nullptr;  // sleeps WillSleep() counted
    std::atomic<int64_t>* wakeups = nullptr;                // +1 each time a worker wakes
    bool batch_scheduling = false;  // workers run SCHED_BATCH (Linux; best effort)
  };

  // For num_parallel_calls n: AUTOTUNE, `autotune_max` threads and a parallelism Tunable at
  // `path` in [1, autotune_max] starting at 1; else n threads, parallelism n.
  static Options Parallel(const IteratorContext& ctx, const std::string& path, int64_t n, int64_t autotune_max);

  WorkerPool(Work* work, Options o);
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::mutex& mu() { return mu_; }
  int64_t parallelism() const {
    return o_.tunable && o_.tunable->kind() == Tunable::Kind::kParallelism ? o_.tunable->value() : o_.parallelism;
  }
  int64_t max_parallelism() const {
    return o_.tunable && o_.tunable->kind() == Tunable::Kind::kParallelism ? o_.tunable->max() : o_.parallelism;
  }

  // Starts the threads, once (call with mu held, from the consumer's first GetNext).
  void Start();
  void Stop();

  // With mu held.
  int64_t active() const { return active_; }
  int64_t idle_workers() const { return idle_; }
  bool consumer_waiting() const { return consumer_waiting_ > 0; }
  bool parked() const { return parked_; }
  // A worker sleeps and could start a turn now.
  bool WorkerCanStart() const { return idle_ > 0 && Ready(); }
  // The consumer waits for a worker's turn to end (or a spurious wake-up: re-check).
  void WaitForWorkers(Lock& l);

  void WakeWorkers(int64_t n) {
    for (int64_t i = 0; i < n; ++i) worker_cv_.notify_one();
  }

  class Parked {
   public:
    ~Parked();
    Parked(const Parked&) = delete;
    Parked& operator=(const Parked&) = delete;

   private:
    friend class WorkerPool;
    explicit Parked(WorkerPool* pool);
    WorkerPool* pool_;
    Lock l_;
  };
  // Holds mu with every worker parked until the result is destroyed.
  [[nodiscard]] Parked Park() { return Parked(this); }

 private:
  bool Ready() const { return !parked_ && active_ < parallelism() && work_->CanStart(); }
  void Loop();

  Work* const work_;
  const Options o_;
  int sub_ = -1;
  std::mutex mu_;
  std::condition_variable worker_cv_, consumer_cv_, parked_cv_;
  int64_t active_ = 0, idle_ = 0, consumer_waiting_ = 0;
  bool parked_ = false, stop_ = false;
  std::vector<std::thread> threads_;
};

// The saved state of an ordered threaded stage (parallel map, map_and_batch), beside its
// input's: the next input index handed out, whether its input has ended, how many entries
// (slots, batches) it holds, then each entry's fields under "<prefix><entry>/<i>/"
// ("0/slot/3/index"), written by the stage's save_entry(entry, key) and read back by its
// restore_entry(i, key, entry) into a fresh entry. Save with the workers parked, Restore with
// mu held.
struct BufferedState {
  std::string stage;    // "parallel_map"
  std::string entries;  // "slots": a count above `max` is Corruption ("parallel_map state holds 9999999 slots")
  std::string entry;    // "slot"
  int64_t max;

  template <typename Entry, typename SaveEntry>
  Status Save(IteratorState* st, const std::string& prefix, int64_t next_index, bool input_end,
              const std::deque<std::unique_ptr<Entry>>& buffered, SaveEntry save_entry) const {
    st->SetInt(prefix + "next_index", next_index);
    st->SetInt(prefix + "input_end", input_end);
    st->SetInt(prefix + "size", static_cast<int64_t>(buffered.size()));
    for (size_t i = 0; i < buffered.size(); ++i)
      STRATA_RETURN_IF_ERROR(save_entry(*buffered[i], EntryKey(prefix, static_cast<int64_t>(i))));
    return Status::OK();
  }

  template <typename Entry, typename RestoreEntry>
  Status Restore(const IteratorState& st, const std::string& prefix, int64_t* next_index, bool* input_end,
                 std::deque<std::unique_ptr<Entry>>* buffered, RestoreEntry restore_entry) const {
    STRATA_ASSIGN_OR_RETURN(int64_t next, st.GetInt(prefix + "next_index"));
    STRATA_ASSIGN_OR_RETURN(int64_t end, st.GetInt(prefix + "input_end"));
    STRATA_ASSIGN_OR_RETURN(int64_t size, st.GetInt(prefix + "size"));
    if (size < 0 || size > max) return Corruption(stage + " state holds " + std::to_string(size) + " " + entries);
    *next_index = next;
    *input_end = end != 0;
    buffered->clear();
    for (int64_t i = 0; i < size; ++i) {
      auto e = std::make_unique<Entry>();
      STRATA_RETURN_IF_ERROR(restore_entry(i, EntryKey(prefix, i), *e));
      buffered->push_back(std::move(e));
    }
    return Status::OK();
  }

 private:
  std::string EntryKey(const std::string& prefix, int64_t i) const {
    return prefix + entry + "/" + std::to_string(i) + "/";
  }
};

}  // namespace strata::data
