// How the cpu backend plans DenseNet's dense blocks. A concat and a slice along channels run in
// the channel-blocked layout the convolutions write (nChw16c, or nChw8c on an AVX2 host) when
// every channel count is whole blocks, so neither the forward concats nor the slices of their
// gradients reorder to plain and back (the plain layout otherwise). At inference the batch norm
// and ReLU before each convolution are one kernel, and the convolution reads their blocked
// output as it is. Either way the numbers are the reference backend's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/plan_run.h"
#include "strata/backend/compile.h"
#include "strata/graph/autodiff.h"
#include "strata/graph/graph.h"

namespace strata::backend {
namespace {

using graph::Value;

using DenseStep = test_plans::PlanStep;
using test_plans::ExpectSameValues;
using test_plans::PlanRun;

// Two dense layers over x (`c` channels, plain: a graph input), each a convolution of the
// concatenation so far whose `growth` channels are appended to it, a 1x1 convolution of the
// last concatenation (DenseNet's transition: the concatenations' gradients come from
// convolutions) and the gradients of a weighted sum of its output.
void BuildDenseStep(DenseStep& s, int64_t c, int64_t growth) {
  graph::Graph& g = s.g;
  const Value x = g.Input("x", DType::kF32, {2, 5, 4, c});
  const Value w1 = g.Input("w1", DType::kF32, {1, 1, c, growth});
  const Value w2 = g.Input("w2", DType::kF32, {3, 3, c + growth, growth});
  const Value w3 = g.Input("w3", DType::kF32, {1, 1, c + 2 * growth, growth});
  const Value r = g.Input("r", DType::kF32, {2, 5, 4, growth});
  s.inputs = {x, w1, w2, w3, r};
  auto y1 = g.Conv2D(x, w1, {.padding = graph::Padding::kSame}, "conv1");
  ASSERT_TRUE(y1.ok());
  auto cat1 = g.Concat({x, *y1}, 3, "cat1");
  ASSERT_TRUE(cat1.ok());
  auto y2 = g.Conv2D(*cat1, w2, {.padding = graph::Padding::kSame}, "conv2");
  ASSERT_TRUE(y2.ok());
  auto cat2 = g.Concat({*cat1, *y2}, 3, "cat2");
  ASSERT_TRUE(cat2.ok());
  auto y3 = g.Conv2D(*cat2, w3, {.padding = graph::Padding::kSame}, "transition");
  ASSERT_TRUE(y3.ok());
  auto p = g.Multiply(*y3, r, "weigh");
  ASSERT_TRUE(p.ok());
  auto loss = g.ReduceSum(*p, {}, "loss");
  ASSERT_TRUE(loss.ok());
  auto grads = graph::Gradients(g, *loss, {x, w1, w2, w3});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  s.fetches = {*loss, *cat2, (*grads)[0], (*grads)[1], (*grads)[2], (*grads)[3]};
}

void CompileAndRun(const DenseStep& s, const std::string& backend, PlanRun& out) {
  CompileOptions o;
  o.backend = backend;
  test_plans::CompileAndRun(s, o, 11, out);
}

TEST(DenseBlockPlanTest, WholeChannelBlocksStayBlockedThroughConcatsAndTheirGradients) {
  DenseStep s;
  ASSERT_NO_FATAL_FAILURE(BuildDenseStep(s, 32, 16));  // whole blocks of 16 (and of 8)
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, "cpu", ours));
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, "reference", ref));
  EXPECT_EQ(test_plans::CountKernels(ours, "concat"), 2);
  EXPECT_GE(test_plans::CountKernels(ours, "slice"), 2);
  // The only layout changes inside the block are x's (a plain graph input) into the blocks and
  // those the fetches need (plain program memory); a concat or a slice of a gradient in plain
  // layout would add a reorder of a convolution's output, of a concatenation or of a slice.
  for (const KernelInfo& k : ours.kernels) {
    if (k.op != "reorder") continue;
    for (const char* kept : {"conv1/reorder", "conv2/reorder", "cat1/reorder", "cat1/grad", "cat2/grad"})
      EXPECT_NE(k.name.rfind(kept, 0), 0u) << k.name << ": " << k.shapes;
  }
  ExpectSameValues(ours, ref, 1e-4);
}

TEST(DenseBlockPlanTest, PartChannelBlocksConcatPlain) {
  DenseStep s;
  ASSERT_NO_FATAL_FAILURE(BuildDenseStep(s, 12, 4));  // no whole blocks: the plain layout
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, "cpu", ours));
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, "reference", ref));
  EXPECT_EQ(test_plans::CountKernels(ours, "concat"), 2);
  ExpectSameValues(ours, ref, 1e-4);
}

// Inference: conv 3x3 -> concat with its input -> batch norm -> ReLU -> conv 1x1.
TEST(DenseBlockPlanTest, InferenceBatchNormReluIsOneKernelThatTheConvolutionReadsAsItIs) {
  DenseStep s;
  graph::Graph& g = s.g;
  const Value x = g.Input("x", DType::kF32, {2, 6, 6, 32});
  const Value w1 = g.Input("w1", DType::kF32, {3, 3, 32, 16});
  const Value w2 = g.Input("w2", DType::kF32, {1, 1, 48, 16});
  s.inputs = {x, w1, w2};
  std::vector<Value> stats;
  for (const char* name : {"gamma", "beta", "mean", "variance"}) {
    stats.push_back(g.Input(name, DType::kF32, {48}));
    s.inputs.push_back(stats.back());
  }
  s.positive = {stats[3]};
  auto y1 = g.Conv2D(x, w1, {.padding = graph::Padding::kSame}, "conv1");
  ASSERT_TRUE(y1.ok());
  auto cat = g.Concat({x, *y1}, 3, "cat");
  ASSERT_TRUE(cat.ok());
  auto bn = g.BatchNormInference(*cat, stats[0], stats[1], stats[2], stats[3], {}, "bn");
  ASSERT_TRUE(bn.ok());
  auto relu = g.Relu(*bn, "relu");
  ASSERT_TRUE(relu.ok());
  auto y2 = g.Conv2D(*relu, w2, {.padding = graph::Padding::kSame}, "conv2");
  ASSERT_TRUE(y2.ok());
  s.fetches = {*y2};
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, "cpu", ours));
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, "reference", ref));
  int bn_relu = 0;
  for (const KernelInfo& k : ours.kernels) {
    EXPECT_EQ(k.op.rfind("eltwise", 0), std::string::npos) << k.name << ": the ReLU runs apart from the batch norm";
    if (k.op == "bn_inference" && k.name == "bn (BatchNormInference+Relu)") ++bn_relu;
    if (k.op == "reorder") {
      for (const char* kept : {"cat/reorder", "relu/reorder"})
        EXPECT_NE(k.name.rfind(kept, 0), 0u) << k.name << ": " << k.shapes;
    }
  }
  EXPECT_EQ(bn_relu, 1);
  ExpectSameValues(ours, ref, 1e-4);
}

}  // namespace
}  // namespace strata::backend
