// map_and_batch: map_into(spec, fn).batch(n) fused (tf.data's map_and_batch fusion; the node and
// the fusion rule are map_into_dataset.cc). Element i is given row i % n of batch i / n before
// fn runs, so fn writes its result straight into the batch buffer: no per-element tensor, no
// copy, and the row is still in cache when the consumer reads it.
//
// Threads (num_parallel_calls != 1): as parallel map. Workers read the input one at a time,
// so element i is the i-th input and lands in the same row for any thread count; they run
// the function without locks. A batch is handed out when all its rows are written:
// deterministic, the oldest; non-deterministic, any finished one. At most
// max(2, ceil(2 x parallelism / n)) batches are in flight. With num_parallel_calls == 1 the
// function runs in the consumer's thread.
//
// Errors: a failing function (or input) fails its whole batch, which is skipped; the next
// GetNext continues with the next batch (boundaries stay at multiples of n, the same for any
// thread count). Unfused, batch would instead drop only the rows before the failure and
// start its next batch after it: put ignore_errors() between map and batch for per-element
// skipping (that also turns fusion off).
//
// Buffers: every batch buffer is remembered (up to PoolBound(): the batches in flight here
// plus 6 held downstream, by a prefetch buffer and the consumer) and refilled once the
// consumer has dropped it, so the steady state allocates no batch memory and touches no
// fresh pages. Only past the bound is a remembered buffer replaced (and freed once released).
// Hand-offs (worker_pool.h): a worker wakes another only when one sleeps and can start; the
// consumer is woken once per finished batch, only when it waits. Statistics: two rows, the
// map's (at the map's path: elements, busy time, parallelism, rows in flight) and the batch's.
// State: next index, end flag and every batch in flight with the rows written so far (workers
// park while Save runs).
#include <algorithm>
#include <cstring>
#include <deque>

#include "strata/data/handoff_counters.h"
#include "strata/data/pipeline.h"
#include "strata/data/worker_pool.h"

namespace strata::data {
namespace {

struct Batch {
  int64_t first = 0;    // element index of row 0
  Element buf;          // one [n, ...spec shape] tensor per component
  int64_t claimed = 0;  // rows given to workers (read from the input)
  int64_t done = 0;     // rows finished (written, or failed)
  bool last = false;    // the input ended inside (or right after) this batch: `claimed` rows
  Status status;        // the error of its lowest failed row
  int64_t error_row = -1;
};

const BufferedState kBatchState{"map_and_batch", "batches", "batch", 1 << 16};

class MapAndBatchIterator : public StageIterator, WorkerPool::Work {
 public:
  MapAndBatchIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const ElementSpec* spec,
                      const MapIntoFn* fn, const MapOptions& o, int64_t n, bool drop_remainder)
      : StageIterator(ctx, "batch"), map_path_(ctx.Child(0).path), input_(std::move(input)), spec_(spec), fn_(fn),
        seed_(MixSeed(o.seed, ctx.epoch_seed)), deterministic_(Deterministic(o.deterministic, ctx)), n_(n),
        drop_remainder_(drop_remainder), inline_(o.num_parallel_calls == 1),
        map_stats_(ctx.pipeline->Stats(map_path_, o.num_parallel_calls == 1 ? "map" : "parallel_map")),
        pool_(this, PoolOptions(ctx, o, map_path_, map_stats_.get())) {
    map_stats_->parallelism.store(parallelism(), std::memory_order_relaxed);
  }

  ~MapAndBatchIterator() override { pool_.Stop(); }

  Status GetNext(Element* out, bool* end) override {
    if (inline_) return GetNextInline(out, end);
    std::unique_lock<std::mutex> l(pool_.mu());
    pool_.Start();
    const int64_t t0 = NowNanos();
    while (true) {
      auto it = batches_.end();
      for (auto b = batches_.begin(); b != batches_.end(); ++b) {
        if (Finished(**b)) {
          it = b;
          break;
        }
        if (deterministic_) break;
      }
      if (it != batches_.end()) {
        std::unique_ptr<Batch> b = std::move(*it);
        batches_.erase(it);
        UpdateFill();
        const bool wake = pool_.WorkerCanStart();
        l.unlock();
        pool_.WakeWorkers(wake);
        stats_->blocked_upstream_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
        if (!b->status.ok()) {
          *end = false;
          return b->status;
        }
        if (b->claimed < n_ && drop_remainder_) {  // the input's last, short batch
          l.lock();
          continue;
        }
        return HandOut(std::move(*b), out, end);
      }
      if (batches_.empty() && input_end_) {
        *end = true;
        return Status::OK();
      }
      pool_.WaitForWorkers(l);
    }
  }

