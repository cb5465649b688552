// prefetch(n | AUTOTUNE): one producer thread keeps up to n elements ready ahead of the
// consumer, so the consumer's work (a training step) overlaps the pipeline's.
//
// AUTOTUNE: the bound is a Tunable the tuner grows while the consumer still finds the
// buffer empty and the RAM budget allows (docs/pipeline.md). End of sequence and errors
// are queued in order like elements. State: the queued entries and the input's position
// (the producer is parked while Save runs). Thread, parking and wake-ups: worker_pool.h
// (each side signals the other only when it waits, and with the lock released).
#include <deque>

#include "strata/data/pipeline.h"
#include "strata/data/worker_pool.h"

namespace strata::data {
namespace {

struct Entry {
  Status status;
  Element element;
  bool end = false;
};

class PrefetchIterator : public StageIterator, WorkerPool::Work {
 public:
  PrefetchIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t n)
      : StageIterator(ctx, "prefetch"), input_(std::move(input)),
        tunable_(n == AUTOTUNE ? ctx.pipeline->GetTunable(ctx.path, Tunable::Kind::kBufferSize, 1, 1, 4096) : nullptr),
        fixed_(n), pool_(this, {.threads = 1, .tunable = tunable_, .blocked_downstream_ns = &stats_->blocked_downstream_ns}) {
    stats_->buffer_capacity.store(capacity(), std::memory_order_relaxed);
  }

  ~PrefetchIterator() override { pool_.Stop(); }

  Status GetNext(Element* out, bool* end) override {
    std::unique_lock<std::mutex> l(pool_.mu());
    pool_.Start();
    if (buffer_.empty()) {
      const int64_t t0 = NowNanos();
      // `ended_` with an empty buffer only after restoring an inconsistent state (found by
      // fuzzing: it hung); treat it as the end.
      while (!(!buffer_.empty() || (ended_ && pool_.active() == 0))) pool_.WaitForWorkers(l);
      stats_->blocked_upstream_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
      if (buffer_.empty()) {
        *end = true;
        return Status::OK();
      }
    }
    Entry& e = buffer_.front();
    if (e.end) {  // sticky: stays queued
      *end = true;
      return Status::OK();
    }
    Status s = std::move(e.status);
    *out = std::move(e.element);
    buffer_.pop_front();
    stats_->buffer_fill.store(static_cast<int64_t>(buffer_.size()), std::memory_order_relaxed);
    const bool wake = pool_.idle_workers() > 0;  // only a waiting producer needs the signal
    l.unlock();
    pool_.WakeWorkers(wake);
    *end = false;
    if (s.ok()) stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return s;
  }

  Status Save(IteratorState* st) override {
    WorkerPool::Parked parked = pool_.Park();
    st->SetInt(Key("size"), static_cast<int64_t>(buffer_.size()));
    for (size_t i = 0; i < buffer_.size(); ++i) {
      const std::string k = "buffer/" + std::to_string(i);
      st->SetInt(Key(k + "/end"), buffer_[i].end);
      st->SetStatus(Key(k + "/status"), buffer_[i].status);
      st->SetElement(Key(k + "/element"), buffer_[i].element);
    }
    st->SetInt(Key("ended"), ended_);
    return input_->Save(st);
  }

  Status Restore(const IteratorState& st) override {
    std::lock_guard<std::mutex> l(pool_.mu());
    STRATA_ASSIGN_OR_RETURN(int64_t size, st.GetInt(Key("size")));
    if (size < 0 || size > 1 << 20) return Corruption("prefetch state holds " + std::to_string(size) + " entries");
    buffer_.clear();
    for (int64_t i = 0; i < size; ++i) {
      const std::string k = "buffer/" + std::to_string(i);
      Entry e;
      STRATA_ASSIGN_OR_RETURN(int64_t end, st.GetInt(Key(k + "/end")));
      e.end = end != 0;
      STRATA_RETURN_IF_ERROR(st.GetStatus(Key(k + "/status"), &e.status));
      STRATA_ASSIGN_OR_RETURN(e.element, st.GetElement(Key(k + "/element")));
      buffer_.push_back(std::move(e));
    }
    STRATA_ASSIGN_OR_RETURN(int64_t ended, st.GetInt(Key("ended")));
    ended_ = ended != 0;
    return input_->Restore(st);
  }

 private:
  int64_t capacity() const { return tunable_ ? tunable_->value() : fixed_; }

  // WorkerPool::Work, with the lock held: the producer reads one element per turn.
  bool CanStart() const override { return !ended_ && static_cast<int64_t>(buffer_.size()) < capacity(); }
  bool WillSleep() override { return !ended_; }  // waiting for room, not for the end
  bool Turn(WorkerPool::Lock& l) override {
    l.unlock();
    Entry e;
    e.status = input_->GetNext(&e.element, &e.end);
    if (!e.status.ok()) e.end = false;
    else if (!e.end) stats_->inputs.fetch_add(1, std::memory_order_relaxed);
    l.lock();
    if (e.end) ended_ = true;
    buffer_.push_back(std::move(e));
    stats_->buffer_fill.store(static_cast<int64_t>(buffer_.size()), std::memory_order_relaxed);
    stats_->buffer_capacity.store(capacity(), std::memory_order_relaxed);
    return true;
  }

  std::unique_ptr<IteratorBase> input_;
  const std::shared_ptr<Tunable> tunable_;
  const int64_t fixed_;
  std::deque<Entry> buffer_;  // guarded by pool_.mu()
  bool ended_ = false;
  WorkerPool pool_;  // last: its thread stops before the members above go
};

}  // namespace

NodePtr MakePrefetchNode(NodePtr input, int64_t n) {
  Status error = (n > 0 || n == AUTOTUNE)
                     ? Status::OK()
                     : InvalidArgument("prefetch: buffer_size must be > 0 or AUTOTUNE, got " + std::to_string(n));
  return MakeOneInputNode<PrefetchIterator>("prefetch", std::move(input), std::move(error), n);
}

}  // namespace strata::data
