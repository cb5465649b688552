// Internals shared by every stage: the iterator interface, the context an iterator is made
// in, the dataset node base class and the per-run Pipeline (statistics registry, AUTOTUNE
// knobs and the tuner thread). Users see dataset.h; stages see this.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/clock.h"
#include "strata/core/status.h"
#include "strata/data/dataset.h"
#include "strata/data/element.h"
#include "strata/data/iterator_state.h"
#include "strata/data/stats.h"

namespace strata::data {

// A value AUTOTUNE may change while the pipeline runs: a stage's parallelism or buffer
// size. Shared by every iterator of one stage (see StageStats); stages subscribe to be
// woken when it changes.
class Tunable {
 public:
  enum class Kind { kParallelism, kBufferSize };
  Tunable(Kind kind, int64_t initial, int64_t min, int64_t max, std::shared_ptr<StageStats> stats);
  Kind kind() const { return kind_; }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }
  int64_t min() const { return min_; }
  int64_t max() const { return max_; }
  const std::shared_ptr<StageStats>& stats() const { return stats_; }
  void Set(int64_t v);  // clamps to [min, max], wakes subscribers
  int Subscribe(std::function<void()> on_change);
  void Unsubscribe(int id);

 private:
  const Kind kind_;
  const int64_t min_, max_;
  std::atomic<int64_t> value_;
  std::shared_ptr<StageStats> stats_;
  std::mutex mu_;
  std::map<int, std::function<void()>> subscribers_;
  int next_id_ = 0;
};

class Autotuner;

// One per Iterator: what all its stages share.
class Pipeline {
 public:
  explicit Pipeline(Options options);
  ~Pipeline();  // stops the tuner
  const Options& options() const { return options_; }
  bool deterministic() const { return options_.deterministic.value_or(true); }
  const AutotuneOptions& autotune() const { return autotune_; }
  // The effective CPU budget for parallel stages (threads), after replicas are charged.
  int cpu_budget() const;
  int64_t ram_budget_bytes() const;

  // The statistics of the stage at `path` (created on first use).
  std::shared_ptr<StageStats> Stats(const std::string& path, const std::string& name);
  // The tunable `kind` of the stage at `path` (created on first use with `initial`).
  std::shared_ptr<Tunable> GetTunable(const std::string& path, Tunable::Kind kind, int64_t initial, int64_t min,
                                      int64_t max);
  std::vector<StageStatsSnapshot> Snapshot() const;
  std::vector<std::shared_ptr<Tunable>> Tunables() const;

  // Starts the tuner thread if any stage is AUTOTUNE and autotune is enabled (idempotent).
  void StartAutotune();
  // Root consumer timing, for the tuner's target rate: call around each root GetNext.
  void RecordConsumerCall(int64_t start_ns, int64_t end_ns);
  int64_t start_ns() const { return start_ns_; }

  // A T shared by every iterator of one stage in this run (a memory cache), made on first use.
  template <typename T>
  std::shared_ptr<T> Resource(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto& r = resources_[key];
    if (!r) r = std::make_shared<T>();
    return std::static_pointer_cast<T>(r);
  }

 private:
  std::map<std::string, std::shared_ptr<void>> resources_;
  Options options_;
  AutotuneOptions autotune_;
  int64_t start_ns_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<StageStats>> stats_;
  std::map<std::string, std::shared_ptr<Tunable>> tunables_;
  std::unique_ptr<Autotuner> tuner_;
  friend class Autotuner;
  // Consumer (root) timing: time the consumer spent outside GetNext (its own work).
  std::atomic<int64_t> consumer_calls_{0};
  std::atomic<int64_t> consumer_outside_ns_{0};
  int64_t last_call_end_ns_ = 0;
};

// Where an iterator is made: the pipeline it belongs to, its place in the tree and the
// seed/epoch state that flows down from repeat.
struct IteratorContext {
  std::shared_ptr<Pipeline> pipeline;
  std::string path = "0";     // statistics path (shared by re-created iterators of a stage)
  std::string prefix = "0/";  // state key prefix (unique per live iterator)
  uint64_t epoch_seed = 0;    // changes every epoch of an enclosing repeat
  bool deterministic = true;  // the pipeline-wide setting

