// Synchronized batch norm across programs: two replica programs, each on half of a batch and
// joined by a cross-replica sum (two threads, a barrier), compute exactly what one program
// computes on the whole batch: the output, the gradient of the summed loss with respect to
// every input row (the backward's global sums), the summed gamma/beta gradients and the
// moving statistics. Without the sum the same two programs give different outputs.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <random>
#include <thread>

#include "strata/backend/compile.h"
#include "strata/graph/autodiff.h"

namespace strata::backend {
namespace {

using graph::Graph;
using graph::Value;

constexpr int64_t kH = 3, kW = 3, kC = 5;

// y = BatchNorm(x, gamma, beta); loss = sum(y * r): every output element's gradient matters.
struct BnStep {
  Graph g;
  Value x, gamma, beta, r, y, loss;
  std::vector<Value> grads;  // d loss / d x, d gamma, d beta
  std::unique_ptr<Program> program;
};

void Build(BnStep& s, int64_t batch, bool synchronized) {
  s.x = s.g.Input("x", DType::kF32, {batch, kH, kW, kC});
  s.gamma = s.g.Input("gamma", DType::kF32, {kC});
  s.beta = s.g.Input("beta", DType::kF32, {kC});
  s.r = s.g.Input("r", DType::kF32, {batch, kH, kW, kC});
  auto mm = s.g.Variable("bn/moving_mean", {kC}, {.trainable = false}, graph::VariableRole::kState);
  auto mv = s.g.Variable("bn/moving_variance", {kC}, {.trainable = false}, graph::VariableRole::kState);
  ASSERT_TRUE(mm.ok() && mv.ok());
  auto y = s.g.BatchNorm(s.x, s.gamma, s.beta, *mm, *mv, {.momentum = 0.9f, .synchronized = synchronized}, "bn");
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  s.y = *y;
  auto prod = s.g.Multiply(s.y, s.r, "project");
  ASSERT_TRUE(prod.ok());
  auto loss = s.g.ReduceSum(*prod, {}, "loss");
  ASSERT_TRUE(loss.ok());
  s.loss = *loss;
  auto grads = graph::Gradients(s.g, s.loss, {s.x, s.gamma, s.beta});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  s.grads = *grads;
  std::vector<Value> fetches = s.grads;
  fetches.push_back(s.y);
  auto p = Compile(s.g, {.fetches = fetches});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  s.program = std::move(*p);
}

// Rows [row0, row0 + rows) of the global x and r; the same gamma and beta everywhere.
struct Data {
  std::vector<float> x, r, gamma, beta;
  explicit Data(int64_t batch) {
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<float> u(-1, 1), pos(0.5f, 1.5f);
    const int64_t n = batch * kH * kW * kC;
    for (int64_t e = 0; e < n; ++e) x.push_back(3 * u(rng) + 0.5f * static_cast<float>(e % kC));  // channel means differ
    for (int64_t e = 0; e < n; ++e) r.push_back(u(rng));
    for (int64_t c = 0; c < kC; ++c) gamma.push_back(pos(rng));
    for (int64_t c = 0; c < kC; ++c) beta.push_back(u(rng));
  }
  void Feed(BnStep& s, int64_t row0, int64_t rows) const {
    const int64_t per_row = kH * kW * kC;
    std::copy(x.begin() + row0 * per_row, x.begin() + (row0 + rows) * per_row, s.program->input(s.x).data<float>());
    std::copy(r.begin() + row0 * per_row, r.begin() + (row0 + rows) * per_row, s.program->input(s.r).data<float>());
    std::copy(gamma.begin(), gamma.end(), s.program->input(s.gamma).data<float>());
    std::copy(beta.begin(), beta.end(), s.program->input(s.beta).data<float>());
  }
};

// Runs `replicas` programs on equal shards of the batch, `steps` times, joined by a
// cross-replica sum when `synchronized`.
std::vector<std::unique_ptr<BnStep>> RunReplicas(const Data& d, int64_t batch, int replicas, bool synchronized, int steps) {
  const int64_t shard = batch / replicas;
  std::vector<std::unique_ptr<BnStep>> rs;
  auto slots = std::make_shared<std::vector<std::vector<double>>>(replicas);
  auto meet = std::make_shared<std::barrier<>>(replicas);
  for (int q = 0; q < replicas; ++q) {
    rs.push_back(std::make_unique<BnStep>());
    Build(*rs.back(), shard, synchronized);
    if (testing::Test::HasFatalFailure()) return {};
    d.Feed(*rs.back(), q * shard, shard);
    if (synchronized)
      rs.back()->program->set_cross_replica_sum([slots, meet, q, replicas](double* data, int64_t n) {
        (*slots)[q].assign(data, data + n);
        meet->arrive_and_wait();
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int p = 0; p < replicas; ++p) sum += (*slots)[p][j];
          data[j] = sum;
        }
        meet->arrive_and_wait();
        return Status::OK();
      });
  }
  std::vector<Status> st(replicas);
  std::vector<std::thread> threads;
  for (int q = 0; q < replicas; ++q)
    threads.emplace_back([&, q] {
      for (int k = 0; k < steps && st[q].ok(); ++k) st[q] = rs[q]->program->Run();
    });
  for (auto& t : threads) t.join();
  for (int q = 0; q < replicas; ++q) EXPECT_TRUE(st[q].ok()) << st[q].ToString();
  return rs;
}

