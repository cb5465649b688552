// The program's gradient-ready points and kernel hook: what lets the cross-host all-reduce of
// a gradient bucket start while the rest of the backward pass runs (keras::Model's overlap).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/graph/autodiff.h"

namespace strata::backend {
namespace {

using graph::Graph;
using graph::Value;

// The kernel after which variable `name`'s gradient is final.
int ReadyKernel(Program& program, const std::string& name) {
  const VariableStore::Entry* e = program.variables().Find(name);
  EXPECT_NE(e, nullptr) << name;
  for (const GradientReady& r : program.gradient_ready())
    if (e && r.begin == e->offset && r.end == e->offset + e->size) return r.kernel;
  ADD_FAILURE() << "no gradient-ready entry for " << name;
  return -2;
}

// x [4, 6] -> tanh(x w1 [6, 5]) -> tanh(. w2 [5, 3]) -> . w3 [3, 2] -> mean: three layers whose
// gradients the backward pass finishes last layer first.
struct ThreeLayers {
  Graph g;
  Value x, loss;
  std::unique_ptr<Program> program;
  void Build() {
    x = g.Input("x", DType::kF32, {4, 6});
    auto w1 = g.Variable("w1", {6, 5}, {.init = graph::Init::kUniform, .value = 1, .seed = 1});
    auto w2 = g.Variable("w2", {5, 3}, {.init = graph::Init::kUniform, .value = 1, .seed = 2});
    auto w3 = g.Variable("w3", {3, 2}, {.init = graph::Init::kUniform, .value = 1, .seed = 3});
    auto h1 = g.Act(graph::Activation::kTanh, *g.MatMul(x, *w1));
    auto h2 = g.Act(graph::Activation::kTanh, *g.MatMul(*h1, *w2));
    loss = *g.ReduceMean(*g.MatMul(*h2, *w3));
    ASSERT_TRUE(graph::Gradients(g, loss, {*w1, *w2, *w3}).ok());
    auto c = Compile(g, {.fetches = {loss}});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    program = std::move(c).value();
    for (int e = 0; e < 24; ++e) program->input(x).data<float>()[e] = 0.1f * static_cast<float>(e % 7) - 0.3f;
  }
  int ReadyKernel(const std::string& name) { return backend::ReadyKernel(*program, name); }
};

TEST(GradientReadyTest, TheLastLayersGradientsAreFinalFirst) {
  ThreeLayers m;
  ASSERT_NO_FATAL_FAILURE(m.Build());
  const auto& ready = m.program->gradient_ready();
  ASSERT_EQ(ready.size(), 3u);
  int64_t covered = 0;
  for (const GradientReady& r : ready) covered += r.end - r.begin;
  EXPECT_EQ(covered, m.program->variables().num_trainable());
  const int k1 = m.ReadyKernel("w1"), k2 = m.ReadyKernel("w2"), k3 = m.ReadyKernel("w3");
  EXPECT_LT(k3, k2);
  EXPECT_LT(k2, k1);
  EXPECT_LT(k1, static_cast<int>(m.program->kernels().size()));
  for (size_t i = 1; i < ready.size(); ++i) EXPECT_LE(ready[i - 1].kernel, ready[i].kernel);
}

// A batch norm's gamma and beta gradients are outputs 1 and 2 of its gradient node, so each is
// copied into the gradient block. The copies come where the backward pass finishes them (after
// the batch norm's gradient, before the layer under it), not after the whole pass: at the end,
// each made a tiny all-reduce bucket of its own that waited for the pass (docs/scaling.md).
TEST(GradientReadyTest, BatchNormScaleAndShiftAreFinalWhereTheBackwardPassPassesThem) {
  Graph g;
  const Value x = g.Input("x", DType::kF32, {8, 6});
  auto w1 = g.Variable("w1", {6, 5}, {.init = graph::Init::kUniform, .value = 1, .seed = 1});
  auto gamma = g.Variable("bn/gamma", {5}, {.init = graph::Init::kOnes});
  auto beta = g.Variable("bn/beta", {5}, {.init = graph::Init::kZeros});
  auto mm = g.Variable("bn/moving_mean", {5}, {.trainable = false}, graph::VariableRole::kState);
  auto mv = g.Variable("bn/moving_variance", {5}, {.trainable = false}, graph::VariableRole::kState);
  auto w2 = g.Variable("w2", {5, 3}, {.init = graph::Init::kUniform, .value = 1, .seed = 2});
  ASSERT_TRUE(w1.ok() && gamma.ok() && beta.ok() && mm.ok() && mv.ok() && w2.ok());
  auto bn = g.BatchNorm(*g.MatMul(x, *w1), *gamma, *beta, *mm, *mv, {}, "bn");
  ASSERT_TRUE(bn.ok()) << bn.status().ToString();
  const Value loss = *g.ReduceMean(*g.MatMul(*g.Act(graph::Activation::kTanh, *bn), *w2));
  ASSERT_TRUE(graph::Gradients(g, loss, {*w1, *gamma, *beta, *w2}).ok());
  auto c = Compile(g, {.fetches = {loss}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Program& p = **c;
  const int k_w2 = ReadyKernel(p, "w2"), k_gamma = ReadyKernel(p, "bn/gamma"), k_beta = ReadyKernel(p, "bn/beta"),
            k_w1 = ReadyKernel(p, "w1");
  EXPECT_LT(k_w2, k_gamma);
  EXPECT_LT(k_w2, k_beta);
  EXPECT_LT(k_gamma, k_w1) << "gamma's gradient became final after the first layer's";
  EXPECT_LT(k_beta, k_w1) << "beta's gradient became final after the first layer's";
}

TEST(GradientReadyTest, TheHookFiresInKernelOrderWithTheGradientFinal) {
  ThreeLayers m;
  ASSERT_NO_FATAL_FAILURE(m.Build());
  const int kernels = static_cast<int>(m.program->kernels().size());
  const int k3 = m.ReadyKernel("w3"), k1 = m.ReadyKernel("w1");
  auto w1 = m.program->variables().Gradient("w1");
  auto w3 = m.program->variables().Gradient("w3");
  ASSERT_TRUE(w1.ok() && w3.ok());
  std::fill(w1->data<float>(), w1->data<float>() + w1->num_elements(), 0.0f);
  // Every kernel hooked: the calls come in order, -1 first. At the kernel that finishes w3
  // the first layer's gradient is still untouched (the backward pass has not reached it).
  std::vector<int> calls;
  std::vector<float> w3_at_hook;
  bool w1_untouched_then = false;
  m.program->set_kernel_hook(std::vector<uint8_t>(static_cast<size_t>(kernels) + 1, 1), [&](int k) {
    calls.push_back(k);
    if (k == k3) {
      w3_at_hook.assign(w3->data<float>(), w3->data<float>() + w3->num_elements());
      w1_untouched_then = true;
      for (int64_t i = 0; i < w1->num_elements(); ++i) w1_untouched_then &= w1->data<float>()[i] == 0.0f;
    }
    return Status::OK();
  });
  ASSERT_TRUE(m.program->Run().ok());
  ASSERT_EQ(static_cast<int>(calls.size()), kernels + 1);
  for (int i = 0; i <= kernels; ++i) EXPECT_EQ(calls[static_cast<size_t>(i)], i - 1);
  ASSERT_EQ(static_cast<int64_t>(w3_at_hook.size()), w3->num_elements());
  EXPECT_EQ(std::memcmp(w3_at_hook.data(), w3->data<float>(), w3_at_hook.size() * 4), 0) << "w3 changed after its ready kernel";
  EXPECT_TRUE(w1_untouched_then) << "w1's gradient was written before w3's was final (kernel " << k1 << " vs " << k3 << ")";
  bool w1_written = false;
  for (int64_t i = 0; i < w1->num_elements(); ++i) w1_written |= w1->data<float>()[i] != 0.0f;
  EXPECT_TRUE(w1_written);
}

TEST(GradientReadyTest, OnlyFlaggedKernelsAreHookedAndAnErrorEndsTheRun) {
  ThreeLayers m;
  ASSERT_NO_FATAL_FAILURE(m.Build());
  const int kernels = static_cast<int>(m.program->kernels().size());
  const int k2 = m.ReadyKernel("w2");
  std::vector<uint8_t> after(static_cast<size_t>(kernels) + 1, 0);
  after[static_cast<size_t>(k2 + 1)] = 1;
  std::vector<int> calls;
  m.program->set_kernel_hook(after, [&](int k) {
    calls.push_back(k);
    return Status::OK();
  });
  ASSERT_TRUE(m.program->Run().ok());
  EXPECT_EQ(calls, std::vector<int>{k2});
  m.program->set_kernel_hook(after, [](int k) { return Internal("bucket start failed after kernel " + std::to_string(k)); });
  Status st = m.program->Run();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bucket start failed after kernel " + std::to_string(k2)), std::string::npos) << st.ToString();
  m.program->set_kernel_hook({}, nullptr);  // removed: runs as before
  EXPECT_TRUE(m.program->Run().ok());
}

}  // namespace
}  // namespace strata::backend
