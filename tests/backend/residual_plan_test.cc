// How the cpu backend plans a residual sum (graph/fusion.h). A convolution whose output (after
// its bias) is added to another value, and the activation after that sum, are one convolution
// kernel: the sum a post-op reading the other value in the layout the convolution writes, so
// ResNet's bottleneck neither reorders its blocked output to plain nor passes over it twice
// more (the sum, the ReLU). Where the post-op would change oneDNN's kernel, the sum is a binary
// kernel of its own right after the convolution. A sum that follows something else (training's
// batch norm) takes the activation after it as its post-op. Either way the numbers are the
// reference backend's, forward and backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/bf16_expected.h"
#include "common/plan_run.h"
#include "strata/backend/compile.h"
#include "strata/graph/autodiff.h"
#include "strata/graph/fusion.h"
#include "strata/graph/graph.h"
#include "strata/graph/schedule.h"

namespace strata::backend {
namespace {

using graph::Value;
using test_plans::ExpectSameValues;
using test_plans::PlanRun;
using test_plans::PlanStep;

void RunOn(const PlanStep& s, const std::string& backend, PlanRun& out, int threads = 0) {
  CompileOptions o;
  o.backend = backend;
  if (threads > 0) o.threads = threads;
  test_plans::CompileAndRun(s, o, 5, out);
}

// x -> Conv2D(x, w) + x -> ReLU, named conv, `add`, `relu`: the residual sum of a basic block.
Value ConvPlusInputRelu(graph::Graph& g, Value x, Value w, const std::string& add, const std::string& relu) {
  auto conv = g.Conv2D(x, w, {.padding = graph::Padding::kSame}, "conv");
  EXPECT_TRUE(conv.ok());
  auto sum = g.Add(*conv, x, add);
  EXPECT_TRUE(sum.ok());
  auto out = g.Relu(*sum, relu);
  EXPECT_TRUE(out.ok());
  return *out;
}

// A bottleneck as ResNet50's at inference (batch norms folded into the convolutions' biases):
// 1x1 + bias + ReLU, 3x3 + bias + ReLU, 1x1 + bias, + shortcut, ReLU; `blocks` of them in a row,
// the first's shortcut a graph input (plain), each next one's the previous block's output.
void BuildBottlenecks(PlanStep& s, int blocks, int64_t c) {
  graph::Graph& g = s.g;
  Value x = g.Input("x", DType::kF32, {2, 7, 6, c});
  s.inputs = {x};
  for (int b = 0; b < blocks; ++b) {
    const std::string p = "block" + std::to_string(b) + "_";
    Value y = x;
    for (int l = 0; l < 3; ++l) {
      const int64_t k = l == 1 ? 3 : 1;
      const Value w = g.Input(p + "w" + std::to_string(l), DType::kF32, {k, k, c, c});
      const Value bias = g.Input(p + "b" + std::to_string(l), DType::kF32, {c});
      s.inputs.insert(s.inputs.end(), {w, bias});
      auto conv = g.Conv2D(y, w, {.padding = graph::Padding::kSame}, p + "conv" + std::to_string(l));
      ASSERT_TRUE(conv.ok());
      auto biased = g.BiasAdd(*conv, bias, p + "bias" + std::to_string(l));
      ASSERT_TRUE(biased.ok());
      y = *biased;
      if (l < 2) {
        auto r = g.Relu(y, p + "relu" + std::to_string(l));
        ASSERT_TRUE(r.ok());
        y = *r;
      }
    }
    auto sum = g.Add(x, y, p + "add");
    ASSERT_TRUE(sum.ok());
    auto out = g.Relu(*sum, p + "out");
    ASSERT_TRUE(out.ok());
    x = *out;
  }
  s.fetches = {x};
}

// Two 32-channel bottlenecks compiled with `o` (ours) and on the reference backend (ref).
void RunBottlenecks(const CompileOptions& o, PlanRun& ours, PlanRun& ref) {
  PlanStep s;
  ASSERT_NO_FATAL_FAILURE(BuildBottlenecks(s, 2, 32));
  ASSERT_NO_FATAL_FAILURE(test_plans::CompileAndRun(s, o, 5, ours));
  ASSERT_NO_FATAL_FAILURE(RunOn(s, "reference", ref));
}

TEST(ResidualPlanTest, InferenceBottleneckSumAndReluRunInsideTheLastConvolution) {
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(RunBottlenecks({}, ours, ref));
  EXPECT_EQ(test_plans::CountKernels(ours, "conv_fwd", "(Conv2D+BiasAdd+Add+Relu)"), 2);
  EXPECT_EQ(test_plans::CountKernels(ours, "binary"), 0) << "the sum ran as a kernel of its own";
  for (const KernelInfo& k : ours.kernels) {
    EXPECT_EQ(k.op.rfind("eltwise", 0), std::string::npos) << k.name << ": a ReLU ran apart";
    // The second block's shortcut is the first block's output, already in the layout the
    // convolution writes: nothing reorders it, nor the sum.
    if (k.op == "reorder") {
      for (const char* kept : {"block0_out/", "block1_add/", "block0_bias2/"})
        EXPECT_EQ(k.name.find(kept), std::string::npos) << k.name << ": " << k.shapes;
    }
  }
  ExpectSameValues(ours, ref, 1e-4);
}

// Mixed bf16 (where the host runs it): the same fused groups, bf16 convolutions (the sum's
// post-op, or the binary kernel where it would change oneDNN's bf16 kernel), the reference's
// numbers to bf16's precision. The shortcut may be bf16 or f32: the sum reads it in the
// convolution's own output type.
TEST(ResidualPlanTest, MixedBf16BottlenecksFuseAndMatchTheReference) {
  ASSERT_EQ(PrecisionSupported(Precision::kBF16).ok(), testing::Bf16MustRun()) << PrecisionSupported(Precision::kBF16).ToString();
  // Refused where the host has no bf16 kernels (an AVX2 host): CpuBackendTest covers that.
  if (!testing::Bf16MustRun()) return;
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(RunBottlenecks({.precision = Precision::kBF16}, ours, ref));
  EXPECT_EQ(test_plans::CountKernels(ours, "conv_fwd", "(Conv2D+BiasAdd+Add+Relu)"), 2);
  EXPECT_EQ(test_plans::CountKernels(ours, "eltwise_Relu"), 0);
  ExpectSameValues(ours, ref, 3e-2);
}

// CompileOptions::fuse_residual = false (STRATA_FUSE_RESIDUAL=0): the sum and the ReLU are
// kernels of their own again, with the same numbers.
TEST(ResidualPlanTest, TurnedOffTheSumAndReluRunApart) {
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(RunBottlenecks({.fuse_residual = false}, ours, ref));
  EXPECT_EQ(test_plans::CountKernels(ours, "conv_fwd", "+Add"), 0);
  EXPECT_EQ(test_plans::CountKernels(ours, "binary", "add (Add)"), 2);
  EXPECT_EQ(test_plans::CountKernels(ours, "eltwise_Relu", "out (Activation)"), 2);
  ExpectSameValues(ours, ref, 1e-4);
}

// A 3x3 convolution with a residual sum (ResNet18's basic block): whatever kernel runs it (with
// the post-op; or oneDNN's Winograd, or on an AVX2 host with one thread Strata's, and then a
// binary kernel), one fused group, the reference's numbers.
TEST(ResidualPlanTest, ThreeByThreeResidualKeepsItsKernelAndTheNumbers) {
  for (int threads : {0, 1}) {
    SCOPED_TRACE(threads == 1 ? "one thread" : "default threads");
    PlanStep s;
    graph::Graph& g = s.g;
    const Value x = g.Input("x", DType::kF32, {4, 16, 16, 32});  // 64 tiles: Strata's Winograd pays
    const Value w = g.Input("w", DType::kF32, {3, 3, 32, 32});
    s.inputs = {x, w};
    s.fetches = {ConvPlusInputRelu(g, x, w, "add", "out")};
    PlanRun ours, ref;
    ASSERT_NO_FATAL_FAILURE(RunOn(s, "cpu", ours, threads));
    ASSERT_NO_FATAL_FAILURE(RunOn(s, "reference", ref));
    EXPECT_EQ(test_plans::CountKernels(ours, "conv_fwd", "(Conv2D+Add+Relu)"), 1);
    EXPECT_EQ(test_plans::CountKernels(ours, "eltwise_Relu"), 0);
    ExpectSameValues(ours, ref, 1e-4);
  }
}

// Training: a convolution's residual sum (its gradient is the sum's) and a sum of two other
// values with the ReLU after it, forward and every gradient against the reference.
TEST(ResidualPlanTest, TrainingSumsAndTheirGradientsMatchTheReference) {
  PlanStep s;
  graph::Graph& g = s.g;
  const Value x = g.Input("x", DType::kF32, {2, 5, 4, 16});
  const Value w = g.Input("w", DType::kF32, {3, 3, 16, 16});
  const Value m = g.Input("m", DType::kF32, {2, 5, 4, 16});
  const Value r = g.Input("r", DType::kF32, {2, 5, 4, 16});
  s.inputs = {x, w, m, r};
  const Value relu = ConvPlusInputRelu(g, x, w, "add", "relu");
  auto scaled = g.Multiply(relu, m, "scale");  // not a convolution: the sum after it is the head
  ASSERT_TRUE(scaled.ok());
  auto sum2 = g.Add(*scaled, x, "add2");
  ASSERT_TRUE(sum2.ok());
  auto relu2 = g.Relu(*sum2, "relu2");
  ASSERT_TRUE(relu2.ok());
  auto weighed = g.Multiply(*relu2, r, "weigh");
  ASSERT_TRUE(weighed.ok());
  auto loss = g.ReduceSum(*weighed, {}, "loss");
  ASSERT_TRUE(loss.ok());
  auto grads = graph::Gradients(g, *loss, {x, w, m});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  s.fetches = {*loss, *relu2, (*grads)[0], (*grads)[1], (*grads)[2]};
  PlanRun ours, ref;
  ASSERT_NO_FATAL_FAILURE(RunOn(s, "cpu", ours));
  ASSERT_NO_FATAL_FAILURE(RunOn(s, "reference", ref));
  EXPECT_EQ(test_plans::CountKernels(ours, "conv_fwd", "(Conv2D+Add+Relu)"), 1);
  EXPECT_EQ(test_plans::CountKernels(ours, "binary", "add2 (Add+Relu)"), 1);
  EXPECT_EQ(test_plans::CountKernels(ours, "eltwise_Relu"), 0);
  ExpectSameValues(ours, ref, 1e-4);
}

// The fusion plan: a sum whose other operand is computed after the convolution (the fused
// kernel could not read it there), x + x, and a fetched convolution output keep their own
// kernels.
TEST(ResidualFusionTest, OnlyWhereTheOtherOperandIsReadyAndNothingElseReadsTheParts) {
  graph::Graph g;
  const Value x = g.Input("x", DType::kF32, {1, 4, 4, 8});
  const Value w = g.Input("w", DType::kF32, {1, 1, 8, 8});
  auto early = g.Conv2D(x, w, {}, "early");
  auto late = g.Conv2D(x, w, {}, "late");  // computed after `early`
  auto sum = g.Add(*early, *late, "sum");  // early's other operand is late: not ready
  auto twice = g.Conv2D(*sum, w, {}, "twice");
  auto sum2 = g.Add(*twice, *twice, "sum2");  // x + x: no other operand
  auto c3 = g.Conv2D(*sum2, w, {}, "c3");
  auto sum3 = g.Add(*c3, *sum2, "sum3");  // fusable
  auto out = g.Relu(*sum3, "out");
  ASSERT_TRUE(early.ok() && late.ok() && sum.ok() && twice.ok() && sum2.ok() && c3.ok() && sum3.ok() && out.ok());
  const graph::Schedule sched = graph::MakeSchedule(g, {*out});
  const graph::FusionPlan f = graph::PlanFusion(g, sched, true);
  EXPECT_EQ(f.residual[early->node], -1);
  EXPECT_EQ(f.residual[late->node], sum->node);  // late's other operand, early, is ready
  EXPECT_EQ(f.residual[twice->node], -1);
  EXPECT_EQ(f.residual[c3->node], sum3->node);
  EXPECT_EQ(f.activation[c3->node], out->node);
  EXPECT_EQ(f.absorbed_by[sum3->node], c3->node);
  // A fetched sum is the fused kernel's output, with the activation apart; a fetched
  // convolution output is computed as it is.
  const graph::FusionPlan sum_fetched = graph::PlanFusion(g, sched, {}, {*sum3});
  EXPECT_EQ(sum_fetched.residual[c3->node], sum3->node);
  EXPECT_EQ(sum_fetched.activation[c3->node], -1);
  const graph::FusionPlan conv_fetched = graph::PlanFusion(g, sched, {}, {*c3});
  EXPECT_EQ(conv_fetched.residual[c3->node], -1);
  EXPECT_EQ(conv_fetched.absorbed_by[sum3->node], -1);
}

}  // namespace
}  // namespace strata::backend
