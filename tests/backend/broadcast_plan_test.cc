// Where the cpu backend plans broadcast_kernels.h: squeeze-and-excitation's scale, drop-connect's
// mask and the global average pool's gradient take Strata's kernel for this host's ISA, in the
// convolution output's own channel-blocked layout (no reorder before them), and
// STRATA_BROADCAST_KERNELS's option turns them back into oneDNN's primitives with the same
// results.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/plan_run.h"
#include "strata/backend/compile.h"
#include "strata/backend/cpu/broadcast_kernels.h"
#include "strata/graph/autodiff.h"
#include "strata/graph/graph.h"

namespace strata::backend {
namespace {

using graph::Value;

using SeStep = test_plans::PlanStep;
using test_plans::PlanRun;

// conv 1x1 (32 channels) -> x * mean_hw(x) -> drop-connect, and the gradients of a weighted sum.
void BuildSeStep(SeStep& s) {
  graph::Graph& g = s.g;
  const Value x = g.Input("x", DType::kF32, {2, 5, 4, 8});
  const Value w = g.Input("w", DType::kF32, {1, 1, 8, 32});
  const Value r = g.Input("r", DType::kF32, {2, 5, 4, 32});
  s.inputs = {x, w, r};
  auto y = g.Conv2D(x, w, {.padding = graph::Padding::kSame}, "conv");
  ASSERT_TRUE(y.ok());
  auto m = g.GlobalAvgPool(*y, "squeeze");
  ASSERT_TRUE(m.ok());
  auto f = g.Reshape(*m, {2, 1, 1, 32}, "squeeze_shape");
  ASSERT_TRUE(f.ok());
  auto e = g.Multiply(*y, *f, "excite");
  ASSERT_TRUE(e.ok());
  auto d = g.Dropout(*e, 0.3f, 5, Shape{2, 1, 1, 1}, "drop");
  ASSERT_TRUE(d.ok());
  auto p = g.Multiply(*d, r, "weigh");
  ASSERT_TRUE(p.ok());
  auto loss = g.ReduceSum(*p, {}, "loss");
  ASSERT_TRUE(loss.ok());
  auto grads = graph::Gradients(g, *loss, {x, w});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  s.fetches = {*loss, (*grads)[0], (*grads)[1], *d};
}

void CompileAndRun(const SeStep& s, bool broadcast_kernels, PlanRun& out) {
  CompileOptions o;
  o.broadcast_kernels = broadcast_kernels;
  test_plans::CompileAndRun(s, o, 9, out);
}

TEST(BroadcastPlanTest, SqueezeExcitationAndDropConnectTakeStrataKernelsInTheBlockedLayout) {
  SeStep s;
  ASSERT_NO_FATAL_FAILURE(BuildSeStep(s));
  PlanRun ours, onednn;
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, true, ours));
  ASSERT_NO_FATAL_FAILURE(CompileAndRun(s, false, onednn));
  const std::string impl = cpu::KernelImplName(cpu::BestKernelIsa());
  int broadcast = 0, pool_grad = 0;
  for (size_t k = 0; k < ours.kernels.size(); ++k) {
    const KernelInfo& info = ours.kernels[k];
    if (info.op == "binary_broadcast") ++broadcast;
    if (info.op == "avgpool_bwd") ++pool_grad;
    if (info.op != "binary_broadcast" && info.op != "avgpool_bwd") continue;
    EXPECT_EQ(info.impl, impl) << info.name;
    // The forward scale reads the convolution's output as the convolution wrote it (the only
    // reorder before it is the pooled factor's, [2, 32] to plain).
    if (info.name.rfind("excite (", 0) == 0) {
      for (size_t j = 0; j < k; ++j) {
        EXPECT_NE(ours.kernels[j].name.rfind("conv/reorder", 0), 0u) << "the convolution's output reordered for "
                                                                      << info.name;
      }
    }
  }
  // excite, drop forward; excite/grad/a, drop/grad/a backward; the squeeze's gradient.
  EXPECT_EQ(broadcast, 4);
  EXPECT_EQ(pool_grad, 1);
  for (const KernelInfo& info : onednn.kernels) {
    if (info.op == "binary_broadcast" || info.op == "avgpool_bwd") {
      EXPECT_EQ(info.impl.rfind("strata:", 0), std::string::npos) << info.name << ": " << info.impl;
    }
  }
  // Products are exact either way; the sums differ in order only.
  test_plans::ExpectSameValues(ours, onednn, 1e-5);
}

}  // namespace
}  // namespace strata::backend