  Status Save(IteratorState* st) override {
    WorkerPool::Parked parked = pool_.Park();
    auto save_batch = [&](const Batch& b, const std::string& k) {
      st->SetInt(k + "first", b.first);
      st->SetInt(k + "rows", b.claimed);
      st->SetInt(k + "last", b.last);
      st->SetInt(k + "error_row", b.error_row);
      st->SetStatus(k + "status", b.status);
      Status s;
      Element rows;
      rows.names = b.buf.names;
      for (const Tensor& t : b.buf.tensors) {
        auto r = t.Slice(0, 0, b.claimed);
        if (!r.ok()) {
          s = r.status();
          break;
        }
        rows.tensors.push_back(std::move(r).value());
      }
      st->SetElement(k + "rows_data", rows);
      return s;
    };
    STRATA_RETURN_IF_ERROR(kBatchState.Save(st, ctx_.prefix, next_index_, input_end_, batches_, save_batch));
    return input_->Save(st);
  }

  Status Restore(const IteratorState& st) override {
    std::lock_guard<std::mutex> l(pool_.mu());
    auto restore_batch = [&](int64_t i, const std::string& k, Batch& b) -> Status {
      STRATA_ASSIGN_OR_RETURN(b.first, st.GetInt(k + "first"));
      STRATA_ASSIGN_OR_RETURN(b.claimed, st.GetInt(k + "rows"));
      STRATA_ASSIGN_OR_RETURN(int64_t last, st.GetInt(k + "last"));
      STRATA_ASSIGN_OR_RETURN(b.error_row, st.GetInt(k + "error_row"));
      STRATA_RETURN_IF_ERROR(st.GetStatus(k + "status", &b.status));
      STRATA_ASSIGN_OR_RETURN(Element rows, st.GetElement(k + "rows_data"));
      if (b.claimed < 0 || b.claimed > n_ || rows.size() != spec_->dtypes.size())
        return Corruption("map_and_batch state: batch " + std::to_string(i) + " has " + std::to_string(b.claimed) +
                          " rows of " + std::to_string(rows.size()) + " components; expected <= " +
                          std::to_string(n_) + " rows of " + std::to_string(spec_->dtypes.size()));
      b.last = last != 0;
      b.done = b.claimed;
      b.buf = Allocate();
      for (size_t c = 0; c < rows.size(); ++c) {
        const Tensor src = rows[c].is_contiguous() ? rows[c] : rows[c].Contiguous();
        const size_t want = b.buf[c].nbytes() / n_ * b.claimed;
        if (src.dtype() != spec_->dtypes[c] || src.nbytes() != want)
          return Corruption("map_and_batch state: batch " + std::to_string(i) + " component " + std::to_string(c) +
                            " is " + src.DebugString() + ", not " + std::to_string(b.claimed) + " rows of " +
                            std::string(DTypeName(spec_->dtypes[c])) + spec_->shapes[c].ToString());
        std::memcpy(b.buf[c].raw_data(), src.raw_data(), want);
      }
      return Status::OK();
    };
    STRATA_RETURN_IF_ERROR(kBatchState.Restore(st, ctx_.prefix, &next_index_, &input_end_, &batches_, restore_batch));
    return input_->Restore(st);
  }

 private:
  // Threads for num_parallel_calls != 1 (1: none, the consumer's thread runs fn).
  static WorkerPool::Options PoolOptions(const IteratorContext& ctx, const MapOptions& o, const std::string& path,
                                         StageStats* map_stats) {
    WorkerPool::Options p = WorkerPool::Parallel(ctx, path, o.num_parallel_calls, ctx.pipeline->cpu_budget());
    if (o.num_parallel_calls == 1) p.threads = 0;
    p.blocked_downstream_ns = &map_stats->blocked_downstream_ns;
    return p;
  }
  int64_t parallelism() const { return pool_.parallelism(); }
  int64_t MaxBatches() const { return std::max<int64_t>(2, (2 * parallelism() + n_ - 1) / n_); }
  // Batch buffers remembered for reuse: the most batches in flight here (at the highest
  // parallelism) plus 6 downstream (a prefetch buffer's, the one its producer is queueing,
  // the consumer's).
  size_t PoolBound() const {
    const int64_t p = pool_.max_parallelism();
    return static_cast<size_t>(std::max<int64_t>(2, (2 * p + n_ - 1) / n_) + 6);
  }
  // With the lock held. Workers are woken one at a time (pool_.WorkerCanStart()): the input
  // is read by one worker at a time, and each, once it has read, wakes the next if it can.
  bool Finished(const Batch& b) const { return b.done == b.claimed && (b.claimed == n_ || b.last); }
  bool HasFreeRow() const {
    return (!batches_.empty() && batches_.back()->claimed < n_ && !batches_.back()->last) ||
           static_cast<int64_t>(batches_.size()) < MaxBatches();
  }
  bool CanStart() const override { return !input_end_ && !reading_ && HasFreeRow(); }
  bool WillSleep() override { return !HasFreeRow(); }
  void UpdateFill() {
    int64_t rows = 0;
    for (const auto& b : batches_) rows += b->claimed;
    map_stats_->buffer_fill.store(rows, std::memory_order_relaxed);
    map_stats_->buffer_capacity.store(MaxBatches() * n_, std::memory_order_relaxed);
  }

