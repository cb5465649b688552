// Internals shared by every stage: the iterator interface, the context an iterator is made
// in, the dataset node base class, the per-run Pipeline (statistics registry, AUTOTUNE
// knobs and the tuner thread) and the parts most stages are built from (OneInputNode, the
// iterator bases by what their state holds). Users see dataset.h; stages see this.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
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

using NodePtr = std::shared_ptr<const DatasetNode>;

// A stage with one input whose iterator wraps that input's iterator (most stages): the node
// keeps the stage's arguments and makes Iterator(ctx, the input's iterator, arguments...).
// Each argument reaches the iterator as a const reference to the node's copy, which outlives
// the iterator, so an iterator may keep a pointer to it (a function, an options struct).
template <typename Iterator, typename... Args>
class OneInputNode : public DatasetNode {
 public:
  OneInputNode(std::string name, NodePtr input, Status error, Args... args)
      : DatasetNode(std::move(name), {std::move(input)}, std::move(error)), args_(std::move(args)...) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, inputs()[0]->Make(ctx.Child(0)));
    return std::apply(
        [&](const Args&... args) { return std::unique_ptr<IteratorBase>(new Iterator(ctx, std::move(in), args...)); },
        args_);
  }

 private:
  const std::tuple<Args...> args_;
};

// A OneInputNode named `name`; `error` is the check of its arguments (OK when they are good).
template <typename Iterator, typename... Args>
NodePtr MakeOneInputNode(std::string name, NodePtr input, Status error, Args... args) {
  return std::make_shared<OneInputNode<Iterator, Args...>>(std::move(name), std::move(input), std::move(error),
                                                           std::move(args)...);
}

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

// A stage whose own position is one count, saved under `key` ahead of its input's position
// when it has an input: the next value of range, the next row of from_tensor_slices, the
// elements skip has skipped or take has taken, enumerate's next index, shard's place in its
// group, map's element index.
class CountingIterator : public StageIterator {
 public:
  CountingIterator(const IteratorContext& ctx, const std::string& name, std::string key, int64_t first,
                   std::unique_ptr<IteratorBase> input = nullptr)
      : StageIterator(ctx, name), input_(std::move(input)), position_(first), key_(std::move(key)) {}
  Status Save(IteratorState* st) override {
    st->SetInt(Key(key_), position_);
    return input_ ? input_->Save(st) : Status::OK();
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(position_, st.GetInt(Key(key_)));
    STRATA_RETURN_IF_ERROR(CheckPosition());
    if (!input_ || Finished()) return Status::OK();
    return input_->Restore(st);
  }

 protected:
  // Whether a restored position is one this stage reaches (shard: a place within its group).
  virtual Status CheckPosition() const { return Status::OK(); }
  // True when the stage hands out nothing more whatever its input holds (take, at its
  // count): its input's position is then not restored.
  virtual bool Finished() const { return false; }

  std::unique_ptr<IteratorBase> input_;  // null for a source
  int64_t position_;

 private:
  const std::string key_;
};

// skip and take: a CountingIterator over the first `count` elements of its input (-1: all of
// them), which skip drops and take lets through.
class UpToCountIterator : public CountingIterator {
 public:
  UpToCountIterator(const IteratorContext& ctx, const std::string& name, std::string key,
                    std::unique_ptr<IteratorBase> input, int64_t count)
      : CountingIterator(ctx, name, std::move(key), 0, std::move(input)), count_(count) {}

 protected:
  bool CountReached() const { return count_ >= 0 && position_ >= count_; }

 private:
  const int64_t count_;
};

// The input of a stage that makes its input's iterator itself, only when it runs the input
// and perhaps more than once (repeat: one per epoch; the caches: a pass not read back). The
// stage's state says whether it had one ("has_input") and, if so, that iterator's position.
class OnDemandInput {
 public:
  explicit OnDemandInput(NodePtr node) : node_(std::move(node)) {}
  IteratorBase* get() const { return it_.get(); }
  explicit operator bool() const { return it_ != nullptr; }
  void reset() { it_.reset(); }
  // A fresh iterator of the input, made in `ctx` (the stage's ctx.Child(0), with repeat's
  // epoch seed for repeat).
  Status Make(const IteratorContext& ctx) {
    STRATA_ASSIGN_OR_RETURN(it_, node_->Make(ctx));
    return Status::OK();
  }
  // `prefix` is the stage's.
  Status Save(IteratorState* st, const std::string& prefix) const {
    st->SetInt(prefix + "has_input", it_ != nullptr);
    return it_ ? it_->Save(st) : Status::OK();
  }
  // Whether the saved stage had an input iterator.
  static Result<bool> Saved(const IteratorState& st, const std::string& prefix) {
    STRATA_ASSIGN_OR_RETURN(int64_t has_input, st.GetInt(prefix + "has_input"));
    return has_input != 0;
  }
  // When the saved stage had one (`saved`), a fresh iterator made in `ctx` and restored to
  // its position; otherwise none is made.
  Status Restore(const IteratorState& st, bool saved, const IteratorContext& ctx) {
    if (!saved) return Status::OK();
    STRATA_RETURN_IF_ERROR(Make(ctx));
    return it_->Restore(st);
  }

 private:
  NodePtr node_;
  std::unique_ptr<IteratorBase> it_;
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

// The check of an element count where -1 means all (take, skip, repeat).
inline Status CheckCountOrAll(const std::string& stage, int64_t count) {
  if (count >= -1) return Status::OK();
  return InvalidArgument(stage + ": count must be >= -1, got " + std::to_string(count));
}

// The check of a threaded stage's num_parallel_calls (map, map_into, interleave).
inline Status CheckParallelCalls(const std::string& stage, int64_t n) {
  if (n == AUTOTUNE || (n >= 1 && n <= 1024)) return Status::OK();
  return InvalidArgument(stage + ": num_parallel_calls must be in [1, 1024] or AUTOTUNE, got " + std::to_string(n));
}

// A map's function, given with or without a generator (map, map_with_rng). With one, element
// `index` draws from a generator seeded from (seed, index): the same numbers whatever thread
// runs it (map, parallel map).
struct MapFunction {
  MapFn fn;
  MapRngFn rng_fn;
  bool given() const { return fn || rng_fn; }
  Result<Element> operator()(Element in, uint64_t seed, int64_t index) const {
    if (rng_fn) {
      Rng rng(MixSeed(seed, static_cast<uint64_t>(index)));
      return rng_fn(std::move(in), rng);
    }
    return fn(std::move(in));
  }
};

// ---- stage factories (one file each) --------------------------------------------------------
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
