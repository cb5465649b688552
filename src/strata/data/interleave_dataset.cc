// interleave(fn, {.cycle_length, .block_length, .num_parallel_calls, .deterministic}):
// fn maps each input element (a file name) to a Dataset (that file's records); up to
// cycle_length of them are open at once and block_length elements are taken from each in
// turn. When one ends, the next input element takes its place in the cycle.
//
// Sequential (num_parallel_calls == 1): the consumer reads the open datasets itself.
// Parallel: worker threads fill a small buffer per open dataset (buffer_output_elements),
// always serving the open dataset the consumer will reach soonest. Deterministic: the
// consumer waits for the dataset whose turn it is. Non-deterministic: when that one has
// nothing ready it takes from the next one that does (a slow file, or a slow decode, does
// not stall the others).
//
// Hand-offs: workers refill in bursts. They sleep until the buffered elements fall to half
// of what the open datasets can hold (or the consumer finds nothing to take), then read
// until every buffer is full. So a worker is woken once per ~half a buffer of elements, not
// once per element: on a machine whose cores are all decoding, each wake-up preempts a
// decoder (and, on a VM, costs a reschedule interrupt). Only as many workers as can find
// work are woken (worker_pool.h has who signals whom). Workers run SCHED_BATCH (Linux): a
// woken worker does not preempt the consumer that woke it, but runs at the next scheduling
// point; half a buffer is left to cover the delay.
//
// State: the cursor, each open dataset's source element (fn is run again on restore),
// its iterator position and its buffered elements, and the input's position.
#include <algorithm>
#include <deque>

#include "strata/data/handoff_counters.h"
#include "strata/data/pipeline.h"
#include "strata/data/worker_pool.h"

namespace strata::data {
namespace {

struct Entry {
  Status status;
  Element element;
};

struct CycleSlot {
  bool active = false;   // holds an open dataset
  bool busy = false;     // a worker is inside it->GetNext
  bool ended = false;    // it returned end of sequence
  Element source;        // the input element fn opened
  std::shared_ptr<const DatasetNode> node;  // keeps fn's dataset alive
  std::unique_ptr<IteratorBase> it;
  std::deque<Entry> buffer;
};

class InterleaveIterator : public StageIterator, WorkerPool::Work {
 public:
  InterleaveIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const InterleaveFn& fn,
                     const InterleaveOptions& o)
      : StageIterator(ctx, o.num_parallel_calls == 1 ? "interleave" : "parallel_interleave"),
        input_(std::move(input)), fn_(&fn), block_length_(o.block_length),
        parallel_(o.num_parallel_calls != 1), deterministic_(Deterministic(o.deterministic, ctx)),
        per_slot_buffer_(std::max<int64_t>(1, o.buffer_output_elements)),
        cycle_length_(o.cycle_length == AUTOTUNE ? std::max(2, ctx.pipeline->cpu_budget()) : o.cycle_length),
        slots_(cycle_length_), pool_(this, PoolOptions(ctx, o, cycle_length_)) {
    if (parallel_) {
      stats_->parallelism.store(pool_.parallelism(), std::memory_order_relaxed);
      stats_->buffer_capacity.store(cycle_length_ * per_slot_buffer_, std::memory_order_relaxed);
    }
  }

  ~InterleaveIterator() override { pool_.Stop(); }

