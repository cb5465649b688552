// AUTOTUNE: the queue model, the hill climb within budgets, and a live pipeline whose
// parallelism the tuner raises from measured rates.
#include "strata/data/autotune.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "strata/data/dataset.h"

namespace strata::data {
namespace {

TEST(QueueWait, FollowsTheMM1KModel) {
  EXPECT_DOUBLE_EQ(QueueWaitNs(1000, 0, 4), 1000);       // an idle consumer waits a whole production
  EXPECT_DOUBLE_EQ(QueueWaitNs(0, 500, 4), 0);
  EXPECT_NEAR(QueueWaitNs(1000, 1000, 4), 1000.0 / 5, 1e-9);  // balanced: 1/(n+1)
  // A faster producer and a bigger buffer both cut the wait.
  EXPECT_LT(QueueWaitNs(500, 1000, 4), QueueWaitNs(1000, 1000, 4));
  EXPECT_LT(QueueWaitNs(1000, 1000, 8), QueueWaitNs(1000, 1000, 4));
  // A much faster producer: the consumer practically never waits.
  EXPECT_LT(QueueWaitNs(100, 1000, 4), 0.01 * 100);
  // No buffer: always a full production.
  EXPECT_NEAR(QueueWaitNs(1000, 800, 0), 1000, 1e-9);
}

// range -> parallel_map(cost c, AUTOTUNE) -> batch(32) -> prefetch(AUTOTUNE)
Model ChainModel(double map_ns, int64_t cpu_max) {
  Model m;
  m.nodes.resize(4);
  m.nodes[0] = {.path = "0.0.0.0", .kind = ModelNode::Kind::kSync, .self_ns = 50, .ratio = 1, .bytes = 8};
  m.nodes[1] = {.path = "0.0.0", .kind = ModelNode::Kind::kParallel, .self_ns = map_ns, .ratio = 1, .bytes = 4096,
                .inputs = {0}, .parallelism_param = 0};
  m.nodes[2] = {.path = "0.0", .kind = ModelNode::Kind::kSync, .self_ns = 32 * 200.0, .ratio = 32, .bytes = 32 * 4096,
                .inputs = {1}};
  m.nodes[3] = {.path = "0", .kind = ModelNode::Kind::kBuffer, .self_ns = 100, .ratio = 1, .bytes = 32 * 4096,
                .inputs = {2}, .buffer_param = 1};
  m.root = 3;
  m.params = {{.is_parallelism = true, .node = 1, .min = 1, .max = cpu_max},
              {.is_parallelism = false, .node = 3, .min = 1, .max = 64}};
  return m;
}

TEST(HillClimb, AnIdleConsumerGetsTheWholeCpuBudget) {
  Model m = ChainModel(100000, 8);
  auto v = HillClimb(m, {.cpu = 4, .ram_bytes = 1 << 30}, 0);
  EXPECT_EQ(v[0], 4);  // budget-bound, not max-bound
  EXPECT_GE(v[1], 1);
  EXPECT_LT(ModelWaitNs(m, v, m.root, 0), ModelWaitNs(m, {1, 1}, m.root, 0) / 3);
}

TEST(HillClimb, AFedConsumerLeavesCoresToTraining) {
  // 100 us per element, 32 per batch = 3.2 ms per batch of work; the training step takes
  // 40 ms per batch: one worker suffices and the climb stops there.
  Model m = ChainModel(100000, 8);
  auto v = HillClimb(m, {.cpu = 8, .ram_bytes = 1 << 30}, 40e6);
  EXPECT_EQ(v[0], 1);
  // A 5 ms step needs 1 worker for 3.2+ ms of work with slack; a 2 ms step needs >= 2.
  auto fast = HillClimb(m, {.cpu = 8, .ram_bytes = 1 << 30}, 2e6);
  EXPECT_GE(fast[0], 2);
  EXPECT_LE(ModelWaitNs(m, fast, m.root, 2e6), ModelWaitNs(m, {1, 1}, m.root, 2e6));
}

TEST(HillClimb, RespectsTheRamBudget) {
  Model m = ChainModel(100000, 8);
  // 2 x p x 4096 bytes of map slots + buffer x 131072: 300 KB allows p = 2 and buffer 1 at most.
  auto v = HillClimb(m, {.cpu = 8, .ram_bytes = 150000}, 0);
  EXPECT_LE(2.0 * v[0] * 4096 + v[1] * 131072.0, 150000);
}

TEST(BuildModel, MapsStatisticsToNodes) {
  StageStatsSnapshot map{.name = "parallel_map", .path = "0.0", .elements = 100, .inputs = 100, .bytes = 400,
                         .busy_ns = 1000000, .parallelism = 2};
  StageStatsSnapshot src{.name = "range", .path = "0.0.0", .elements = 100, .inputs = 0, .bytes = 800, .busy_ns = 5000};
  StageStatsSnapshot root{.name = "batch", .path = "0", .elements = 10, .inputs = 100, .bytes = 400, .busy_ns = 20000};
  Model m = BuildModel({src, map, root}, {});
  ASSERT_EQ(m.nodes.size(), 3u);
  EXPECT_EQ(m.nodes[m.root].path, "0");
  EXPECT_DOUBLE_EQ(m.nodes[m.root].ratio, 10);
  EXPECT_EQ(m.nodes[1].kind, ModelNode::Kind::kParallel);
  EXPECT_DOUBLE_EQ(m.nodes[1].self_ns, 10000);
  ASSERT_EQ(m.nodes[1].inputs.size(), 1u);
  EXPECT_EQ(m.nodes[m.nodes[1].inputs[0]].path, "0.0.0");
}

TEST(AutotuneLive, RaisesParallelismOfASlowMap) {
  // Each element sleeps 2 ms (a stand-in for decode that does not need free cores: the
  // machine running tests is small and shared). One worker gives 500 elements/s; the tuner
  // must raise the parallelism to its budget.
  auto ds = Dataset::range(100000)
                .map([](Element e) -> Result<Element> {
                  std::this_thread::sleep_for(std::chrono::milliseconds(2));
                  return e;
                }, {.num_parallel_calls = AUTOTUNE})
                .prefetch(AUTOTUNE)
                .with_options({.autotune = AutotuneOptions{.cpu_budget = 4, .period_ms = 20}});
  auto it = ds.make_iterator();
  ASSERT_TRUE(it.ok());
  int64_t parallelism = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok() && e->has_value());
    for (const auto& s : (*it)->Stats())
      if (s.name == "parallel_map") {
        parallelism = s.parallelism;
        EXPECT_TRUE(s.autotuned);
      }
    if (parallelism == 4) break;
  }
  EXPECT_EQ(parallelism, 4) << (*it)->StatsTable();
}

TEST(AutotuneLive, ReplicasShrinkTheCpuBudget) {
  auto ds = Dataset::range(100000)
                .map([](Element e) -> Result<Element> {
                  std::this_thread::sleep_for(std::chrono::milliseconds(2));
                  return e;
                }, {.num_parallel_calls = AUTOTUNE})
                .with_options({.autotune = AutotuneOptions{.cpu_budget = 4, .training_replicas = 2,
                                                           .replica_cpu_share = 1.0, .period_ms = 20}});
  auto it = ds.make_iterator();
  for (int i = 0; i < 400; ++i) ASSERT_TRUE((*it)->Next().ok());
  for (const auto& s : (*it)->Stats())
    if (s.name == "parallel_map") {
      EXPECT_LE(s.parallelism, 2);
      EXPECT_GE(s.parallelism, 1);
    }
}

}  // namespace
}  // namespace strata::data
