// Batch norm + ReLU6, hard swish or swish as one kernel each way (backend/cpu/norm_act_kernels.h) and ZeroPadding2D
// folded into the next 'valid' convolution's padding (graph/fusion.h):
//   - the kernels against an f64 reference, in the plain and both blocked layouts, with padded
//     channels (written zero; NaN in the padding of dy ignored) and runs longer than one f32 run;
//   - a MobileNetV2 inverted-residual block at stride 2 (and a ResNet-style padded stem, and
//     the block with hard swish and swish): the fused and folded step computes what the unfused
//     one does, outputs and every gradient, and the fusion happened (no concat or slice kernel
//     is left, the activation's own kernels are gone).
// The "avx2:" copies run the AVX2 code path over oneDNN's nChw8c layout.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/backend/cpu/norm_act_kernels.h"
#include "strata/graph/autodiff.h"

namespace strata::backend {
namespace {

using cpu::ChannelLayout;
using graph::Activation;
using graph::Graph;
using graph::Value;

int64_t Index(const ChannelLayout& l, int64_t o, int64_t r, int64_t c) {
  return ((o * l.blocks + c / l.width) * l.inner + r) * l.width + c % l.width;
}

TEST(NormActKernels, MatchAnF64ReferenceInPlainAndBlockedLayouts) {
  const float eps = 1e-3f;
  // relu6(z) and hard_swish(z) = z relu6(z + 3) / 6, and their derivatives, in f64.
  auto act = [](cpu::NormActivation a, double z) {
    if (a == cpu::NormActivation::kSwish) return z / (1 + std::exp(-z));
    return a == cpu::NormActivation::kRelu6 ? std::min(std::max(z, 0.0), 6.0) : z * std::min(std::max(z + 3, 0.0), 6.0) / 6;
  };
  auto derivative = [](cpu::NormActivation a, double z) {
    if (a == cpu::NormActivation::kSwish) {
      const double s = 1 / (1 + std::exp(-z));
      return s * (1 + z * (1 - s));
    }
    return a == cpu::NormActivation::kRelu6 ? (z > 0 && z < 6 ? 1.0 : 0.0) : z < -3 ? 0.0 : z > 3 ? 1.0 : (2 * z + 3) / 6;
  };
  // plain [37, 20]; nChw16c and nChw8c with 20 channels (12 and 4 padded lanes); one block of
  // 300 rows (two f32 runs).
  for (const cpu::NormActivation a : {cpu::NormActivation::kRelu6, cpu::NormActivation::kHardSwish, cpu::NormActivation::kSwish})
  for (const ChannelLayout& l : {ChannelLayout{1, 1, 37, 20, 20}, ChannelLayout{2, 2, 9, 16, 20},
                                 ChannelLayout{3, 3, 7, 8, 20}, ChannelLayout{2, 1, 300, 16, 16}}) {
    SCOPED_TRACE(std::string(a == cpu::NormActivation::kRelu6 ? "relu6" : a == cpu::NormActivation::kSwish ? "swish" : "hard_swish") + ", layout {" +
                 std::to_string(l.outer) + ", " + std::to_string(l.blocks) + ", " + std::to_string(l.inner) + ", " +
                 std::to_string(l.width) + ", " + std::to_string(l.channels) + "}");
    const int64_t C = l.channels, size = l.outer * l.blocks * l.inner * l.width;
    std::mt19937_64 rng(11);
    std::normal_distribution<float> normal(0.3f, 1.5f);
    std::uniform_real_distribution<float> u(-1, 1), g(0.5f, 1.5f), b(-1.0f, 5.0f);
    std::vector<float> x(size, 0.0f), dy(size, std::numeric_limits<float>::quiet_NaN()), gamma(C), beta(C);
    for (int64_t c = 0; c < C; ++c) {
      gamma[c] = g(rng);
      beta[c] = b(rng);
    }
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t r = 0; r < l.inner; ++r)
        for (int64_t c = 0; c < C; ++c) {
          x[Index(l, o, r, c)] = normal(rng) * (1 + c % 3);
          dy[Index(l, o, r, c)] = u(rng);
        }
    cpu::NormActScratch scratch(l);
    std::vector<float> y(size, -1.0f), dx(size, -1.0f), mean(C), var(C), dgamma(C), dbeta(C);
    cpu::BatchNormActForward(a, x.data(), gamma.data(), beta.data(), l, eps, scratch, y.data(), mean.data(),
                             var.data());
    cpu::BatchNormActBackward(a, x.data(), dy.data(), gamma.data(), beta.data(), mean.data(), var.data(), l, eps,
                              scratch, dx.data(), dgamma.data(), dbeta.data());
    const double M = static_cast<double>(l.count());
    for (int64_t c = 0; c < C; ++c) {
      double s = 0, q = 0;
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t r = 0; r < l.inner; ++r) s += x[Index(l, o, r, c)];
      const double mu = s / M;
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t r = 0; r < l.inner; ++r) q += (x[Index(l, o, r, c)] - mu) * (x[Index(l, o, r, c)] - mu);
      const double v = q / M, istd = 1 / std::sqrt(v + eps);
      EXPECT_NEAR(mean[c], mu, 1e-5 * (1 + std::fabs(mu))) << "channel " << c;
      EXPECT_NEAR(var[c], v, 1e-5 * (1 + v)) << "channel " << c;
      double sdz = 0, sdzx = 0;
      std::vector<double> dz(static_cast<size_t>(l.count()));
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t r = 0; r < l.inner; ++r) {
          const int64_t e = Index(l, o, r, c);
          const double xhat = (x[e] - mu) * istd, z = gamma[c] * xhat + beta[c];
          EXPECT_NEAR(y[e], act(a, z), 1e-4) << "y, channel " << c;
          const double d = derivative(a, z) * dy[e];
          dz[o * l.inner + r] = d;
          sdz += d;
          sdzx += d * xhat;
        }
      EXPECT_NEAR(dbeta[c], sdz, 1e-4 * (1 + std::fabs(sdz))) << "channel " << c;
      EXPECT_NEAR(dgamma[c], sdzx, 1e-4 * (1 + std::fabs(sdzx))) << "channel " << c;
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t r = 0; r < l.inner; ++r) {
          const int64_t e = Index(l, o, r, c);
          const double xhat = (x[e] - mu) * istd;
          const double want = gamma[c] * istd * (dz[o * l.inner + r] - sdz / M - xhat * sdzx / M);
          EXPECT_NEAR(dx[e], want, 1e-4) << "dx, channel " << c;
        }
    }
    // Padded lanes: zero out, whatever dy held there.
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t r = 0; r < l.inner; ++r)
        for (int64_t c = C; c < l.padded_channels(); ++c) {
          EXPECT_EQ(y[Index(l, o, r, c)], 0.0f);
          EXPECT_EQ(dx[Index(l, o, r, c)], 0.0f);
        }
  }
}