TEST(SyncBatchNorm, TwoReplicaProgramsEqualOneProgramOnTheWholeBatch) {
  constexpr int64_t kBatch = 8;
  const Data d(kBatch);
  auto whole = RunReplicas(d, kBatch, 1, /*synchronized=*/false, 3);  // oneDNN's batch norm
  ASSERT_EQ(whole.size(), 1u);
  for (int replicas : {2, 4}) {
    auto parts = RunReplicas(d, kBatch, replicas, /*synchronized=*/true, 3);
    ASSERT_EQ(parts.size(), static_cast<size_t>(replicas));
    const int64_t shard_elems = kBatch / replicas * kH * kW * kC;
    const BnStep& w = *whole[0];
    // Outputs and d loss / d x: row by row (the global sums make every row's gradient depend
    // on all rows, as in the whole-batch program).
    for (int q = 0; q < replicas; ++q) {
      const float* got = parts[q]->program->fetch(parts[q]->y).data<float>();
      const float* want = w.program->fetch(w.y).data<float>() + q * shard_elems;
      for (int64_t e = 0; e < shard_elems; ++e) ASSERT_NEAR(got[e], want[e], 1e-5) << "y, replica " << q << " element " << e;
    }
    for (int q = 0; q < replicas; ++q) {
      const float* got = parts[q]->program->fetch(parts[q]->grads[0]).data<float>();
      const float* want = w.program->fetch(w.grads[0]).data<float>() + q * shard_elems;
      for (int64_t e = 0; e < shard_elems; ++e) ASSERT_NEAR(got[e], want[e], 1e-5) << "dx, replica " << q << " element " << e;
    }
    // d gamma and d beta: each replica's share; their sum is the whole batch's gradient.
    for (int k : {1, 2})
      for (int64_t c = 0; c < kC; ++c) {
        double sum = 0;
        for (int q = 0; q < replicas; ++q) sum += parts[q]->program->fetch(parts[q]->grads[k]).data<float>()[c];
        EXPECT_NEAR(sum, w.program->fetch(w.grads[k]).data<float>()[c], 2e-4) << "gradient " << k << " channel " << c;
      }
    // Moving statistics after three steps: every replica holds the whole batch's.
    for (int q = 0; q < replicas; ++q)
      for (const char* name : {"bn/moving_mean", "bn/moving_variance"}) {
        auto got = parts[q]->program->variables().Value(name);
        auto want = w.program->variables().Value(name);
        ASSERT_TRUE(got.ok() && want.ok());
        for (int64_t c = 0; c < kC; ++c)
          EXPECT_NEAR(got->data<float>()[c], want->data<float>()[c], 1e-5) << name << " replica " << q << " channel " << c;
      }
  }
}

TEST(SyncBatchNorm, WithoutTheSumEachReplicaNormalizesItsOwnShard) {
  constexpr int64_t kBatch = 8;
  const Data d(kBatch);
  auto whole = RunReplicas(d, kBatch, 1, false, 1);
  auto parts = RunReplicas(d, kBatch, 2, false, 1);
  ASSERT_EQ(parts.size(), 2u);
  double max_diff = 0;
  const int64_t shard_elems = kBatch / 2 * kH * kW * kC;
  for (int q = 0; q < 2; ++q) {
    const float* got = parts[q]->program->fetch(parts[q]->y).data<float>();
    const float* want = whole[0]->program->fetch(whole[0]->y).data<float>() + q * shard_elems;
    for (int64_t e = 0; e < shard_elems; ++e) max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[e]) - want[e]));
  }
  EXPECT_GT(max_diff, 1e-2);
}

TEST(SyncBatchNorm, AnErrorFromTheSumStopsTheStep) {
  BnStep s;
  Build(s, 4, /*synchronized=*/true);
  Data(4).Feed(s, 0, 4);
  s.program->set_cross_replica_sum([](double*, int64_t) { return Internal("replica 1 is gone"); });
  Status st = s.program->Run();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("replica 1 is gone"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace strata::backend
