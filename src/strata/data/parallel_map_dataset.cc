// map(fn, {.num_parallel_calls = N | AUTOTUNE}): fn runs on worker threads.
//
// Workers take input elements one at a time (the input is read by one worker at a time,
// so element i is always the i-th input), each gets a slot in an ordered queue, runs fn
// without locks and marks the slot ready. Deterministic: the consumer takes the oldest
// slot when it is ready. Non-deterministic: the consumer takes any ready slot, so one slow
// element does not hold back the fast ones behind it. The queue holds at most
// 2 x parallelism slots (running + finished); AUTOTUNE moves parallelism within
// [1, cpu budget] (docs/pipeline.md). When the function takes under 20 us per element a
// worker takes up to 16 consecutive elements per turn (and the queue bound scales with it),
// so the hand-off does not cost more than the work. Threads, parking and wake-ups:
// worker_pool.h (a worker wakes one more only when one sleeps and can start).
//
// map_with_rng seeds each element's generator from (seed, epoch, element index): the same
// numbers whatever thread runs it. State: the finished slots, the next index and the
// input's position (workers finish their current element and park while Save runs).
#include <deque>

#include "strata/data/pipeline.h"
#include "strata/data/worker_pool.h"

namespace strata::data {
namespace {

struct Slot {
  int64_t index = 0;
  bool ready = false;
  Status status;
  Element element;
};

const BufferedState kSlotState{"parallel_map", "slots", "slot", 1 << 20};

class ParallelMapIterator : public StageIterator, WorkerPool::Work {
 public:
  ParallelMapIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const MapFunction& fn,
                      const MapOptions& o)
      : StageIterator(ctx, "parallel_map"), input_(std::move(input)), fn_(&fn),
        seed_(MixSeed(o.seed, ctx.epoch_seed)), deterministic_(Deterministic(o.deterministic, ctx)),
        pool_(this, PoolOptions(ctx, o.num_parallel_calls, stats_.get())) {
    stats_->parallelism.store(pool_.parallelism(), std::memory_order_relaxed);
  }

  ~ParallelMapIterator() override { pool_.Stop(); }

  Status GetNext(Element* out, bool* end) override {
    std::unique_lock<std::mutex> l(pool_.mu());
    pool_.Start();
    int64_t t0 = 0;
    while (true) {
      auto it = slots_.end();
      if (deterministic_) {
        if (!slots_.empty() && slots_.front()->ready) it = slots_.begin();
      } else {
        for (auto s = slots_.begin(); s != slots_.end(); ++s)
          if ((*s)->ready) {
            it = s;
            break;
          }
      }
      if (it != slots_.end()) {
        std::unique_ptr<Slot> slot = std::move(*it);
        slots_.erase(it);
        stats_->buffer_fill.store(static_cast<int64_t>(slots_.size()), std::memory_order_relaxed);
        const bool wake = pool_.WorkerCanStart();
        l.unlock();
        pool_.WakeWorkers(wake);
        if (t0) stats_->blocked_upstream_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
        *end = false;
        if (!slot->status.ok()) return slot->status;
        *out = std::move(slot->element);
        stats_->AddElement(static_cast<int64_t>(out->nbytes()));
        return Status::OK();
      }
      if (slots_.empty() && input_end_) {
        *end = true;
        return Status::OK();
      }
      if (!t0) t0 = NowNanos();
      pool_.WaitForWorkers(l);
    }
  }

  Status Save(IteratorState* st) override {
    WorkerPool::Parked parked = pool_.Park();
    auto save_slot = [&](const Slot& slot, const std::string& k) {
      st->SetInt(k + "index", slot.index);
      st->SetStatus(k + "status", slot.status);
      st->SetElement(k + "element", slot.element);
      return Status::OK();
    };
    STRATA_RETURN_IF_ERROR(kSlotState.Save(st, ctx_.prefix, next_index_, input_end_, slots_, save_slot));
    return input_->Save(st);
  }

  Status Restore(const IteratorState& st) override {
    std::lock_guard<std::mutex> l(pool_.mu());
    auto restore_slot = [&](int64_t, const std::string& k, Slot& slot) -> Status {
      STRATA_ASSIGN_OR_RETURN(slot.index, st.GetInt(k + "index"));
      STRATA_RETURN_IF_ERROR(st.GetStatus(k + "status", &slot.status));
      STRATA_ASSIGN_OR_RETURN(slot.element, st.GetElement(k + "element"));
      slot.ready = true;
      return Status::OK();
    };
    STRATA_RETURN_IF_ERROR(kSlotState.Restore(st, ctx_.prefix, &next_index_, &input_end_, &slots_, restore_slot));
    return input_->Restore(st);
  }