// A graph with a scalar loss (sum of out * a fixed random projection), its inputs and the
// gradients of all of them.
struct Step {
  Graph g;
  std::vector<Value> inputs;
  Value out, loss;
  std::vector<Value> grads;
};

Value In(Step& s, const std::string& name, Shape shape) {
  Value v = s.g.Input(name, DType::kF32, std::move(shape));
  s.inputs.push_back(v);
  return v;
}

// Batch norm, then `act` unless it is linear.
Result<Value> BnAct(Step& s, Value x, const std::string& name, Activation act) {
  const int64_t C = x.shape()[-1];
  STRATA_ASSIGN_OR_RETURN(Value mm, s.g.Variable(name + "/moving_mean", {C}, {.trainable = false},
                                                 graph::VariableRole::kState));
  STRATA_ASSIGN_OR_RETURN(Value mv, s.g.Variable(name + "/moving_variance", {C}, {.trainable = false},
                                                 graph::VariableRole::kState));
  STRATA_ASSIGN_OR_RETURN(Value y, s.g.BatchNorm(x, In(s, name + "/gamma", {C}), In(s, name + "/beta", {C}), mm, mv,
                                                 {.momentum = 0.999f, .epsilon = 1e-3f}, name));
  if (act == Activation::kLinear) return y;
  return s.g.Act(act, y, name + "_act");
}

