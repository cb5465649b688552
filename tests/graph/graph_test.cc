// Shape and dtype inference, error messages, scheduling, fusion and memory planning.
#include <gtest/gtest.h>

#include "common/reference_cnn_graph.h"
#include "strata/graph/autodiff.h"
#include "strata/graph/fusion.h"
#include "strata/graph/graph.h"
#include "strata/graph/memory_plan.h"
#include "strata/graph/schedule.h"

namespace strata::graph {
namespace {

using testing::BuildReferenceCnn;

TEST(GraphTest, ConvShapeInference) {
  Graph g;
  Value x = g.Input("x", DType::kF32, {8, 28, 28, 3});
  auto k = g.Variable("k", {3, 3, 3, 16});
  ASSERT_TRUE(k.ok());
  auto same = g.Conv2D(x, *k, {.stride_h = 2, .stride_w = 2, .padding = Padding::kSame}, "c1");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->shape(), (Shape{8, 14, 14, 16}));
  auto valid = g.Conv2D(x, *k, {}, "c2");
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(valid->shape(), (Shape{8, 26, 26, 16}));
}

TEST(GraphTest, ConvChannelMismatchNamesLayerAndShapes) {
  Graph g;
  Value x = g.Input("x", DType::kF32, {8, 28, 28, 3});
  auto k = g.Variable("k", {3, 3, 1, 32});
  auto y = g.Conv2D(x, *k, {}, "conv2d_1");
  ASSERT_FALSE(y.ok());
  const std::string m = y.status().message();
  EXPECT_NE(m.find("conv2d_1 (Conv2D)"), std::string::npos) << m;
  EXPECT_NE(m.find("[3, 3, 1, 32]"), std::string::npos) << m;
  EXPECT_NE(m.find("channels 3"), std::string::npos) << m;
}

TEST(GraphTest, DenseMismatchNamesExpectedAndFound) {
  Graph g;
  Value x = g.Input("x", DType::kF32, {4, 100});
  auto w = g.Variable("w", {99, 10});
  auto y = g.MatMul(x, *w, false, false, "dense_3");
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("dense_3 (MatMul)"), std::string::npos);
  EXPECT_NE(y.status().message().find("[4, 100]"), std::string::npos);
  EXPECT_NE(y.status().message().find("[99, 10]"), std::string::npos);
}

TEST(GraphTest, DtypeAndRankErrors) {
  Graph g;
  Value labels = g.Input("labels", DType::kI32, {4});
  Value logits = g.Input("logits", DType::kF32, {4, 10});
  EXPECT_FALSE(g.Relu(labels).ok());
  EXPECT_FALSE(g.SoftmaxCrossEntropy(logits, g.Input("bad", DType::kI32, {5})).ok());
  EXPECT_FALSE(g.MaxPool(logits, {}).ok());
  EXPECT_FALSE(g.Reshape(logits, {3, -1}).ok());
  EXPECT_FALSE(g.Dropout(logits, 1.0f, 0).ok());
  EXPECT_FALSE(g.Variable("dup", {1}).ok() && g.Variable("dup", {1}).ok());
  auto r = g.Reshape(logits, {-1, 5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{8, 5}));
}

TEST(GraphTest, GradientsPruneUnneededPaths) {
  Graph g;
  auto m = BuildReferenceCnn(g, {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  int backprop_input = 0, first_conv_input_grads = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).kind == OpKind::kConv2DBackpropInput) {
      ++backprop_input;
      if (g.node(g.node(i).attrs.forward_node).name == "conv2d") ++first_conv_input_grads;
    }
  }
  EXPECT_EQ(backprop_input, 3);  // no gradient for the images
  EXPECT_EQ(first_conv_input_grads, 0);
  // Matrix FLOPs per image: forward 37.4 M, about 112 M with the backward pass.
  int64_t flops = 0;
  for (int i = 0; i < g.num_nodes(); ++i) flops += g.MatrixFlops(i);
  EXPECT_NEAR(static_cast<double>(flops) / 4 / 1e6, 111.8, 0.5);
}

