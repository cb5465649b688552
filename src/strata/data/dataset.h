// Dataset: tf.data in C++. A Dataset is an immutable description of a pipeline (a chain of
// stages, each a small class in its own file); make_iterator() runs it.
//
//   auto ds = data::Dataset::range(1000)
//                 .map(Square, {.num_parallel_calls = data::AUTOTUNE})
//                 .batch(128, {.drop_remainder = true})
//                 .prefetch(data::AUTOTUNE);
//   STRATA_ASSIGN_OR_RETURN(auto it, ds.make_iterator());
//   Element batch;
//   bool end = false;
//   while (true) { STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end)); if (end) break; ... }
//
// Errors are values: a bad argument (batch(0)) is recorded in the Dataset and returned by
// make_iterator(); a failing map function, a corrupt record or a shape mismatch in batch
// comes back from GetNext() with the stage and element named. After an error the iterator
// may be advanced again (tf.data semantics): the failed element is skipped.
//
// Threads: map/interleave with num_parallel_calls != 1, prefetch and TFRecordDataset with
// num_parallel_reads != 1 run their own threads, started on the first GetNext and joined
// when the iterator is destroyed. Every buffer has a bound. See docs/pipeline.md for the
// threading model, determinism rules and the AUTOTUNE algorithm.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/data/element.h"
#include "strata/data/rng.h"
#include "strata/data/stats.h"

namespace strata::data {

// Let the pipeline choose (parallelism, buffer sizes): see docs/pipeline.md, "AUTOTUNE".
constexpr int64_t AUTOTUNE = -1;

class DatasetNode;
class Iterator;

// Budgets for AUTOTUNE. The tuner spends at most `cpu_budget` threads' worth of
// parallelism and `ram_budget_bytes` of buffered elements across all tunable stages.
struct AutotuneOptions {
  bool enabled = true;             // false: AUTOTUNE stages stay at their starting values
  int cpu_budget = 0;              // threads; 0 = usable cores of this process
  int64_t ram_budget_bytes = 0;    // 0 = a quarter of the process's usable memory
  // Training replicas running on the same cores (a replica is a core). Each is charged
  // `replica_cpu_share` of a core against cpu_budget; the pipeline always keeps >= 1.
  int training_replicas = 0;
  double replica_cpu_share = 0.5;  // measured busy share of a replica outside next() waits
  int64_t period_ms = 50;          // first re-tuning interval; doubles up to 1 s
};

// Pipeline-wide options (tf.data's Options). with_options() anywhere in the chain applies
// to every stage; a stage's own `deterministic` field overrides it for that stage.
struct Options {
  std::optional<bool> deterministic;  // default true: the exact order, for any thread count
  std::optional<AutotuneOptions> autotune;
  // Keep freed memory mapped (process-wide mallopt, once: no mmap for large blocks, no
  // trim, one malloc arena), so batch and image buffers freed by the consumer are reused
  // without the ~11 us first touch per page.
  std::optional<bool> retain_freed_memory;  // default true
  // Auto-shard by file (tf.data's AutoShardPolicy.FILE, set by distribute's
  // experimental_distribute_dataset): every file-name source (list_files, from_strings)
  // keeps names i with i % num_shards == index.
  struct FileShard {
    int64_t num_shards = 1, index = 0;
  };
  std::optional<FileShard> shard_files;
  // tf.data's map_and_batch fusion: a map_into stage directly followed by batch writes each
  // element straight into its row of the batch (no per-element tensor, no copy).
  std::optional<bool> map_and_batch_fusion;  // default true
};

struct MapOptions {
  int64_t num_parallel_calls = 1;     // 1: run in the caller's thread; N or AUTOTUNE: workers
  std::optional<bool> deterministic;  // overrides Options::deterministic for this stage
  uint64_t seed = 0;                  // map_with_rng: the per-element generators derive from it
};
struct BatchOptions {
  bool drop_remainder = false;  // true: every batch has exactly n rows (static shapes)
};
struct PaddedBatchOptions {
  bool drop_remainder = false;
  // Per component: the padded shape (without the batch dim); -1 = the longest in the batch.
  // Empty: pad every dimension to the batch's longest.
  std::vector<std::vector<int64_t>> padded_shapes;
  double padding_value = 0;  // converted to each component's dtype
};
struct ShuffleOptions {
  std::optional<uint64_t> seed;           // unset: drawn once per iterator (saved with its state)
  bool reshuffle_each_iteration = true;   // a different order each epoch of an enclosing repeat
};
struct InterleaveOptions {
  int64_t cycle_length = AUTOTUNE;    // input elements open at once; AUTOTUNE = usable cores
  int64_t block_length = 1;           // consecutive elements taken from each
  int64_t num_parallel_calls = 1;     // 1: sequential; N or AUTOTUNE: reader threads
  std::optional<bool> deterministic;
  int64_t buffer_output_elements = 4;  // per open input, when parallel
};

using MapFn = std::function<Result<Element>(Element)>;
// A map whose randomness is reproducible: `rng` is seeded from (seed, epoch, element
// index), never from the thread that runs it.
using MapRngFn = std::function<Result<Element>(Element, Rng&)>;
using FilterFn = std::function<Result<bool>(const Element&)>;
// What a map_into function produces: each component's dtype and shape (names for a dict).
struct ElementSpec {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::vector<std::string> names;  // empty: a tuple
};
// Writes the mapped element into `out`, whose components are already allocated with the
// spec's dtypes and shapes (not zeroed: write every value; never replace a component).
// When a batch follows, they are views of the element's row in the batch. `rng` is seeded
// as in map_with_rng.
using MapIntoFn = std::function<Status(Element in, Rng& rng, Element& out)>;
class Dataset;
using InterleaveFn = std::function<Result<Dataset>(const Element&)>;

class Dataset {
 public:
  // ---- sources
  // Scalars i64 start, start+step, ... < stop (> stop for a negative step).
  static Dataset range(int64_t stop) { return range(0, stop, 1); }
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  // Slices every component along its first dimension (all must have the same extent):
  // element i is (c0[i], c1[i], ...), views of the given tensors (no copy).
  static Dataset from_tensor_slices(Element components);
  // Pairs up elements of `datasets` into tuples (or dicts when every input is a dict with
  // distinct keys); ends with the shortest.
  static Dataset zip(std::vector<Dataset> datasets);