Status Finish(Step& s) {
  Value r = s.g.Input("projection", DType::kF32, s.out.shape());
  STRATA_ASSIGN_OR_RETURN(Value prod, s.g.Multiply(s.out, r, "project_loss"));
  STRATA_ASSIGN_OR_RETURN(s.loss, s.g.ReduceSum(prod, {}, "loss"));
  STRATA_ASSIGN_OR_RETURN(s.grads, graph::Gradients(s.g, s.loss, s.inputs));
  return Status::OK();
}

// Keras's _inverted_res_block at stride 2: expand 1x1, BN, ReLU6, ZeroPadding2D(correct_pad),
// depthwise 3x3 / 2 'valid', BN, ReLU6, project 1x1, BN. MobileNetV3's has hard swish for ReLU6.
Status InvertedResidual(Step& s, int64_t size, int64_t in_channels, int64_t expanded, Activation act) {
  Value x = In(s, "x", {2, size, size, in_channels});
  STRATA_ASSIGN_OR_RETURN(Value e, s.g.Conv2D(x, In(s, "expand/kernel", {1, 1, in_channels, expanded}), {}, "expand"));
  STRATA_ASSIGN_OR_RETURN(e, BnAct(s, e, "expand_BN", act));
  const int before = size % 2 == 1 ? 1 : 0;  // correct_pad: ((1, 1), (1, 1)) odd, ((0, 1), (0, 1)) even
  STRATA_ASSIGN_OR_RETURN(Value pad, s.g.ZeroPad2D(e, before, 1, before, 1, "pad"));
  STRATA_ASSIGN_OR_RETURN(Value d, s.g.Conv2D(pad, In(s, "depthwise/kernel", {3, 3, 1, expanded}),
                                              {.stride_h = 2, .stride_w = 2, .groups = static_cast<int>(expanded)},
                                              "depthwise"));
  STRATA_ASSIGN_OR_RETURN(d, BnAct(s, d, "depthwise_BN", act));
  STRATA_ASSIGN_OR_RETURN(Value p, s.g.Conv2D(d, In(s, "project/kernel", {1, 1, expanded, in_channels}), {}, "project"));
  STRATA_ASSIGN_OR_RETURN(s.out, BnAct(s, p, "project_BN", Activation::kLinear));
  return Finish(s);
}

// ResNet50's stem: ZeroPadding2D(3) on the image, 7x7 / 2 'valid' (no data gradient: the
// image is not differentiated), BN, ReLU6.
Status PaddedStem(Step& s) {
  Value x = s.g.Input("image", DType::kF32, {2, 16, 16, 3});
  STRATA_ASSIGN_OR_RETURN(Value pad, s.g.ZeroPad2D(x, 3, 3, 3, 3, "conv1_pad"));
  STRATA_ASSIGN_OR_RETURN(Value c, s.g.Conv2D(pad, In(s, "conv1/kernel", {7, 7, 3, 16}),
                                              {.stride_h = 2, .stride_w = 2}, "conv1"));
  STRATA_ASSIGN_OR_RETURN(s.out, BnAct(s, c, "bn_conv1", Activation::kRelu6));
  return Finish(s);
}

int Count(const Program& p, const std::string& op) {
  int n = 0;
  for (const KernelInfo& k : p.kernels()) n += k.op == op;
  return n;
}