  // A batch buffer: a remembered one the consumer has let go of, else a new one (remembered
  // too, up to PoolBound()). Called by the thread that reads the input (one at a time), which
  // owns buffers_.
  Element Allocate() {
    for (Element& b : buffers_) {
      bool free = true;
      for (const Tensor& t : b.tensors) free = free && t.sole_owner();
      if (free) {
        std::atomic_thread_fence(std::memory_order_acquire);  // see batch_dataset.cc
        Element e = b;  // stays remembered
        return e;
      }
    }
    Element e;
    e.names = spec_->names;
    for (size_t c = 0; c < spec_->dtypes.size(); ++c) {
      std::vector<int64_t> dims{n_};
      dims.insert(dims.end(), spec_->shapes[c].dims().begin(), spec_->shapes[c].dims().end());
      e.tensors.push_back(Tensor::Empty(spec_->dtypes[c], Shape(std::move(dims))));  // every row is written
    }
    internal::Counters().batch_buffers_allocated.fetch_add(1, std::memory_order_relaxed);
    if (buffers_.size() < PoolBound()) {
      buffers_.push_back(e);
    } else {  // more in flight than the bound: replace the oldest (freed once released)
      buffers_[next_buffer_] = e;
      next_buffer_ = (next_buffer_ + 1) % buffers_.size();
    }
    return e;
  }

  // Views of row `r` of `buf`, shaped like the spec.
  Result<Element> Row(const Element& buf, int64_t r) const {
    Element row;
    row.names = spec_->names;
    for (size_t c = 0; c < buf.size(); ++c) {
      STRATA_ASSIGN_OR_RETURN(Tensor s, buf[c].Slice(0, r, r + 1));
      STRATA_ASSIGN_OR_RETURN(Tensor v, s.Reshape(spec_->shapes[c]));
      row.tensors.push_back(std::move(v));
    }
    return row;
  }

  // Runs the function for element `index` into row `r` of `buf`; the error names both.
  Status MapRow(Element in, const Element& buf, int64_t index, int64_t r) {
    Status s = [&]() -> Status {
      STRATA_ASSIGN_OR_RETURN(Element row, Row(buf, r));
      Rng rng(MixSeed(seed_, static_cast<uint64_t>(index)));
      return RunMapInto(*fn_, std::move(in), rng, row);
    }();
    if (s.ok()) return s;
    return s.WithContext("map_into (stage " + map_path_ + ", fused into batch " + ctx_.path + "): element " +
                         std::to_string(index) + " (row " + std::to_string(r) + " of its batch)");
  }

