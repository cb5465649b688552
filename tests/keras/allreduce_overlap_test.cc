// The cross-host all-reduce overlapped with the backward pass, without MPI: a collective of
// one worker (the sum over one worker is the data itself) that notes which buckets it was
// asked to start. Two replica threads exercise the in-host reduction from the kernel hooks;
// tests/slow/mpi_train_test.cc runs the same path over MPI with two workers.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "blobs.h"
#include "strata/keras/model.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT
using testing::Blobs;

class OneWorker final : public distribute::Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status AllReduceSum(float*, int64_t) override {
    ++blocking_calls;
    return Status::OK();
  }
  Status AllReduceSum(double*, int64_t) override { return Status::OK(); }
  Result<std::vector<std::string>> AllGather(const std::string& mine) override { return std::vector<std::string>{mine}; }
  Status Barrier() override { return Status::OK(); }
  distribute::CollectiveStats stats() const override { return {}; }
  bool can_overlap() const override { return true; }
  int64_t bucket_bytes() const override { return 1024; }  // 256 floats: several buckets
  Status StartAllReduceSum(float* data, int64_t n) override {
    started.push_back({data, n});
    ++in_flight;
    return Status::OK();
  }
  Status Progress() override { return Status::OK(); }
  Status WaitAll() override {
    ++waits;
    EXPECT_GT(in_flight, 0);
    in_flight = 0;
    return Status::OK();
  }

  std::vector<std::pair<const float*, int64_t>> started;  // every bucket of every step, in start order
  int in_flight = 0, waits = 0, blocking_calls = 0;
};

class Replicas final : public distribute::Strategy {
 public:
  Replicas(int replicas, std::shared_ptr<distribute::Collective> c)
      : Strategy("MultiWorkerMirroredStrategy", replicas, /*pin=*/false, std::move(c)) {}
};

std::unique_ptr<Model> Mlp() {
  auto m = Sequential({InputLayer({8}), Dense(64, {.activation = "relu"}), Dense(32, {.activation = "relu"}), Dense(3)}, "mlp");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

struct Trained {
  std::vector<float> state;
  std::shared_ptr<OneWorker> hosts;
  int64_t num_trainable = 0;
  std::vector<std::pair<int64_t, int64_t>> buckets;  // every started bucket: (offset in the gradient block, floats)
};

// 2 epochs x 4 steps of global batch 64 on 2 replicas, with the one-worker collective (its
// all-reduce overlapped or not) or without one (a MirroredStrategy).
Trained Train(bool with_collective, bool overlap) {
  Trained t;
  if (overlap) {
    unsetenv("STRATA_ALLREDUCE_OVERLAP");
  } else {
    setenv("STRATA_ALLREDUCE_OVERLAP", "0", 1);
  }
  std::unique_ptr<distribute::Strategy> strategy;
  if (with_collective) {
    t.hosts = std::make_shared<OneWorker>();
    strategy = std::make_unique<Replicas>(2, t.hosts);
  } else {
    strategy = std::move(distribute::MirroredStrategy(2)).value();
  }
  auto m = Mlp();
  EXPECT_TRUE(m->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9}),
                          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                          .strategy = strategy.get()})
                  .ok());
  auto train = data::Dataset::from_tensor_slices(Blobs(256, 3)).batch(64, {.drop_remainder = true});
  auto h = m->fit(train, {.epochs = 2, .verbose = 0});
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  t.state = *m->get_state();
  t.num_trainable = m->variables()->num_trainable();
  if (t.hosts)
    for (const auto& [data, len] : t.hosts->started) t.buckets.push_back({data - m->variables()->grads().data<float>(), len});
  unsetenv("STRATA_ALLREDUCE_OVERLAP");
  return t;
}

TEST(AllReduceOverlap, GivesTheSameBitsAsTheAllReduceAfterTheBackwardPass) {
  const Trained on = Train(true, true), off = Train(true, false), mirrored = Train(false, true);
  ASSERT_EQ(on.state.size(), off.state.size());
  ASSERT_EQ(on.state.size(), mirrored.state.size());
  EXPECT_EQ(std::memcmp(on.state.data(), off.state.data(), on.state.size() * 4), 0);
  EXPECT_EQ(std::memcmp(on.state.data(), mirrored.state.data(), on.state.size() * 4), 0);
  // Off: one blocking all-reduce of the whole block per step, no bucket started.
  EXPECT_TRUE(off.hosts->started.empty());
  EXPECT_GE(off.hosts->blocking_calls, 8);
  EXPECT_EQ(on.hosts->blocking_calls, 0);  // no batch norm: nothing else crosses
  EXPECT_EQ(on.hosts->waits, 8);
}

TEST(AllReduceOverlap, BucketsCoverTheGradientBlockOnceAndStartFromTheLastLayer) {
  const Trained on = Train(true, true);
  const OneWorker& h = *on.hosts;
  const int64_t n = on.num_trainable;
  ASSERT_EQ(h.waits, 8);
  ASSERT_EQ(on.buckets.size() % 8, 0u);
  const size_t per_step = on.buckets.size() / 8;
  EXPECT_GE(per_step, 3u) << "1 KiB buckets over " << n << " floats";
  for (size_t step = 0; step < 8; ++step) {
    std::vector<int> covered(static_cast<size_t>(n), 0);
    for (size_t b = 0; b < per_step; ++b) {
      const auto [begin, len] = on.buckets[step * per_step + b];
      ASSERT_GE(begin, 0);
      ASSERT_LE(begin + len, n);
      EXPECT_LE(len, 256);
      for (int64_t i = begin; i < begin + len; ++i) ++covered[static_cast<size_t>(i)];
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(covered[static_cast<size_t>(i)], 1) << "step " << step << " element " << i;
    // The last layer's gradients (the end of the block: 32 x 3 + 3) go first, the first
    // layer's (its start: 8 x 64 + 64) last: the order the backward pass finishes them.
    // A bucket fills down the block until it is full, so the first also takes the end of the
    // layer before.
    std::string order;
    for (size_t b = 0; b < per_step; ++b)
      order += " [" + std::to_string(on.buckets[step * per_step + b].first) + ", +" +
               std::to_string(on.buckets[step * per_step + b].second) + ")";
    EXPECT_EQ(on.buckets[step * per_step].first + on.buckets[step * per_step].second, n) << "step " << step << order;
    EXPECT_LT(on.buckets[step * per_step + per_step - 1].first, 8 * 64 + 64) << "step " << step << order;
    if (step == 0) std::printf("buckets in start order:%s\n", order.c_str());
  }
}

}  // namespace
}  // namespace strata::keras