// Runs `s` compiled with and without fusion on the same inputs; every fetch must agree.
void ExpectFusedEqualsUnfused(Step& s, int act_layers, int pads, bool data_gradient,
                              const std::string& act = "relu6", const std::string& eltwise = "Relu6") {
  std::vector<Value> fetches = s.grads;
  fetches.push_back(s.out);
  fetches.push_back(s.loss);
  auto fused = Compile(s.g, {.fetches = fetches});
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  auto plain = Compile(s.g, {.fetches = fetches, .fuse = false});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 1), gamma(0.5f, 1.5f), beta(-1.0f, 5.0f);
  for (int i = 0; i < s.g.num_nodes(); ++i) {
    const graph::Node& n = s.g.node(i);
    if (n.kind != graph::OpKind::kInput) continue;
    Tensor& a = (*fused)->input(s.g.output(i));
    Tensor& b = (*plain)->input(s.g.output(i));
    const bool is_gamma = n.name.ends_with("/gamma"), is_beta = n.name.ends_with("/beta");
    for (int64_t e = 0; e < a.num_elements(); ++e)
      a.data<float>()[e] = b.data<float>()[e] = is_gamma ? gamma(rng) : is_beta ? beta(rng) : u(rng);
  }
  ASSERT_TRUE((*fused)->Run().ok());
  ASSERT_TRUE((*plain)->Run().ok());
  for (const Value& f : fetches) {
    const Tensor& a = (*fused)->fetch(f);
    const Tensor& b = (*plain)->fetch(f);
    ASSERT_EQ(a.num_elements(), b.num_elements());
    double scale = 1e-3;
    for (int64_t e = 0; e < b.num_elements(); ++e) scale = std::max(scale, std::fabs(double{b.data<float>()[e]}));
    for (int64_t e = 0; e < b.num_elements(); ++e)
      ASSERT_NEAR(a.data<float>()[e], b.data<float>()[e], 2e-4 * scale) << s.g.Describe(f) << " element " << e;
  }
  // Fused: the pads and their gradients' slices are gone, batch norm and the activation are one kernel.
  EXPECT_EQ(Count(**fused, "concat"), 0);
  EXPECT_EQ(Count(**fused, "slice"), 0);
  EXPECT_EQ(Count(**fused, "bn_" + act + "_fwd"), act_layers);
  EXPECT_EQ(Count(**fused, "bn_" + act + "_bwd"), act_layers);
  EXPECT_EQ(Count(**fused, "eltwise_" + eltwise), 0);
  EXPECT_EQ(Count(**fused, "eltwise_bwd_" + eltwise), 0);
  // Unfused: ZeroPad2D's two concats (rows, then columns), a slice per concat backward.
  EXPECT_EQ(Count(**plain, "concat"), 2 * pads);
  EXPECT_EQ(Count(**plain, "slice"), data_gradient ? 2 * pads : 0);
  EXPECT_EQ(Count(**plain, "eltwise_" + eltwise), act_layers);
  EXPECT_EQ(Count(**plain, "bn_" + act + "_fwd"), 0);
}

TEST(NormActFold, InvertedResidualBlockFusedAndFoldedEqualsUnfused) {
  // Odd and even sizes (correct_pad differs); 48 expanded channels (three blocks of 16) and 24
  // (padded in a block of 16).
  for (const auto& [size, in, expanded] : {std::tuple{9, 8, 48}, std::tuple{8, 4, 24}}) {
    SCOPED_TRACE("size " + std::to_string(size) + ", " + std::to_string(expanded) + " channels");
    Step s;
    ASSERT_TRUE(InvertedResidual(s, size, in, expanded, Activation::kRelu6).ok());
    ExpectFusedEqualsUnfused(s, 2, 1, true);
  }
}

// MobileNetV3's block (batch norm + hard swish) and EfficientNet's (batch norm + swish), with 24
// channels a partly filled block.
TEST(NormActFold, HardSwishAndSwishBlocksFusedEqualUnfused) {
  for (const auto& [act, kernel, eltwise] : {std::tuple{Activation::kHardSwish, "hard_swish", "HardSwish"},
                                             std::tuple{Activation::kSwish, "swish", "Swish"}})
    for (const auto& [size, in, expanded] : {std::tuple{9, 8, 48}, std::tuple{8, 4, 24}}) {
      SCOPED_TRACE(std::string(kernel) + ", size " + std::to_string(size) + ", " + std::to_string(expanded) + " channels");
      Step s;
      ASSERT_TRUE(InvertedResidual(s, size, in, expanded, act).ok());
      ExpectFusedEqualsUnfused(s, 2, 1, true, kernel, eltwise);
    }
}

TEST(NormActFold, PaddedStemWithoutDataGradientIsFolded) {
  Step s;
  ASSERT_TRUE(PaddedStem(s).ok());
  ExpectFusedEqualsUnfused(s, 1, 1, false);
}

}  // namespace
}  // namespace strata::backend