  // The context of input `i`.
  IteratorContext Child(int i) const {
    IteratorContext c = *this;
    c.path += "." + std::to_string(i);
    c.prefix += std::to_string(i) + "/";
    return c;
  }
};

class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  // See Iterator::GetNext.
  virtual Status GetNext(Element* out, bool* end_of_sequence) = 0;
  // Writes this iterator's position (and its inputs') under its prefix.
  virtual Status Save(IteratorState* state) = 0;
  // Restores a freshly made iterator (before its first GetNext) to a saved position.
  virtual Status Restore(const IteratorState& state) = 0;
  // True when a freshly made iterator of this stage, in this process or a new one, gives the
  // same elements in the same order as this one did: a shuffle above it may then save where
  // its buffered elements were in that order instead of their bytes (shuffle_dataset.cc).
  virtual bool ReplaysFromStart() const { return false; }
};

class DatasetNode {
 public:
  DatasetNode(std::string name, std::vector<std::shared_ptr<const DatasetNode>> inputs, Status error = Status::OK())
      : name_(std::move(name)), inputs_(std::move(inputs)), error_(std::move(error)) {}
  virtual ~DatasetNode() = default;
  const std::string& name() const { return name_; }
  const std::vector<std::shared_ptr<const DatasetNode>>& inputs() const { return inputs_; }
  // A bad argument given when the stage was built ("batch: batch_size must be > 0, got 0").
  const Status& error() const { return error_; }
  virtual const Options* options() const { return nullptr; }
  // A file-name source's names (list_files, from_strings), else null: auto-shard by file.
  virtual const std::vector<std::string>* file_names() const { return nullptr; }

  // Makes this stage's iterator (and, through it, its inputs').
  Result<std::unique_ptr<IteratorBase>> Make(const IteratorContext& ctx) const {
    if (!error_.ok()) return error_;
    return MakeIterator(ctx);
  }

 protected:
  virtual Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const = 0;

 private:
  std::string name_;
  std::vector<std::shared_ptr<const DatasetNode>> inputs_;
  Status error_;
};

// Common state of a stage's iterator.
class StageIterator : public IteratorBase {
 public:
  StageIterator(const IteratorContext& ctx, const std::string& name)
      : ctx_(ctx), stats_(ctx.pipeline->Stats(ctx.path, name)) {}

 protected:
  std::string Key(std::string_view k) const { return ctx_.prefix + std::string(k); }
  // Names the stage in an error: "batch (stage 0.1): ".
  Status Annotate(const Status& s) const;
  IteratorContext ctx_;
  std::shared_ptr<StageStats> stats_;
};

// A stage whose position is its input's: it holds nothing between elements that a restore
// needs (batch, padded_batch, filter, ignore_errors).
class PassThroughStateIterator : public StageIterator {
 public:
  PassThroughStateIterator(const IteratorContext& ctx, const std::string& name, std::unique_ptr<IteratorBase> input)
      : StageIterator(ctx, name), input_(std::move(input)) {}
  Status Save(IteratorState* st) override { return input_->Save(st); }
  Status Restore(const IteratorState& st) override { return input_->Restore(st); }

 protected:
  std::unique_ptr<IteratorBase> input_;
};

// A source whose position is one count (range: the next value; from_tensor_slices: the next
// row), saved under "next".
class CountingSourceIterator : public StageIterator {
 public:
  CountingSourceIterator(const IteratorContext& ctx, const std::string& name, int64_t first)
      : StageIterator(ctx, name), next_(first) {}
  Status Save(IteratorState* st) override {
    st->SetInt(Key("next"), next_);
    return Status::OK();
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(next_, st.GetInt(Key("next")));
    return Status::OK();
  }

 protected:
  int64_t next_;
};

