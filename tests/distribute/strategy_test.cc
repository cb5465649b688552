// Strategy: replica threads, barrier, reduce, slices and the deterministic reduce-scatter.
#include "strata/distribute/strategy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "strata/distribute/cluster_resolver.h"

namespace strata::distribute {
namespace {

TEST(Strategy, RunCallsEveryReplicaAndBarrierOrdersThePhases) {
  auto s = MirroredStrategy(4);  // oversubscribes 2 cores: fine for a test
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->num_replicas_in_sync(), 4);
  EXPECT_EQ((*s)->num_workers(), 1);
  std::vector<int> phase1(4, 0), seen(4, 0);
  std::atomic<int> arrived{0};
  Status st = (*s)->run([&](int r) -> Status {
    phase1[static_cast<size_t>(r)] = r + 1;
    ++arrived;
    (*s)->barrier();
    seen[static_cast<size_t>(r)] = arrived.load();  // after the barrier everyone has written
    return Status::OK();
  });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(phase1, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(seen, (std::vector<int>{4, 4, 4, 4}));
}

TEST(Strategy, TheFirstFailingReplicaIsReportedByNumber) {
  auto s = MirroredStrategy(3);
  ASSERT_TRUE(s.ok());
  Status st = (*s)->run([](int r) { return r >= 1 ? InvalidArgument("shard " + std::to_string(r)) : Status::OK(); });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("replica 1"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("shard 1"), std::string::npos) << st.ToString();
}

TEST(Strategy, ReduceSlicesAndReduceScatter) {
  EXPECT_EQ(Strategy::reduce(ReduceOp::kSum, {1, 2, 3.5}), 6.5);
  EXPECT_EQ(Strategy::reduce(ReduceOp::kMean, {1, 2, 3}), 2);
  auto s = MirroredStrategy(3);
  ASSERT_TRUE(s.ok());
  // The slices cover [0, n) without overlap and start on 16-float boundaries.
  for (int64_t n : {0, 1, 15, 16, 47, 1000}) {
    int64_t next = 0;
    for (int r = 0; r < 3; ++r) {
      auto [b, e] = (*s)->Slice(n, r);
      EXPECT_EQ(b, next) << n;
      EXPECT_EQ(b % 16 == 0 || b == n, true);
      next = e;
    }
    EXPECT_EQ(next, n);
  }
  const int64_t n = 100;
  std::vector<std::vector<float>> in(3, std::vector<float>(n));
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < n; ++i) in[static_cast<size_t>(r)][static_cast<size_t>(i)] = static_cast<float>(r * 1000 + i);
  std::vector<const float*> ptrs = {in[0].data(), in[1].data(), in[2].data()};
  std::vector<float> out(n, -1);
  ASSERT_TRUE((*s)->run([&](int r) {
                  (*s)->ReduceScatter(ptrs, out.data(), n, r, ReduceOp::kMean);
                  return Status::OK();
                }).ok());
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[static_cast<size_t>(i)], static_cast<float>(1000 + i));
}

TEST(Strategy, ScopeIsPerThreadAndNests) {
  auto a = OneDeviceStrategy();
  auto b = MirroredStrategy(2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Strategy::Current(), nullptr);
  {
    auto sa = a->scope();
    EXPECT_EQ(Strategy::Current(), a.get());
    {
      auto sb = (*b)->scope();
      EXPECT_EQ(Strategy::Current(), b->get());
    }
    EXPECT_EQ(Strategy::Current(), a.get());
  }
  EXPECT_EQ(Strategy::Current(), nullptr);
}

TEST(Strategy, OneWorkerAlwaysAgreesAndMultiWorkerOutsideMpiIsMirrored) {
  auto s = MultiWorkerMirroredStrategy(2);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->name(), "MirroredStrategy");
  EXPECT_EQ((*s)->collective(), nullptr);
  EXPECT_TRUE((*s)->CheckWorkersAgree("anything", "mine").ok());
  // The resolver's replica count reaches the strategy.
  auto r = ClusterResolver::FromVariables({{"STRATA_CLUSTER", R"({"cluster": {"worker": ["here"]}, "replicas_per_worker": 3})"}}, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto t = MultiWorkerMirroredStrategy(*r);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->num_replicas_in_sync(), 3);
}

}  // namespace
}  // namespace strata::distribute