 private:
  static WorkerPool::Options PoolOptions(const IteratorContext& ctx, int64_t n, StageStats* stats) {
    WorkerPool::Options p = WorkerPool::Parallel(ctx, ctx.path, n, ctx.pipeline->cpu_budget());
    p.blocked_downstream_ns = &stats->blocked_downstream_ns;
    return p;
  }

  // WorkerPool::Work, with mu held.
  bool CanStart() const override {
    return !input_end_ && !reading_ && static_cast<int64_t>(slots_.size()) < Capacity();
  }
  bool WillSleep() override { return static_cast<int64_t>(slots_.size()) >= Capacity(); }

  // Elements a worker takes per turn: 1 for real work; up to kMaxChunk when the function
  // is so cheap (< 20 us) that the hand-off would cost more than the work.
  static constexpr int64_t kMaxChunk = 16;
  int64_t Chunk() const {
    const int64_t n = stats_->elements.load(std::memory_order_relaxed);
    if (n < 64) return 1;
    const double per = static_cast<double>(stats_->busy_ns.load(std::memory_order_relaxed)) / n;
    return per < 20000 ? kMaxChunk : 1;
  }
  int64_t Capacity() const { return 2 * pool_.parallelism() * chunk_; }

  // One turn: read up to Chunk() inputs (alone), map them without the lock, mark them ready.
  bool Turn(WorkerPool::Lock& l) override {
    thread_local std::vector<Slot*> mine;
    thread_local std::vector<Element> ins;
    reading_ = true;
    chunk_ = Chunk();
    // Claim k consecutive slots: nobody else pushes while this worker holds the input.
    const int64_t k = std::max<int64_t>(1, std::min<int64_t>(chunk_, Capacity() - static_cast<int64_t>(slots_.size())));
    mine.clear();
    for (int64_t j = 0; j < k; ++j) {
      slots_.push_back(std::make_unique<Slot>());
      mine.push_back(slots_.back().get());
      mine.back()->index = next_index_++;
    }
    stats_->buffer_fill.store(static_cast<int64_t>(slots_.size()), std::memory_order_relaxed);
    stats_->parallelism.store(pool_.parallelism(), std::memory_order_relaxed);
    l.unlock();

    ins.resize(k);
    int64_t got = 0;  // inputs read successfully
    bool end = false;
    Status error;
    for (; got < k; ++got) {
      Status s = input_->GetNext(&ins[got], &end);
      if (!s.ok()) {
        error = s;
        break;
      }
      if (end) break;
    }

    l.lock();
    reading_ = false;
    // Another worker may read the input now: signalled once the lock is released.
    const bool wake = pool_.WorkerCanStart();
    // Slots after the last input read (end, or an error at `got`) go back; they are last.
    const int64_t used = got + (error.ok() ? 0 : 1);
    for (int64_t j = k; j > used; --j) {
      slots_.pop_back();
      --next_index_;
    }
    if (end) input_end_ = true;
    if (!error.ok()) {
      mine[got]->status = error;
      mine[got]->ready = true;
    }
    stats_->inputs.fetch_add(got, std::memory_order_relaxed);
    l.unlock();
    pool_.WakeWorkers(wake);
    if (got == 0) {
      l.lock();
      return true;
    }

    const int64_t t0 = NowNanos();
    for (int64_t j = 0; j < got; ++j) {
      Slot* slot = mine[j];
      Result<Element> r = (*fn_)(std::move(ins[j]), seed_, slot->index);
      if (r.ok()) {
        slot->element = std::move(r).value();
      } else {
        slot->status = Annotate(r.status().WithContext("element " + std::to_string(slot->index)));
      }
    }
    stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);

    l.lock();
    for (int64_t j = 0; j < got; ++j) mine[j]->ready = true;
    return true;
  }

  std::unique_ptr<IteratorBase> input_;
  const MapFunction* fn_;
  const uint64_t seed_;
  const bool deterministic_;

  // Guarded by pool_.mu().
  std::deque<std::unique_ptr<Slot>> slots_;  // in input order
  int64_t next_index_ = 0;
  int64_t chunk_ = 1;     // elements per worker turn (see Chunk)
  bool reading_ = false;  // a worker is inside input_->GetNext
  bool input_end_ = false;
  WorkerPool pool_;  // last: its threads stop before the members above go
};

}  // namespace

NodePtr MakeParallelMapNode(NodePtr input, MapFn fn, MapRngFn rng_fn, MapOptions options) {
  MapFunction f{std::move(fn), std::move(rng_fn)};
  Status error = f.given() ? CheckParallelCalls("map", options.num_parallel_calls)
                           : InvalidArgument("map: no function given");
  return MakeOneInputNode<ParallelMapIterator>("parallel_map", std::move(input), std::move(error), std::move(f),
                                               options);
}

}  // namespace strata::data