  Status GetNext(Element* out, bool* end) override {
    std::unique_lock<std::mutex> l(pool_.mu());
    pool_.Start();
    int64_t waited_from = 0;
    auto done_waiting = [&] {
      if (waited_from) stats_->blocked_upstream_ns.fetch_add(NowNanos() - waited_from, std::memory_order_relaxed);
    };
    while (true) {
      CycleSlot& s = slots_[cur_];
      if (!s.active || (s.ended && s.buffer.empty())) {
        if (s.active) CloseSlot(s);
        if (!input_end_) {
          STRATA_RETURN_IF_ERROR(OpenSlot(cur_, l));
          if (s.active) continue;
        }
        if (AllInactive()) {
          done_waiting();
          *end = true;
          return Status::OK();
        }
        Advance();
        continue;
      }
      if (!parallel_) {
        // Sequential: read in place.
        l.unlock();
        Entry e;
        bool e_end = false;
        const int64_t t0 = NowNanos();
        e.status = s.it->GetNext(&e.element, &e_end);
        stats_->blocked_upstream_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
        l.lock();
        if (e.status.ok() && e_end) {
          s.ended = true;
          continue;
        }
        s.buffer.push_back(std::move(e));
      }
      if (s.buffer.empty()) {
        if (!deterministic_) {
          // Take from the next open dataset that has something ready.
          int found = -1;
          for (int k = 1; k < cycle_length_ && found < 0; ++k) {
            const int j = static_cast<int>((cur_ + k) % cycle_length_);
            if (slots_[j].active && !slots_[j].buffer.empty()) found = j;
          }
          if (found >= 0) {
            cur_ = found;
            block_pos_ = 0;
            continue;
          }
        }
        if (!waited_from) waited_from = NowNanos();
        // Nothing to take: the workers must not wait for the watermark. Signalled with the lock
        // held (the wait below releases it at once), so no signal can be lost in between.
        refill_ = true;
        pool_.WakeWorkers(WorkersToWake());
        pool_.WaitForWorkers(l);
        continue;
      }
      Entry e = std::move(s.buffer.front());
      s.buffer.pop_front();
      if (++block_pos_ >= block_length_) Advance();
      int wake = 0;
      if (parallel_) {
        --buffered_;
        stats_->buffer_fill.fetch_sub(1, std::memory_order_relaxed);
        if (!refill_ && buffered_ * 2 <= Capacity()) {  // the low watermark: a burst starts
          refill_ = true;
          wake = WorkersToWake();
        }
      }
      l.unlock();
      pool_.WakeWorkers(wake);
      done_waiting();
      *end = false;
      if (!e.status.ok()) return e.status;
      *out = std::move(e.element);
      stats_->AddElement(static_cast<int64_t>(out->nbytes()));
      return Status::OK();
    }
  }

  Status Save(IteratorState* st) override {
    WorkerPool::Parked parked = pool_.Park();
    return SaveLocked(st);
  }

  Status Restore(const IteratorState& st) override {
    std::lock_guard<std::mutex> l(pool_.mu());
    STRATA_ASSIGN_OR_RETURN(int64_t cur, st.GetInt(Key("cur")));
    STRATA_ASSIGN_OR_RETURN(block_pos_, st.GetInt(Key("block_pos")));
    STRATA_ASSIGN_OR_RETURN(int64_t input_end, st.GetInt(Key("input_end")));
    STRATA_ASSIGN_OR_RETURN(int64_t cycle, st.GetInt(Key("cycle_length")));
    if (cycle != cycle_length_)
      return InvalidArgument("interleave state has cycle_length " + std::to_string(cycle) + ", this iterator " +
                             std::to_string(cycle_length_) + " (restore with the same options and cpu budget)");
    if (cur < 0 || cur >= cycle_length_) return Corruption("interleave state cursor out of range");
    cur_ = static_cast<int>(cur);
    input_end_ = input_end != 0;
    for (int i = 0; i < cycle_length_; ++i) {
      CycleSlot& s = slots_[i];
      const std::string k = "slot/" + std::to_string(i);
      STRATA_ASSIGN_OR_RETURN(int64_t active, st.GetInt(Key(k + "/active")));
      if (!active) continue;
      STRATA_ASSIGN_OR_RETURN(int64_t ended, st.GetInt(Key(k + "/ended")));
      STRATA_ASSIGN_OR_RETURN(s.source, st.GetElement(Key(k + "/source")));
      Result<Dataset> ds = (*fn_)(s.source);
      if (!ds.ok()) return ds.status();
      s.node = ds->node();
      STRATA_ASSIGN_OR_RETURN(s.it, s.node->Make(SlotContext(i)));
      STRATA_RETURN_IF_ERROR(s.it->Restore(st));
      s.active = true;
      s.ended = ended != 0;
      STRATA_ASSIGN_OR_RETURN(int64_t n, st.GetInt(Key(k + "/size")));
      if (n < 0 || n > 1 << 20) return Corruption("interleave state: bad buffer size");
      for (int64_t j = 0; j < n; ++j) {
        Entry e;
        const std::string kj = k + "/buffer/" + std::to_string(j);
        STRATA_RETURN_IF_ERROR(st.GetStatus(Key(kj + "/status"), &e.status));
        STRATA_ASSIGN_OR_RETURN(e.element, st.GetElement(Key(kj + "/element")));
        s.buffer.push_back(std::move(e));
        ++buffered_;
      }
    }
    return input_->Restore(st);
  }

