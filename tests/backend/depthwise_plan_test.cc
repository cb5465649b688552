// Where the cpu backend plans depthwise_kernels.h: the weight gradient of a depthwise
// convolution that oneDNN 2.6 would run as im2col + gemm (5x5, any stride; with its bias
// gradient fused, behind a folded ZeroPadding2D's asymmetric padding, channels not a multiple
// of the block; f32 and mixed bf16 programs) takes Strata's kernel for this host's ISA, and
// CompileOptions::depthwise_kernels turns it back into oneDNN's primitive with the same
// gradients.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/bf16_expected.h"
#include "common/plan_run.h"
#include "strata/backend/compile.h"
#include "strata/backend/cpu/depthwise_kernels.h"
#include "strata/graph/autodiff.h"
#include "strata/graph/graph.h"

namespace strata::backend {
namespace {

using graph::Padding;
using graph::Value;

using Step = test_plans::PlanStep;
using test_plans::PlanRun;

// Three depthwise convolutions of odd-sized inputs, each weighed by a random tensor and summed:
//   a: 5x5 'same' + BiasAdd, 24 channels (one and a half blocks of 16);
//   b: ZeroPadding2D (1, 2, 2, 1) + 5x5 'valid' stride 2 (folded: asymmetric padding), 24 channels;
//   c: 5x5 'same' stride 2, 40 channels.
void BuildStep(Step& s) {
  graph::Graph& g = s.g;
  const Value x = g.Input("x", DType::kF32, {3, 9, 7, 24});
  const Value x2 = g.Input("x2", DType::kF32, {3, 7, 5, 40});
  const Value wa = g.Input("wa", DType::kF32, {5, 5, 1, 24});
  const Value ba = g.Input("ba", DType::kF32, {24});
  const Value wb = g.Input("wb", DType::kF32, {5, 5, 1, 24});
  const Value wc = g.Input("wc", DType::kF32, {5, 5, 1, 40});
  auto a = g.Conv2D(x, wa, {.padding = Padding::kSame, .groups = 24}, "a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto ab = g.BiasAdd(*a, ba, "a_bias");
  ASSERT_TRUE(ab.ok());
  auto pad = g.ZeroPad2D(x, 1, 2, 2, 1, "b_pad");
  ASSERT_TRUE(pad.ok()) << pad.status().ToString();
  auto b = g.Conv2D(*pad, wb, {.stride_h = 2, .stride_w = 2, .groups = 24}, "b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto c = g.Conv2D(x2, wc, {.stride_h = 2, .stride_w = 2, .padding = Padding::kSame, .groups = 40}, "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  s.inputs = {x, x2, wa, ba, wb, wc};
  Value loss;
  int k = 0;
  for (const Value y : {*ab, *b, *c}) {
    const Value r = g.Input("r" + std::to_string(k), DType::kF32, y.shape());
    s.inputs.push_back(r);
    auto p = g.Multiply(y, r, "weigh" + std::to_string(k));
    ASSERT_TRUE(p.ok());
    auto sum = g.ReduceSum(*p, {}, "sum" + std::to_string(k));
    ASSERT_TRUE(sum.ok());
    if (k == 0) {
      loss = *sum;
    } else {
      auto l = g.Add(loss, *sum, "loss" + std::to_string(k));
      ASSERT_TRUE(l.ok());
      loss = *l;
    }
    ++k;
  }
  auto grads = graph::Gradients(g, loss, {x, x2, wa, ba, wb, wc});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  s.fetches = {loss};
  for (const Value& v : *grads) s.fetches.push_back(v);
}

void CompileAndRun(const Step& s, bool depthwise_kernels, Precision precision, PlanRun& out) {
  CompileOptions o;
  o.depthwise_kernels = depthwise_kernels;
  o.precision = precision;
  test_plans::CompileAndRun(s, o, 11, out);
}

void CheckStep(Precision precision) {
  Step s;
  ASSERT_NO_FATAL_FAILURE(BuildStep(s));
  PlanRun ours, onednn;
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, true, precision, ours));
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, false, precision, onednn));
  const std::string impl = cpu::KernelImplName(cpu::BestKernelIsa());
  int strata = 0, with_bias = 0;
  for (const KernelInfo& info : ours.kernels) {
    if (info.op != "conv_bwd_weights") continue;
    EXPECT_EQ(info.impl, impl) << info.name;
    ++strata;
    if (info.name.find("+BiasAddGrad") != std::string::npos) ++with_bias;
  }
  EXPECT_EQ(strata, 3);
  EXPECT_EQ(with_bias, 1);
  for (const KernelInfo& info : onednn.kernels) {
    if (info.op == "conv_bwd_weights") {
      EXPECT_EQ(info.impl.rfind("strata:", 0), std::string::npos) << info.name;
    }
  }
  // The sums differ in order only (and in f64 against f32 accumulation): the products of bf16
  // inputs are exact in f32 either way.
  test_plans::ExpectSameValues(ours, onednn, 1e-5);
}

TEST(DepthwisePlanTest, FiveByFiveWeightGradientsTakeStrataKernelWithTheSameValues) { CheckStep(Precision::kF32); }

TEST(DepthwisePlanTest, MixedBf16ProgramsTakeItToo) {
  ASSERT_EQ(PrecisionSupported(Precision::kBF16).ok(), testing::Bf16MustRun()) << PrecisionSupported(Precision::kBF16).ToString();
  if (!testing::Bf16MustRun()) GTEST_SKIP() << "bf16 does not run on this host (no AVX-512, or capped below it)";
  CheckStep(Precision::kBF16);
}

}  // namespace
}  // namespace strata::backend