  // ---- transformations
  Dataset map(MapFn fn, MapOptions options = {}) const;
  Dataset map_with_rng(MapRngFn fn, MapOptions options = {}) const;
  // map_with_rng whose function writes into a given destination: followed by batch, the
  // two run fused (Options::map_and_batch_fusion), each element written into its batch row.
  Dataset map_into(ElementSpec spec, MapIntoFn fn, MapOptions options = {}) const;
  Dataset filter(FilterFn predicate) const;
  Dataset batch(int64_t batch_size, BatchOptions options = {}) const;
  Dataset padded_batch(int64_t batch_size, PaddedBatchOptions options = {}) const;
  Dataset shuffle(int64_t buffer_size, ShuffleOptions options = {}) const;
  Dataset prefetch(int64_t buffer_size) const;  // N elements or AUTOTUNE
  Dataset repeat(int64_t count = -1) const;     // -1: forever
  Dataset take(int64_t count) const;            // -1: all
  Dataset skip(int64_t count) const;            // -1: all
  Dataset cache(std::string path = "") const;   // "": in memory; else a file (see element_codec.h)
  Dataset shard(int64_t num_shards, int64_t index) const;
  Dataset enumerate(int64_t start = 0) const;   // (i64 index, element...)
  Dataset ignore_errors() const;                // drops elements whose production failed
  Dataset interleave(InterleaveFn fn, InterleaveOptions options = {}) const;
  Dataset with_options(Options options) const;

  // ---- running it
  Result<std::unique_ptr<Iterator>> make_iterator() const;

  // Internals, for stages and recipes.
  explicit Dataset(std::shared_ptr<const DatasetNode> node) : node_(std::move(node)) {}
  const std::shared_ptr<const DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<const DatasetNode> node_;
};

class Pipeline;
class IteratorBase;

// A running pipeline. Not thread-safe: one consumer calls GetNext; Stats may be called from
// any thread at any time.
class Iterator {
 public:
  ~Iterator();
  // OK with *end_of_sequence == false: `*out` holds the next element.
  // OK with *end_of_sequence == true: the sequence is over (and stays over).
  Status GetNext(Element* out, bool* end_of_sequence);
  // The next element, std::nullopt at the end.
  Result<std::optional<Element>> Next();

  // Saves the position: what has been handed out is not handed out again after Restore;
  // buffered elements are saved with it. Parallel stages pause while this runs.
  Result<std::string> Save();
  // Replaces this iterator's position with a saved one (from an iterator over the same
  // Dataset description).
  Status Restore(std::string_view state);

  // Per-stage statistics, sources first.
  std::vector<StageStatsSnapshot> Stats() const;
  std::string StatsTable() const;
  double seconds_since_start() const;

 private:
  friend class Dataset;
  Iterator(std::shared_ptr<const DatasetNode> root, Options options);
  Status Init();

  std::shared_ptr<const DatasetNode> root_;
  Options options_;
  std::shared_ptr<Pipeline> pipeline_;
  std::unique_ptr<IteratorBase> impl_;
};

}  // namespace strata::data

#pragma GCC visibility pop
