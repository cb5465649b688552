// distribute::Reducer and CrossReplicaSum on flat buffers, without a model: replica threads of
// a Strategy, and an in-process collective that stands for two workers holding the same data
// (its all-reduce sum doubles every value, so the mean over workers is the data again).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "strata/core/clock.h"
#include "strata/distribute/cross_replica_sum.h"
#include "strata/distribute/reducer.h"

namespace strata::distribute {
namespace {

class TwoEqualWorkers final : public Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  Status AllReduceSum(float* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] *= 2;
    ++blocking;
    return fail_blocking ? IOError("peer 1 went away") : Status::OK();
  }
  Status AllReduceSum(double* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] *= 2;
    return Status::OK();
  }
  Result<std::vector<std::string>> AllGather(const std::string& mine) override { return std::vector<std::string>{mine, mine}; }
  Status Barrier() override { return Status::OK(); }
  CollectiveStats stats() const override { return {}; }
  bool can_overlap() const override { return overlap; }
  int64_t bucket_bytes() const override { return 64; }  // 16 floats: several buckets
  Status StartAllReduceSum(float* data, int64_t n) override {
    started.push_back({data, n});
    pending.push_back({data, n});
    return Status::OK();
  }
  Status Progress() override { return Status::OK(); }
  Status WaitAll() override {
    for (auto [d, n] : pending)
      for (int64_t i = 0; i < n; ++i) d[i] *= 2;
    finished.assign(pending.size(), NowNanos());  // as a test after the last one's end would see it
    pending.clear();
    return Status::OK();
  }
  const std::vector<int64_t>& finished_ns() const override { return finished; }

  bool overlap = false, fail_blocking = false;
  int blocking = 0;
  std::vector<std::pair<float*, int64_t>> started, pending;
  std::vector<int64_t> finished;
};

class Replicas final : public Strategy {
 public:
  Replicas(int replicas, std::shared_ptr<Collective> c = nullptr)
      : Strategy("test", replicas, /*pin=*/false, std::move(c)) {}
};

// Each replica's block: distinct values, so a wrong order or a missed replica shows.
std::vector<std::vector<float>> Blocks(int replicas, int64_t n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> b(static_cast<size_t>(replicas), std::vector<float>(static_cast<size_t>(n)));
  for (auto& block : b)
    for (float& v : block) v = u(rng);
  return b;
}

std::vector<float> MeanInReplicaOrder(const std::vector<std::vector<float>>& b) {
  std::vector<const float*> in;
  for (const auto& block : b) in.push_back(block.data());
  std::vector<float> out(b[0].size());
  Strategy::ReduceRange(in, out.data(), 0, static_cast<int64_t>(out.size()), ReduceOp::kMean);
  return out;
}

ReducerOptions Options(std::vector<std::vector<float>>& b) {
  ReducerOptions o;
  for (auto& block : b) o.grads.push_back(block.data());
  o.n = static_cast<int64_t>(b[0].size());
  return o;
}

TEST(Reducer, PlainGivesTheMeanInReplicaOrderInBlockZero) {
  Replicas s(3);
  auto b = Blocks(3, 1001);
  const std::vector<float> want = MeanInReplicaOrder(b);
  auto reducer = MakeReducer(s, Options(b));
  EXPECT_TRUE(reducer->HookPoints(0).empty()) << "no collective: nothing to overlap";
  StepSync sync;
  ASSERT_TRUE(s.run([&](int r) { return reducer->Reduce(r, sync); }).ok());
  EXPECT_FALSE(sync.failed);
  EXPECT_EQ(0, std::memcmp(b[0].data(), want.data(), want.size() * sizeof(float)));
}

TEST(Reducer, AFailedReplicaLeavesTheBlockAlone) {
  Replicas s(2);
  auto b = Blocks(2, 100);
  const std::vector<float> before = b[0];
  auto reducer = MakeReducer(s, Options(b));
  StepSync sync;
  ASSERT_TRUE(s.run([&](int r) {
    if (r == 1) sync.failed = true;  // before the reduction's first barrier, as GradientPhase does
    return reducer->Reduce(r, sync);
  }).ok());
  EXPECT_TRUE(sync.failed);
  EXPECT_EQ(b[0], before);
}