 private:
  // No threads when sequential. AUTOTUNE: parallelism in [1, min(cycle_length, budget)].
  static WorkerPool::Options PoolOptions(const IteratorContext& ctx, const InterleaveOptions& o, int cycle_length) {
    const int64_t n = o.num_parallel_calls;
    WorkerPool::Options p;
    if (n != 1)
      p = WorkerPool::Parallel(ctx, ctx.path, n == AUTOTUNE ? n : std::min<int64_t>(n, cycle_length),
                               std::min<int64_t>(cycle_length, ctx.pipeline->cpu_budget()));
    p.wakeups = &internal::Counters().interleave_worker_wakeups;
    p.batch_scheduling = true;
    return p;
  }

  // With the lock held. What the open datasets can buffer.
  int64_t Capacity() const {
    int64_t n = 0;
    for (const auto& s : slots_) n += s.active && !s.ended ? per_slot_buffer_ : 0;
    return n;
  }
  // With the lock held. Some open dataset has buffer room not already being filled.
  bool HasRoom() const {
    for (const auto& s : slots_)
      if (s.active && !s.ended && static_cast<int64_t>(s.buffer.size()) + (s.busy ? 1 : 0) < per_slot_buffer_)
        return true;
    return false;
  }
  // With the lock held: how many sleeping workers a burst should wake: those that will find an
  // open dataset to read (not more than the parallelism allows).
  int WorkersToWake() const {
    if (!parallel_ || pool_.idle_workers() == 0) return 0;
    int64_t rooms = 0;
    for (const auto& s : slots_)
      rooms += s.active && !s.busy && !s.ended && static_cast<int64_t>(s.buffer.size()) < per_slot_buffer_;
    return static_cast<int>(
        std::max<int64_t>(0, std::min({pool_.parallelism() - pool_.active(), rooms, pool_.idle_workers()})));
  }

  IteratorContext SlotContext(int i) const {
    IteratorContext c = ctx_;
    c.path += ".f";  // one statistics row for all open datasets
    c.prefix += "s" + std::to_string(i) + "/";
    return c;
  }

  Status SaveLocked(IteratorState* st) {
    st->SetInt(Key("cur"), cur_);
    st->SetInt(Key("block_pos"), block_pos_);
    st->SetInt(Key("input_end"), input_end_);
    st->SetInt(Key("cycle_length"), cycle_length_);
    for (int i = 0; i < cycle_length_; ++i) {
      const CycleSlot& s = slots_[i];
      const std::string k = "slot/" + std::to_string(i);
      st->SetInt(Key(k + "/active"), s.active);
      if (!s.active) continue;
      st->SetInt(Key(k + "/ended"), s.ended);
      st->SetElement(Key(k + "/source"), s.source);
      STRATA_RETURN_IF_ERROR(s.it->Save(st));
      st->SetInt(Key(k + "/size"), static_cast<int64_t>(s.buffer.size()));
      for (size_t j = 0; j < s.buffer.size(); ++j) {
        const std::string kj = k + "/buffer/" + std::to_string(j);
        st->SetStatus(Key(kj + "/status"), s.buffer[j].status);
        st->SetElement(Key(kj + "/element"), s.buffer[j].element);
      }
    }
    return input_->Save(st);
  }

  bool AllInactive() const {
    for (const auto& s : slots_)
      if (s.active) return false;
    return true;
  }
  void Advance() {
    cur_ = (cur_ + 1) % cycle_length_;
    block_pos_ = 0;
  }
  void CloseSlot(CycleSlot& s) {
    s.it.reset();
    s.node.reset();
    s.active = false;
    s.ended = false;
  }