TEST(GraphTest, FusionGroupsOfTheReferenceCnn) {
  Graph g;
  auto m = BuildReferenceCnn(g, {.batch = 4});
  ASSERT_TRUE(m.ok());
  std::vector<Value> roots = m->grads;  // as the backends schedule: the fetches and every gradient
  roots.push_back(m->loss);
  Schedule s = MakeSchedule(g, roots);
  FusionPlan f = PlanFusion(g, s, true);
  int conv_bias = 0, bn_relu = 0, bn_relu_grad = 0, bias_grad = 0, dense_bias_relu = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.kind == OpKind::kConv2D && f.bias[i] >= 0) ++conv_bias;
    if (n.kind == OpKind::kBatchNorm && f.activation[i] >= 0) ++bn_relu;
    if (n.kind == OpKind::kBatchNormGrad && f.act_grad[i] >= 0) ++bn_relu_grad;
    if (n.kind == OpKind::kConv2DBackpropFilter && f.bias_grad[i] >= 0) ++bias_grad;
    if (n.kind == OpKind::kMatMul && f.bias[i] >= 0 && f.activation[i] >= 0) ++dense_bias_relu;
  }
  EXPECT_EQ(conv_bias, 4);
  EXPECT_EQ(bn_relu, 4);
  EXPECT_EQ(bn_relu_grad, 4);
  EXPECT_EQ(bias_grad, 4);
  EXPECT_EQ(dense_bias_relu, 1);
}

// The schedule is the live non-leaf nodes in graph (index) order: graph order is already a
// topological order. Live: the fetches, the side-effecting nodes (training batch norm, dropout)
// and whatever they read. The loss alone needs no gradient node.
TEST(ScheduleTest, LiveNonLeafNodesInIndexOrder) {
  Graph g;
  auto m = BuildReferenceCnn(g, {.batch = 4});
  ASSERT_TRUE(m.ok());
  std::vector<Value> roots = m->grads;
  roots.push_back(m->loss);
  for (const std::vector<Value>& fetches : {std::vector<Value>{m->loss}, roots}) {
    Schedule s = MakeSchedule(g, fetches);
    // Liveness by hand: a node is live when it is fetched, has side effects or feeds a live node.
    std::vector<bool> live(g.num_nodes(), false);
    for (const Value& f : fetches) live[f.node] = true;
    for (int i = g.num_nodes() - 1; i >= 0; --i) {
      live[i] = live[i] || g.node(i).has_side_effects;
      if (live[i])
        for (const Value& in : g.node(i).inputs) live[in.node] = true;
    }
    std::vector<int> expected;
    for (int i = 0; i < g.num_nodes(); ++i)
      if (live[i] && !IsLeaf(g.node(i).kind)) expected.push_back(i);
    EXPECT_EQ(s.order, expected);
    EXPECT_EQ(s.live, live);
    // So every node runs after what it reads.
    std::vector<bool> done(g.num_nodes(), false);
    for (int i : s.order) {
      for (const Value& in : g.node(i).inputs)
        EXPECT_TRUE(done[in.node] || IsLeaf(g.node(in.node).kind)) << g.node(i).name << " before its input";
      done[i] = true;
    }
    int grad_ops = 0;
    for (int i : s.order) grad_ops += g.node(i).kind == OpKind::kConv2DBackpropFilter;
    EXPECT_EQ(grad_ops, fetches.size() == 1 ? 0 : 4);
  }
}

TEST(MemoryPlanTest, ReusesDeadBuffersAndNeverOverlapsLiveOnes) {
  std::vector<BufferLife> b = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {500, 3, 4}, {3000, 5, 6}};
  MemoryPlan p = PlanMemory(b);
  EXPECT_LT(p.arena_bytes, p.naive_bytes);
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = i + 1; j < b.size(); ++j) {
      const bool live_together = b[i].first <= b[j].last && b[j].first <= b[i].last;
      const bool bytes_overlap = p.offsets[i] < p.offsets[j] + b[j].bytes && p.offsets[j] < p.offsets[i] + b[i].bytes;
      EXPECT_FALSE(live_together && bytes_overlap) << i << " and " << j;
    }
  for (int64_t o : p.offsets) EXPECT_EQ(o % 64, 0);
  EXPECT_EQ(p.arena_bytes, 3008);  // the 3000-byte buffer alone, rounded to 64
}

TEST(AutodiffTest, SharedGradientGetsItsOwnCopy) {
  Graph g;
  auto a = g.Variable("a", {3});
  auto b = g.Variable("b", {3});
  auto s = g.Add(*a, *b);
  auto loss = g.ReduceSum(*s);
  auto grads = Gradients(g, *loss, {*a, *b});
  ASSERT_TRUE(grads.ok());
  EXPECT_NE((*grads)[0], (*grads)[1]);
  EXPECT_EQ(g.GradientOf((*grads)[0]), a->node);
  EXPECT_EQ(g.GradientOf((*grads)[1]), b->node);
}

TEST(AutodiffTest, NonScalarLossIsAnError) {
  Graph g;
  Value x = g.Input("x", DType::kF32, {3});
  auto grads = Gradients(g, x, {x});
  EXPECT_FALSE(grads.ok());
}

}  // namespace
}  // namespace strata::graph
