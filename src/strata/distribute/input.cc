#include "strata/distribute/input.h"

#include "strata/data/pipeline.h"

namespace strata::distribute {
namespace {

void FindFileSources(const data::DatasetNode& node, std::vector<const std::vector<std::string>*>* out) {
  if (const auto* names = node.file_names()) out->push_back(names);
  for (const auto& in : node.inputs()) FindFileSources(*in, out);
}

// Rows [begin, end) of every component: views, no copy.
Result<data::Element> Rows(const data::Element& e, int64_t begin, int64_t end) {
  data::Element out;
  out.names = e.names;
  for (size_t i = 0; i < e.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(Tensor t, e[i].Slice(0, begin, end));
    out.tensors.push_back(std::move(t));
  }
  return out;
}

Result<int64_t> BatchRows(const data::Element& e) {
  if (e.size() == 0) return InvalidArgument("distributed dataset: an element with no components");
  const int64_t rows = e[0].rank() > 0 ? e[0].shape()[0] : -1;
  for (size_t i = 0; i < e.size(); ++i)
    if (e[i].rank() == 0 || e[i].shape()[0] != rows)
      return InvalidArgument("distributed dataset: elements must be batches with one leading batch dimension; got " +
                             e.DebugString());
  return rows;
}

// Cuts `rows` rows for each of `replicas` replicas from one element.
Result<PerReplica<data::Element>> Split(const data::Element& e, int64_t begin, int64_t per_replica, int replicas) {
  PerReplica<data::Element> out;
  for (int r = 0; r < replicas; ++r) {
    STRATA_ASSIGN_OR_RETURN(data::Element shard, Rows(e, begin + r * per_replica, begin + (r + 1) * per_replica));
    out.values.push_back(std::move(shard));
  }
  return out;
}

// DATA: every worker reads every global batch and keeps its rows.
class DataIterator final : public DistributedIterator {
 public:
  DataIterator(std::unique_ptr<data::Iterator> it, Placement p) : it_(std::move(it)), p_(p) {}
  Result<std::optional<PerReplica<data::Element>>> Next() override {
    STRATA_ASSIGN_OR_RETURN(std::optional<data::Element> e, it_->Next());
    if (!e) return std::optional<PerReplica<data::Element>>();
    STRATA_ASSIGN_OR_RETURN(int64_t rows, BatchRows(*e));
    const int64_t replicas = static_cast<int64_t>(p_.num_workers) * p_.local_replicas;
    if (rows % replicas != 0)
      return InvalidArgument("distributed dataset: a global batch of " + std::to_string(rows) + " rows does not split over " +
                             std::to_string(replicas) + " replicas (" + e->DebugString() +
                             "); batch with a multiple of num_replicas_in_sync and drop_remainder");
    const int64_t per_replica = rows / replicas;
    STRATA_ASSIGN_OR_RETURN(auto shards, Split(*e, per_replica * p_.local_replicas * p_.worker_index, per_replica,
                                               p_.local_replicas));
    return std::optional<PerReplica<data::Element>>(std::move(shards));
  }

 private:
  std::unique_ptr<data::Iterator> it_;
  Placement p_;
};

// FILE: this worker's own stream (its files), rebatched from B to B / W rows per step.
class FileIterator final : public DistributedIterator {
 public:
  FileIterator(std::unique_ptr<data::Iterator> it, Placement p) : it_(std::move(it)), p_(p) {}
  Result<std::optional<PerReplica<data::Element>>> Next() override {
    if (step_rows_ < 0) {  // the first global batch fixes B
      STRATA_ASSIGN_OR_RETURN(bool more, Refill());
      if (!more) return std::optional<PerReplica<data::Element>>();
      STRATA_ASSIGN_OR_RETURN(int64_t b, BatchRows(current_));
      const int64_t replicas = static_cast<int64_t>(p_.num_workers) * p_.local_replicas;
      if (b % replicas != 0)
        return InvalidArgument("distributed dataset: a global batch of " + std::to_string(b) + " rows does not split over " +
                               std::to_string(replicas) + " replicas (" + current_.DebugString() + ")");
      step_rows_ = b / p_.num_workers;
    }
    // B / W rows of the current batch per step, as views. A short batch (the end of a stream
    // batched without drop_remainder) cannot fill a step: its rows are dropped.
    while (rows_ - offset_ < step_rows_) {
      STRATA_ASSIGN_OR_RETURN(bool more, Refill());
      if (!more) return std::optional<PerReplica<data::Element>>();
    }
    STRATA_ASSIGN_OR_RETURN(auto shards, Split(current_, offset_, step_rows_ / p_.local_replicas, p_.local_replicas));
    offset_ += step_rows_;
    return std::optional<PerReplica<data::Element>>(std::move(shards));
  }

 private:
  Result<bool> Refill() {
    STRATA_ASSIGN_OR_RETURN(std::optional<data::Element> e, it_->Next());
    if (!e) return false;
    STRATA_ASSIGN_OR_RETURN(rows_, BatchRows(*e));
    current_ = std::move(*e);
    offset_ = 0;
    return true;
  }