TEST(Reducer, AcrossWorkersTheHostMeanIsAllReducedAndDivided) {
  auto hosts = std::make_shared<TwoEqualWorkers>();
  Replicas s(2, hosts);
  auto b = Blocks(2, 77);
  const std::vector<float> want = MeanInReplicaOrder(b);  // x 2 / 2: the same bits
  auto reducer = MakeReducer(s, Options(b));
  StepSync sync;
  ASSERT_TRUE(s.run([&](int r) { return reducer->Reduce(r, sync); }).ok());
  EXPECT_TRUE(sync.cross_host.ok()) << sync.cross_host.ToString();
  EXPECT_EQ(hosts->blocking, 1);
  EXPECT_EQ(b[0], want);

  hosts->fail_blocking = true;
  StepSync failing;
  ASSERT_TRUE(s.run([&](int r) { return reducer->Reduce(r, failing); }).ok());
  EXPECT_TRUE(failing.failed);
  EXPECT_NE(failing.cross_host.message().find("peer 1"), std::string::npos) << failing.cross_host.ToString();
}

// The bucketed reducer: kernel k of a three-kernel "backward pass" finishes a third of the
// block, the last third first. Called from the hooks it asks for, it starts every bucket once,
// in the order the pass finishes them, and ends with the plain reducer's bits.
TEST(Reducer, BucketedOverlapStartsBucketsAsTheyFinishAndGivesThePlainBits) {
  auto hosts = std::make_shared<TwoEqualWorkers>();
  hosts->overlap = true;
  Replicas s(2, hosts);
  const int64_t n = 90;
  auto b = Blocks(2, n);
  const std::vector<float> want = MeanInReplicaOrder(b);
  ReducerOptions o = Options(b);
  o.kernels = 3;
  o.ready = {{60, 90, 0}, {30, 60, 1}, {0, 30, 2}};
  auto reducer = MakeReducer(s, std::move(o));
  ASSERT_EQ(reducer->HookPoints(0).size(), 4u);
  StepSync sync;
  ASSERT_TRUE(s.run([&](int r) -> Status {
    const std::vector<uint8_t> after = reducer->HookPoints(r);
    for (int k = -1; k < 3; ++k)
      if (after[static_cast<size_t>(k + 1)]) STRATA_RETURN_IF_ERROR(reducer->AfterKernel(r, k));
    return reducer->Reduce(r, sync);
  }).ok());
  EXPECT_TRUE(sync.cross_host.ok()) << sync.cross_host.ToString();
  EXPECT_EQ(hosts->blocking, 0) << "every bucket went through the started all-reduce";
  // The schedule it reports: every bucket, its bytes, started once, from a hook or after.
  const ReducerStats st = reducer->stats();
  EXPECT_EQ(st.steps, 1);
  ASSERT_EQ(st.buckets.size(), hosts->started.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < st.buckets.size(); ++i) {
    EXPECT_EQ(st.buckets[i].bytes, hosts->started[i].second * 4);
    EXPECT_GE(st.buckets[i].start_seconds, 0);
    EXPECT_LE(st.buckets[i].start_seconds, st.backward_end_seconds + 1.0);
    bytes += st.buckets[i].bytes;
  }
  EXPECT_EQ(bytes, n * 4);
  // Which of the two depends on which replica thread passes a bucket's kernel last.
  EXPECT_EQ(st.started_during_backward + st.started_after_backward, static_cast<int64_t>(hosts->started.size()));
  std::vector<int> covered(static_cast<size_t>(n), 0);
  int64_t last_begin = n;
  for (auto [data, len] : hosts->started) {
    const int64_t begin = data - b[0].data();
    EXPECT_LE(len, 16);
    EXPECT_LE(begin + len, last_begin) << "buckets start from the end of the block, as the pass finishes them";
    last_begin = begin;
    for (int64_t i = begin; i < begin + len; ++i) ++covered[static_cast<size_t>(i)];
  }
  EXPECT_EQ(covered, std::vector<int>(static_cast<size_t>(n), 1));
  EXPECT_EQ(b[0], want);
  // The step's timeline (the trace's all-reduce track): per bucket, in start order, its bytes,
  // then ready <= started <= finished, inside the step: the program's start, the backward
  // pass's end and the reduction's end, in that order.
  const StepTiming* t = reducer->last_step();
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->buckets.size(), hosts->started.size());
  EXPECT_GT(t->start_ns, 0);
  EXPECT_LE(t->start_ns, t->backward_end_ns);
  EXPECT_LE(t->backward_end_ns, t->wait_end_ns);
  for (size_t i = 0; i < t->buckets.size(); ++i) {
    const StepTiming::Bucket& k = t->buckets[i];
    EXPECT_EQ(k.bytes, st.buckets[i].bytes) << i;
    EXPECT_LE(t->start_ns, k.ready_ns) << i;
    EXPECT_LE(k.ready_ns, k.start_ns) << i;
    EXPECT_LE(k.start_ns, k.finish_ns) << i;
    EXPECT_LE(k.finish_ns, t->wait_end_ns) << i;
    if (i > 0) EXPECT_LE(t->buckets[i - 1].start_ns, k.start_ns) << "started in bucket order";
    // The stats' sums over the (one) step: the same moments, in seconds from the step's start.
    EXPECT_NEAR(st.buckets[i].ready_seconds, static_cast<double>(k.ready_ns - t->start_ns) * 1e-9, 1e-9) << i;
    EXPECT_NEAR(st.buckets[i].finish_seconds, static_cast<double>(k.finish_ns - t->start_ns) * 1e-9, 1e-9) << i;
  }
  EXPECT_NEAR(st.wait_end_seconds, static_cast<double>(t->wait_end_ns - t->start_ns) * 1e-9, 1e-9);
}