  Status HandOut(Batch b, Element* out, bool* end) {
    if (b.claimed < n_)
      for (auto& t : b.buf.tensors) {
        STRATA_ASSIGN_OR_RETURN(t, t.Slice(0, 0, b.claimed));
      }
    *end = false;
    *out = std::move(b.buf);
    stats_->inputs.fetch_add(b.claimed, std::memory_order_relaxed);
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

  // num_parallel_calls == 1: rows are read and written in the consumer's thread.
  Status GetNextInline(Element* out, bool* end) {
    const int64_t t0 = NowNanos();
    int64_t fn_ns = 0, upstream_ns = 0;
    Batch b;
    b.first = next_index_;
    for (; b.claimed < n_; ++b.claimed) {
      Element in;
      bool in_end = false;
      const int64_t a = NowNanos();
      Status s = input_->GetNext(&in, &in_end);
      upstream_ns += NowNanos() - a;
      if (s.ok() && in_end) {
        b.last = true;
        break;
      }
      if (b.buf.tensors.empty()) b.buf = Allocate();
      const int64_t index = next_index_++;
      if (s.ok()) {
        map_stats_->inputs.fetch_add(1, std::memory_order_relaxed);
        if (b.status.ok()) {
          const int64_t f0 = NowNanos();
          s = MapRow(std::move(in), b.buf, index, b.claimed);
          fn_ns += NowNanos() - f0;
          map_stats_->AddElement(static_cast<int64_t>(b.buf.nbytes() / n_));
        }
      }
      if (!s.ok() && b.status.ok()) b.status = s;
    }
    map_stats_->busy_ns.fetch_add(fn_ns, std::memory_order_relaxed);
    map_stats_->blocked_upstream_ns.fetch_add(upstream_ns, std::memory_order_relaxed);
    stats_->busy_ns.fetch_add(NowNanos() - t0 - fn_ns - upstream_ns, std::memory_order_relaxed);
    stats_->blocked_upstream_ns.fetch_add(fn_ns + upstream_ns, std::memory_order_relaxed);
    if (!b.status.ok()) {
      *end = false;
      return b.status;
    }
    if (b.claimed == 0 || (drop_remainder_ && b.claimed < n_)) {
      *end = true;
      return Status::OK();
    }
    return HandOut(std::move(b), out, end);
  }

  // WorkerPool::Work: read one input (alone), then write its row without the lock. True
  // (wake a waiting consumer) only when the turn finished a batch: not 64 times per batch,
  // since on two cores each wake-up preempts a worker.
  bool Turn(WorkerPool::Lock& l) override {
    reading_ = true;
    if (batches_.empty() || batches_.back()->claimed == n_) {
      batches_.push_back(std::make_unique<Batch>());
      batches_.back()->first = next_index_;
    }
    Batch* b = batches_.back().get();
    const int64_t r = b->claimed++;
    const int64_t index = next_index_++;
    map_stats_->parallelism.store(parallelism(), std::memory_order_relaxed);
    UpdateFill();
    l.unlock();

    // This thread alone reads the input and owns buffers_ until reading_ is cleared.
    if (r == 0 && b->buf.tensors.empty()) b->buf = Allocate();
    Element in;
    bool end = false;
    Status s = input_->GetNext(&in, &end);

    l.lock();
    reading_ = false;
    if (s.ok() && end) {
      --b->claimed;
      --next_index_;
      b->last = true;
      input_end_ = true;
      if (b->claimed == 0) batches_.pop_back();  // it is the last one
      UpdateFill();
      return true;
    }
    if (!s.ok()) {
      Fail(b, r, s);
      return true;
    }
    map_stats_->inputs.fetch_add(1, std::memory_order_relaxed);
    Element buf = b->buf;  // the batch cannot be handed out before this row is done
    const bool wake = pool_.WorkerCanStart();  // another worker waits to read the input
    l.unlock();
    pool_.WakeWorkers(wake);

    const int64_t t0 = NowNanos();
    s = MapRow(std::move(in), buf, index, r);
    map_stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
    map_stats_->AddElement(static_cast<int64_t>(buf.nbytes() / n_));
    buf = Element{};

    l.lock();
    if (!s.ok()) {
      Fail(b, r, s);
    } else {
      ++b->done;
    }
    return Finished(*b);
  }

  // With the lock held: row r of b failed with s.
  void Fail(Batch* b, int64_t r, const Status& s) {
    if (b->error_row < 0 || r < b->error_row) {
      b->error_row = r;
      b->status = s;
    }
    ++b->done;
  }

  const std::string map_path_;
  std::unique_ptr<IteratorBase> input_;
  const ElementSpec* spec_;
  const MapIntoFn* fn_;
  const uint64_t seed_;
  const bool deterministic_;
  const int64_t n_;
  const bool drop_remainder_;
  const bool inline_;  // num_parallel_calls == 1: fn runs in the consumer's thread
  std::shared_ptr<StageStats> map_stats_;

  // Guarded by pool_.mu().
  std::deque<std::unique_ptr<Batch>> batches_;  // in input order
  int64_t next_index_ = 0;
  bool reading_ = false;  // a worker is inside input_->GetNext
  bool input_end_ = false;
  // Batch buffers for reuse (shared with what was handed out); owned by the reader.
  std::vector<Element> buffers_;
  size_t next_buffer_ = 0;
  WorkerPool pool_;  // last: its threads stop before the members above go
};

}  // namespace

std::unique_ptr<IteratorBase> MakeMapAndBatchIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input,
                                                      const ElementSpec* spec, const MapIntoFn* fn, const MapOptions& o,
                                                      int64_t n, bool drop_remainder) {
  return std::make_unique<MapAndBatchIterator>(ctx, std::move(input), spec, fn, o, n, drop_remainder);
}

}  // namespace strata::data