// Times one GetNext of a synchronous stage: its own work goes to busy_ns, the time inside
// its input's GetNext to blocked_upstream_ns.
class StageTimer {
 public:
  explicit StageTimer(StageStats* s) : s_(s), t0_(NowNanos()) {}
  ~StageTimer() {
    s_->busy_ns.fetch_add(NowNanos() - t0_ - upstream_, std::memory_order_relaxed);
    s_->blocked_upstream_ns.fetch_add(upstream_, std::memory_order_relaxed);
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  // input->GetNext, timed and counted.
  Status Input(IteratorBase* input, Element* e, bool* end) {
    const int64_t a = NowNanos();
    Status s = input->GetNext(e, end);
    upstream_ += NowNanos() - a;
    if (s.ok() && !*end) s_->inputs.fetch_add(1, std::memory_order_relaxed);
    return s;
  }

 private:
  StageStats* s_;
  int64_t t0_;
  int64_t upstream_ = 0;
};

// Resolves a stage's deterministic setting: its own override, else the pipeline's.
inline bool Deterministic(const std::optional<bool>& stage, const IteratorContext& ctx) {
  return stage.value_or(ctx.deterministic);
}

// ---- stage factories (one file each) --------------------------------------------------------
using NodePtr = std::shared_ptr<const DatasetNode>;
NodePtr MakeRangeNode(int64_t start, int64_t stop, int64_t step);
NodePtr MakeTensorSlicesNode(Element components);
NodePtr MakeZipNode(std::vector<NodePtr> inputs);
NodePtr MakeMapNode(NodePtr input, MapFn fn, MapRngFn rng_fn, MapOptions options);
NodePtr MakeParallelMapNode(NodePtr input, MapFn fn, MapRngFn rng_fn, MapOptions options);
NodePtr MakeMapIntoNode(NodePtr input, ElementSpec spec, MapIntoFn fn, MapOptions options);
// batch over a map_into stage (options stages between them are looked through) with fusion
// on: the fused map_and_batch iterator; otherwise null (map_into_dataset.cc).
Result<std::unique_ptr<IteratorBase>> MaybeMakeMapAndBatch(const IteratorContext& ctx, const NodePtr& input,
                                                           int64_t batch_size, bool drop_remainder);
// The fused iterator (map_and_batch_dataset.cc); spec and fn are the map_into node's.
std::unique_ptr<IteratorBase> MakeMapAndBatchIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input,
                                                      const ElementSpec* spec, const MapIntoFn* fn, const MapOptions& o,
                                                      int64_t n, bool drop_remainder);
// Runs a map_into function into `out` and checks it wrote into, not replaced, its components.
Status RunMapInto(const MapIntoFn& fn, Element in, Rng& rng, Element& out);
NodePtr MakeFilterNode(NodePtr input, FilterFn fn);
NodePtr MakeBatchNode(NodePtr input, int64_t batch_size, BatchOptions options);
NodePtr MakePaddedBatchNode(NodePtr input, int64_t batch_size, PaddedBatchOptions options);
NodePtr MakeShuffleNode(NodePtr input, int64_t buffer_size, ShuffleOptions options);
NodePtr MakePrefetchNode(NodePtr input, int64_t buffer_size);
NodePtr MakeRepeatNode(NodePtr input, int64_t count);
NodePtr MakeTakeNode(NodePtr input, int64_t count);
NodePtr MakeSkipNode(NodePtr input, int64_t count);
NodePtr MakeMemoryCacheNode(NodePtr input);
NodePtr MakeFileCacheNode(NodePtr input, std::string path);
NodePtr MakeShardNode(NodePtr input, int64_t num_shards, int64_t index);
NodePtr MakeEnumerateNode(NodePtr input, int64_t start);
NodePtr MakeIgnoreErrorsNode(NodePtr input);
NodePtr MakeInterleaveNode(NodePtr input, InterleaveFn fn, InterleaveOptions options);
NodePtr MakeOptionsNode(NodePtr input, Options options);

}  // namespace strata::data