TEST(Reducer, ThePlainReducerHasNoTimeline) {
  Replicas s(2);
  auto b = Blocks(2, 8);
  auto reducer = MakeReducer(s, Options(b));
  EXPECT_EQ(reducer->last_step(), nullptr);
}

TEST(Reducer, MeanOverReplicasDividesOnceAcrossWorkers) {
  auto hosts = std::make_shared<TwoEqualWorkers>();
  Replicas s(1, hosts);
  std::vector<float> a = {1, 2, 3}, c = {3, 4, 5}, out(3);
  ASSERT_TRUE(MeanOverReplicas(s, {a.data(), c.data()}, out.data(), 3).ok());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4}));
}

TEST(CrossReplicaSum, EveryReplicaGetsTheSumAndAFailedOneIsNamed) {
  Replicas s(3);
  CrossReplicaSum sum(s, /*calls_per_step=*/2, "test sum");
  std::vector<std::vector<double>> got(3);
  ASSERT_TRUE(s.run([&](int r) -> Status {
    sum.BeginStep(r);
    double v[2] = {static_cast<double>(r), 1.0};
    STRATA_RETURN_IF_ERROR(sum.Sum(r, v, 2));
    got[static_cast<size_t>(r)] = {v[0], v[1]};
    sum.FinishStep(r);  // the second call: made for every replica
    return Status::OK();
  }).ok());
  for (const auto& g : got) EXPECT_EQ(g, (std::vector<double>{3.0, 3.0}));

  Status st = s.run([&](int r) -> Status {
    sum.BeginStep(r);
    double v[1] = {1.0};
    Status mine = r == 2 ? Status::OK() : sum.Sum(r, v, 1);  // replica 2 failed before its first call
    sum.FinishStep(r);
    return mine;
  });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("test sum replica 0: another replica failed"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace strata::distribute