  std::unique_ptr<data::Iterator> it_;
  Placement p_;
  data::Element current_;
  int64_t rows_ = 0, offset_ = 0, step_rows_ = -1;
};

// From a function: each local replica takes the next per-replica batch in turn.
class PerReplicaIterator final : public DistributedIterator {
 public:
  PerReplicaIterator(std::unique_ptr<data::Iterator> it, Placement p) : it_(std::move(it)), p_(p) {}
  Result<std::optional<PerReplica<data::Element>>> Next() override {
    PerReplica<data::Element> out;
    for (int r = 0; r < p_.local_replicas; ++r) {
      STRATA_ASSIGN_OR_RETURN(std::optional<data::Element> e, it_->Next());
      if (!e) return std::optional<PerReplica<data::Element>>();  // replicas step together
      out.values.push_back(std::move(*e));
    }
    return std::optional<PerReplica<data::Element>>(std::move(out));
  }

 private:
  std::unique_ptr<data::Iterator> it_;
  Placement p_;
};

Status CheckPlacement(const Placement& p) {
  if (p.num_workers < 1 || p.worker_index < 0 || p.worker_index >= p.num_workers || p.local_replicas < 1)
    return InvalidArgument("distributed dataset: worker " + std::to_string(p.worker_index) + " of " +
                           std::to_string(p.num_workers) + " with " + std::to_string(p.local_replicas) +
                           " local replicas is not a placement");
  return Status::OK();
}

}  // namespace

Result<int64_t> InputContext::get_per_replica_batch_size(int64_t global_batch_size) const {
  if (num_replicas_in_sync < 1 || global_batch_size % num_replicas_in_sync != 0)
    return InvalidArgument("the global batch size " + std::to_string(global_batch_size) +
                           " is not divisible by num_replicas_in_sync " + std::to_string(num_replicas_in_sync));
  return global_batch_size / num_replicas_in_sync;
}

Placement PlacementOf(const Strategy& s) { return {s.num_workers(), s.worker_index(), s.num_local_replicas()}; }

Result<std::unique_ptr<DistributedIterator>> DistributedDataset::make_iterator() const {
  STRATA_ASSIGN_OR_RETURN(auto it, dataset_.make_iterator());
  switch (mode_) {
    case Mode::kFile: return std::unique_ptr<DistributedIterator>(new FileIterator(std::move(it), placement_));
    case Mode::kData: return std::unique_ptr<DistributedIterator>(new DataIterator(std::move(it), placement_));
    case Mode::kPerReplica: break;
  }
  return std::unique_ptr<DistributedIterator>(new PerReplicaIterator(std::move(it), placement_));
}

Result<DistributedDataset> experimental_distribute_dataset(Placement p, const data::Dataset& ds, AutoShardPolicy policy) {
  STRATA_RETURN_IF_ERROR(CheckPlacement(p));
  if (p.num_workers == 1 || policy == AutoShardPolicy::kData) return DistributedDataset(ds, DistributedDataset::Mode::kData, p);
  std::vector<const std::vector<std::string>*> sources;
  FindFileSources(*ds.node(), &sources);
  const bool by_file = sources.size() == 1 && static_cast<int64_t>(sources[0]->size()) >= p.num_workers;
  if (policy == AutoShardPolicy::kFile && !by_file)
    return InvalidArgument("auto-shard by FILE needs one file-name source (list_files) with at least " +
                           std::to_string(p.num_workers) + " files, one per worker; the dataset has " +
                           (sources.empty() ? std::string("none") :
                            std::to_string(sources.size()) + " source(s), the first with " +
                                std::to_string(sources[0]->size()) + " file(s)") +
                           " (use AutoShardPolicy::kData)");
  if (!by_file) return DistributedDataset(ds, DistributedDataset::Mode::kData, p);
  data::Options o;
  o.shard_files = data::Options::FileShard{p.num_workers, p.worker_index};
  return DistributedDataset(ds.with_options(o), DistributedDataset::Mode::kFile, p);
}

Result<DistributedDataset> experimental_distribute_dataset(const Strategy& s, const data::Dataset& ds, AutoShardPolicy policy) {
  return experimental_distribute_dataset(PlacementOf(s), ds, policy);
}

Result<DistributedDataset> distribute_datasets_from_function(Placement p, const DatasetFn& fn) {
  STRATA_RETURN_IF_ERROR(CheckPlacement(p));
  InputContext ctx{p.num_workers, p.worker_index, p.num_workers * p.local_replicas};
  STRATA_ASSIGN_OR_RETURN(data::Dataset ds, fn(ctx));
  return DistributedDataset(std::move(ds), DistributedDataset::Mode::kPerReplica, p);
}

Result<DistributedDataset> distribute_datasets_from_function(const Strategy& s, const DatasetFn& fn) {
  return distribute_datasets_from_function(PlacementOf(s), fn);
}

}  // namespace strata::distribute
