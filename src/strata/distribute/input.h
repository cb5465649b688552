// Distributing input: tf.distribute's experimental_distribute_dataset and
// distribute_datasets_from_function, for custom loops over Strategy::run.
//
//   auto dist = distribute::experimental_distribute_dataset(*strategy, global_batches);
//   STRATA_ASSIGN_OR_RETURN(auto it, dist->make_iterator());
//   while (auto shards = it->Next().value()) {            // PerReplica<Element>
//     strategy->run<data::Element>(step_fn, *shards);      // fn(replica, its shard)
//   }
//
// experimental_distribute_dataset takes a dataset batched by the GLOBAL batch size B. Each
// step, replica r of the whole job gets B / num_replicas_in_sync rows. Across workers it
// auto-shards as tf.data does:
//   FILE  each worker reads every W-th file (the dataset must start from list_files or
//         from_strings, with at least W names) and takes B / W rows of its own stream per
//         step (a short last batch that cannot fill a step is dropped);
//   DATA  every worker reads everything and keeps its B / W rows of each global batch;
//   AUTO  FILE when the dataset has one file-name source with >= W names, else DATA.
// distribute_datasets_from_function calls fn once per worker with its InputContext; fn
// returns a dataset batched by the PER-REPLICA batch size, and each local replica takes the
// next element in turn.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "strata/core/status.h"
#include "strata/data/dataset.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

enum class AutoShardPolicy { kAuto, kFile, kData };

// What one input pipeline (one worker) is (tf.distribute.InputContext).
struct InputContext {
  int num_input_pipelines = 1;  // workers
  int input_pipeline_id = 0;    // this worker
  int num_replicas_in_sync = 1;
  // The global batch divided over every replica; an error when it does not divide.
  Result<int64_t> get_per_replica_batch_size(int64_t global_batch_size) const;
};

// Where this process's replicas sit in the job (from a Strategy, or given in tests).
struct Placement {
  int num_workers = 1;
  int worker_index = 0;
  int local_replicas = 1;
};
Placement PlacementOf(const Strategy& strategy);

class DistributedIterator {
 public:
  virtual ~DistributedIterator() = default;
  // This worker's replicas' inputs for the next step; nullopt at the end of the data.
  virtual Result<std::optional<PerReplica<data::Element>>> Next() = 0;
};

class DistributedDataset {
 public:
  enum class Mode { kFile, kData, kPerReplica };
  DistributedDataset(data::Dataset dataset, Mode mode, Placement placement)
      : dataset_(std::move(dataset)), mode_(mode), placement_(placement) {}
  Result<std::unique_ptr<DistributedIterator>> make_iterator() const;
  Mode mode() const { return mode_; }  // the auto-shard decision, for reports and tests

 private:
  data::Dataset dataset_;
  Mode mode_;
  Placement placement_;
};

Result<DistributedDataset> experimental_distribute_dataset(const Strategy& strategy, const data::Dataset& global_batches,
                                                           AutoShardPolicy policy = AutoShardPolicy::kAuto);
Result<DistributedDataset> experimental_distribute_dataset(Placement placement, const data::Dataset& global_batches,
                                                           AutoShardPolicy policy = AutoShardPolicy::kAuto);

using DatasetFn = std::function<Result<data::Dataset>(const InputContext&)>;
Result<DistributedDataset> distribute_datasets_from_function(const Strategy& strategy, const DatasetFn& fn);
Result<DistributedDataset> distribute_datasets_from_function(Placement placement, const DatasetFn& fn);

}  // namespace strata::distribute