  // Opens the next input element into slot i (the lock released meanwhile; workers skip
  // inactive slots). Leaves the slot inactive when the input is exhausted.
  Status OpenSlot(int i, std::unique_lock<std::mutex>& l) {
    l.unlock();
    Element src;
    bool end = false;
    const int64_t t0 = NowNanos();
    Status s = input_->GetNext(&src, &end);
    std::unique_ptr<IteratorBase> it;
    std::shared_ptr<const DatasetNode> node;
    if (s.ok() && !end) {
      stats_->inputs.fetch_add(1, std::memory_order_relaxed);
      Result<Dataset> ds = (*fn_)(src);
      if (ds.ok()) {
        node = ds->node();
        auto made = node->Make(SlotContext(i));
        if (made.ok()) it = std::move(made).value();
        else s = made.status();
      } else {
        s = Annotate(ds.status());
      }
    }
    stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
    l.lock();
    if (!s.ok()) return s;
    if (end) {
      input_end_ = true;
      return Status::OK();
    }
    CycleSlot& slot = slots_[i];
    slot.source = std::move(src);
    slot.node = std::move(node);
    slot.it = std::move(it);
    slot.active = true;
    slot.ended = false;
    slot.buffer.clear();
    block_pos_ = 0;
    refill_ = true;  // an empty buffer to fill
    const int wake = WorkersToWake();
    l.unlock();
    pool_.WakeWorkers(wake);
    l.lock();
    return Status::OK();
  }

  // The open dataset a worker should serve next: the first, in the consumer's order from
  // the cursor, that is idle, not ended and has buffer room.
  int PickSlot() const {
    for (int k = 0; k < cycle_length_; ++k) {
      const int j = static_cast<int>((cur_ + k) % cycle_length_);
      const CycleSlot& s = slots_[j];
      if (s.active && !s.busy && !s.ended && static_cast<int64_t>(s.buffer.size()) < per_slot_buffer_) return j;
    }
    return -1;
  }

  // WorkerPool::Work, with the lock held. Workers read only during a burst (refill_).
  bool CanStart() const override { return refill_ && PickSlot() >= 0; }
  bool WillSleep() override {
    if (refill_ && !HasRoom()) refill_ = false;  // every buffer full: the burst is over
    return false;
  }
  // One element from the open dataset the consumer will reach soonest.
  bool Turn(WorkerPool::Lock& l) override {
    CycleSlot& s = slots_[PickSlot()];  // the one CanStart() found: the lock was held since
    s.busy = true;
    IteratorBase* it = s.it.get();
    l.unlock();
    Entry e;
    bool e_end = false;
    e.status = it->GetNext(&e.element, &e_end);
    l.lock();
    s.busy = false;
    if (e.status.ok() && e_end) {
      s.ended = true;
    } else {
      s.buffer.push_back(std::move(e));
      ++buffered_;
      stats_->buffer_fill.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }

  std::unique_ptr<IteratorBase> input_;
  const InterleaveFn* fn_;
  const int64_t block_length_;
  const bool parallel_;
  const bool deterministic_;
  const int64_t per_slot_buffer_;
  const int cycle_length_;

  // Guarded by pool_.mu().
  std::vector<CycleSlot> slots_;
  int cur_ = 0;
  int64_t block_pos_ = 0;
  int64_t buffered_ = 0;  // elements in all slot buffers (parallel)
  bool refill_ = true;    // workers read until every buffer is full, then clear it
  bool input_end_ = false;
  WorkerPool pool_;  // last: its threads stop before the members above go
};

Status Check(const InterleaveFn& fn, const InterleaveOptions& o) {
  if (!fn) return InvalidArgument("interleave: no function given");
  if (o.cycle_length != AUTOTUNE && (o.cycle_length < 1 || o.cycle_length > 4096))
    return InvalidArgument("interleave: cycle_length must be in [1, 4096] or AUTOTUNE, got " +
                           std::to_string(o.cycle_length));
  if (o.block_length < 1) return InvalidArgument("interleave: block_length must be >= 1, got " + std::to_string(o.block_length));
  return CheckParallelCalls("interleave", o.num_parallel_calls);
}

}  // namespace

NodePtr MakeInterleaveNode(NodePtr input, InterleaveFn fn, InterleaveOptions o) {
  Status error = Check(fn, o);
  return MakeOneInputNode<InterleaveIterator>(o.num_parallel_calls == 1 ? "interleave" : "parallel_interleave",
                                              std::move(input), std::move(error), std::move(fn), o);
}

}  // namespace strata::data
