// Distributing input over replicas and workers: DATA and FILE auto-sharding, datasets from a
// function, and Strategy::run / reduce over per-replica values.
#include "strata/distribute/input.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "strata/data/sources.h"

namespace strata::distribute {
namespace {

// Rows 0..n-1 as one f32 column: every row says where it came from.
data::Dataset Rows(int64_t n) {
  Tensor x(DType::kF32, Shape({n, 1}));
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i);
  return data::Dataset::from_tensor_slices(data::Element({x}));
}

std::vector<float> Values(const data::Element& e) {
  const Tensor t = e[0].Contiguous();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

// Every step of every worker: [worker][step][replica] -> rows.
using Steps = std::vector<std::vector<std::vector<std::vector<float>>>>;
Steps Collect(const std::function<Result<DistributedDataset>(Placement)>& make, int workers, int local) {
  Steps all(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    auto dist = make({workers, w, local});
    EXPECT_TRUE(dist.ok()) << dist.status().ToString();
    if (!dist.ok()) return all;
    auto it = dist->make_iterator();
    EXPECT_TRUE(it.ok());
    for (;;) {
      auto next = (*it)->Next();
      EXPECT_TRUE(next.ok()) << next.status().ToString();
      if (!next.ok() || !*next) break;
      std::vector<std::vector<float>> step;
      for (const auto& shard : (*next)->values) step.push_back(Values(shard));
      all[static_cast<size_t>(w)].push_back(step);
    }
  }
  return all;
}

TEST(DistributeDataset, DataPolicyGivesEachReplicaItsRowsOfEveryGlobalBatch) {
  // Global batch 8 over 2 workers x 2 replicas: 2 rows per replica per step.
  auto batches = Rows(24).batch(8, {.drop_remainder = true});
  auto steps = Collect([&](Placement p) { return experimental_distribute_dataset(p, batches, AutoShardPolicy::kData); }, 2, 2);
  ASSERT_EQ(steps[0].size(), 3u);
  ASSERT_EQ(steps[1].size(), 3u);
  EXPECT_EQ(steps[0][0], (std::vector<std::vector<float>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(steps[1][0], (std::vector<std::vector<float>>{{4, 5}, {6, 7}}));
  EXPECT_EQ(steps[1][2], (std::vector<std::vector<float>>{{20, 21}, {22, 23}}));
  // A global batch that does not split over the replicas is an error naming both.
  auto odd = experimental_distribute_dataset(Placement{1, 0, 3}, batches);
  ASSERT_TRUE(odd.ok());
  auto it = odd->make_iterator();
  ASSERT_TRUE(it.ok());
  auto bad = (*it)->Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("8 rows does not split over 3 replicas"), std::string::npos) << bad.status().ToString();
}

TEST(DistributeDataset, AutoShardsByFileWhenEveryWorkerCanHaveOne) {
  // Six "files" whose names are row numbers; a global batch of 4 over 2 workers x 1 replica.
  std::vector<std::string> names = {"0", "1", "2", "3", "4", "5", "6", "7"};
  auto parse = [](data::Element e) -> Result<data::Element> {
    STRATA_ASSIGN_OR_RETURN(std::string s, data::TensorToString(e[0]));
    Tensor x(DType::kF32, Shape({1}));
    x.data<float>()[0] = std::stof(s);
    return data::Element({x});
  };
  auto batches = data::from_strings(names).map(parse).batch(4, {.drop_remainder = true});
  auto dist = experimental_distribute_dataset(Placement{2, 1, 1}, batches);
  ASSERT_TRUE(dist.ok()) << dist.status().ToString();
  EXPECT_EQ(dist->mode(), DistributedDataset::Mode::kFile);
  auto steps = Collect([&](Placement p) { return experimental_distribute_dataset(p, batches); }, 2, 1);
  // Worker 0 reads files 0, 2, 4, 6 and takes 2 rows (B / W) per step; worker 1 the odd ones.
  ASSERT_EQ(steps[0].size(), 2u);
  EXPECT_EQ(steps[0][0][0], (std::vector<float>{0, 2}));
  EXPECT_EQ(steps[0][1][0], (std::vector<float>{4, 6}));
  EXPECT_EQ(steps[1][0][0], (std::vector<float>{1, 3}));
  EXPECT_EQ(steps[1][1][0], (std::vector<float>{5, 7}));

  // Fewer files than workers: AUTO falls back to DATA, an explicit FILE is an error.
  auto few = data::from_strings({"0", "1"}).map(parse).batch(2);
  auto fallback = experimental_distribute_dataset(Placement{4, 0, 1}, few);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(fallback->mode(), DistributedDataset::Mode::kData);
  auto file = experimental_distribute_dataset(Placement{4, 0, 1}, few, AutoShardPolicy::kFile);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("with 2 file(s)"), std::string::npos) << file.status().ToString();
  EXPECT_FALSE(experimental_distribute_dataset(Placement{2, 2, 1}, few).ok());  // worker 2 of 2
}

TEST(DistributeDataset, FromFunctionGivesEachReplicaTheNextPerReplicaBatch) {
  std::vector<InputContext> seen;
  auto fn = [&](const InputContext& ctx) -> Result<data::Dataset> {
    seen.push_back(ctx);
    STRATA_ASSIGN_OR_RETURN(int64_t per_replica, ctx.get_per_replica_batch_size(12));
    return Rows(24).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(per_replica, {.drop_remainder = true});
  };
  auto steps = Collect([&](Placement p) { return distribute_datasets_from_function(p, fn); }, 2, 2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].num_input_pipelines, 2);
  EXPECT_EQ(seen[1].input_pipeline_id, 1);
  EXPECT_EQ(seen[1].num_replicas_in_sync, 4);
  ASSERT_EQ(steps[0].size(), 2u);  // worker 0: rows 0, 2, ..., 22 in batches of 3, two per step
  EXPECT_EQ(steps[0][0], (std::vector<std::vector<float>>{{0, 2, 4}, {6, 8, 10}}));
  EXPECT_EQ(steps[1][1], (std::vector<std::vector<float>>{{13, 15, 17}, {19, 21, 23}}));
  EXPECT_FALSE((InputContext{1, 0, 5}.get_per_replica_batch_size(12).ok()));
}

TEST(DistributeDataset, StrategyRunsOnPerReplicaInputsAndReduces) {
  auto s = MirroredStrategy(2);
  ASSERT_TRUE(s.ok());
  auto dist = experimental_distribute_dataset(**s, Rows(8).batch(4, {.drop_remainder = true}));
  ASSERT_TRUE(dist.ok());
  auto it = dist->make_iterator();
  ASSERT_TRUE(it.ok());
  double total = 0;
  while (true) {
    auto shards = (*it)->Next();
    ASSERT_TRUE(shards.ok());
    if (!*shards) break;
    std::vector<double> sums(2);
    Status st = (*s)->run<data::Element>(
        [&](int r, const data::Element& shard) {
          for (float v : Values(shard)) sums[static_cast<size_t>(r)] += v;
          return Status::OK();
        },
        **shards);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto step_sum = (*s)->reduce(ReduceOp::kSum, PerReplica<double>{sums});
    ASSERT_TRUE(step_sum.ok());
    total += *step_sum;
  }
  EXPECT_EQ(total, 28.0);  // 0 + 1 + ... + 7, each row on exactly one replica
  auto mean = (*s)->reduce(ReduceOp::kMean, PerReplica<double>{{1.0, 3.0}});
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(*mean, 2.0);
  Status wrong = (*s)->run<int>([](int, const int&) { return Status::OK(); }, PerReplica<int>{{1, 2, 3}});
  EXPECT_FALSE(wrong.ok());
}

}  // namespace
}  // namespace strata::distribute
