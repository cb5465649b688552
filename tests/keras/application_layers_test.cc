// The layers the Keras applications need (issues 18 and 44): ZeroPadding2D, ReLU(max_value,
// negative_slope), Multiply with size-1 broadcast, Normalization, Dropout(noise_shape),
// hard_sigmoid/swish names, stride-2 depthwise convolutions with a depth multiplier, the
// Inception family's 1xk / kx1 convolutions, batch norms without gamma and scaled residuals; their
// values on the compiled cpu engine, their parameter counts and their JSON classes. The
// gradients of the graph composites they emit are in the op table (tests/graph/op_cases.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/bf16_expected.h"
#include "strata/backend/compile.h"
#include "strata/backend/reference/evaluator.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/model.h"
#include "strata/keras/spec.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT
using graph::Value;

// x [n, ...] with x[i] = f(i) over the flat index.
Tensor Filled(Shape shape, const std::function<float(int64_t)>& f) {
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = f(i);
  return t;
}

// The model's inference output on x (one batch); compiles it (predict needs a compiled model).
Tensor Predict(Model& m, const Tensor& x) {
  Status st = m.compile({.optimizer = optimizers::SGD(0.01), .loss = losses::MeanSquaredError()});
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto p = m.predict(data::Dataset::from_tensor_slices(data::Element({x})).batch(x.shape()[0]));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Tensor();
}

std::unique_ptr<Model> Build(Shape input, std::vector<LayerPtr> ls, const std::string& name = "m") {
  ls.insert(ls.begin(), InputLayer(input));
  auto m = Sequential(ls, name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(ApplicationLayers, ZeroPadding2DPadsEachSideAndKeepsTheValues) {
  // MobileNetV2's correct_pad for an even input: ((0, 1), (0, 1)); here all four differ.
  auto m = Build({3, 4, 2}, {ZeroPadding2D(ZeroPadding2DOptions{.top = 1, .bottom = 0, .left = 2, .right = 1})});
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->Summary().find("zero_padding2d (ZeroPadding"), std::string::npos) << m->Summary();
  EXPECT_NE(m->Summary().find("(None, 4, 7, 2)"), std::string::npos) << m->Summary();
  Tensor x = Filled({2, 3, 4, 2}, [](int64_t i) { return 1.0f + static_cast<float>(i); });
  Tensor y = Predict(*m, x);
  ASSERT_EQ(y.shape(), Shape({2, 4, 7, 2}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t w = 0; w < 7; ++w)
        for (int64_t c = 0; c < 2; ++c) {
          const bool inside = h >= 1 && w >= 2 && w < 6;
          const float want = inside ? x.data<float>()[((n * 3 + h - 1) * 4 + w - 2) * 2 + c] : 0.0f;
          EXPECT_EQ(y.data<float>()[((n * 4 + h) * 7 + w) * 2 + c], want) << n << " " << h << " " << w << " " << c;
        }
  auto sym = Build({2, 2, 1}, {ZeroPadding2D(3)});
  ASSERT_NE(sym, nullptr);
  EXPECT_NE(sym->Summary().find("(None, 8, 8, 1)"), std::string::npos) << sym->Summary();
  auto bad = Sequential({InputLayer({3, 3, 1}), ZeroPadding2D(ZeroPadding2DOptions{.top = -1, .name = "pad"})}, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pad (ZeroPadding2D)"), std::string::npos) << bad.status().ToString();
}

TEST(ApplicationLayers, ReLUMaxValueAndNegativeSlopeAreKeras) {
  Tensor x = Filled({1, 24}, [](int64_t i) { return -6.0f + 0.5f * static_cast<float>(i); });  // -6 .. 5.5
  auto relu6 = Build({24}, {ReLU(ReLUOptions{.max_value = 6})});
  auto leaky = Build({24}, {ReLU(ReLUOptions{.max_value = 2.5f, .negative_slope = 0.1f})});
  auto plain = Build({24}, {ReLU(ReLUOptions{.negative_slope = 0.2f})});
  ASSERT_TRUE(relu6 && leaky && plain);
  Tensor a = Predict(*relu6, x), b = Predict(*leaky, x), c = Predict(*plain, x);
  for (int64_t i = 0; i < 24; ++i) {
    const float v = x.data<float>()[i];
    EXPECT_FLOAT_EQ(a.data<float>()[i], std::min(std::max(v, 0.0f), 6.0f)) << v;
    EXPECT_NEAR(b.data<float>()[i], v >= 2.5f ? 2.5f : v >= 0 ? v : 0.1f * v, 1e-6) << v;
    EXPECT_NEAR(c.data<float>()[i], v >= 0 ? v : 0.2f * v, 1e-6) << v;
  }
  auto threshold = Sequential({InputLayer({4}), ReLU(ReLUOptions{.threshold = 1, .name = "thr"})}, "t");
  ASSERT_FALSE(threshold.ok());
  EXPECT_NE(threshold.status().message().find("thr (ReLU)"), std::string::npos) << threshold.status().ToString();
}

TEST(ApplicationLayers, ActivationNamesSwishSiluAndHardSigmoid) {
  ASSERT_TRUE(ParseActivation("swish").ok());
  ASSERT_TRUE(ParseActivation("silu").ok());
  EXPECT_EQ(*ParseActivation("swish"), graph::Activation::kSwish);
  EXPECT_EQ(*ParseActivation("silu"), graph::Activation::kSwish);
  EXPECT_EQ(*ParseActivation("relu6"), graph::Activation::kRelu6);
  Tensor x = Filled({1, 16}, [](int64_t i) { return -4.0f + 0.5f * static_cast<float>(i); });  // -4 .. 3.5
  auto hs = Build({16}, {Activation("hard_sigmoid")});
  auto dense = Build({16}, {Dense(16, {.activation = "hard_sigmoid", .kernel_initializer = "zeros",
                                       .bias_initializer = "ones"})});
  auto sw = Build({16}, {Activation("silu")});
  ASSERT_TRUE(hs && dense && sw);
  Tensor y = Predict(*hs, x), d = Predict(*dense, x), s = Predict(*sw, x);
  for (int64_t i = 0; i < 16; ++i) {
    const float v = x.data<float>()[i];
    EXPECT_NEAR(y.data<float>()[i], std::min(std::max(0.2f * v + 0.5f, 0.0f), 1.0f), 1e-6) << v;
    EXPECT_NEAR(d.data<float>()[i], 0.7f, 1e-6);  // hard_sigmoid(0 . x + 1)
    EXPECT_NEAR(s.data<float>()[i], v / (1 + std::exp(-v)), 1e-5) << v;
  }
}

TEST(ApplicationLayers, MultiplyBroadcastsSqueezeAndExcitation) {
  // EfficientNet's block: x * reshape(global_average_pool(x), [1, 1, C]).
  KTensor in = Input({3, 2, 4});
  KTensor se = Call(Reshape({1, 1, 4}), Call(GlobalAveragePooling2D(), in));
  auto m = Model::Functional({in}, {Call(Multiply(), {in, se})}, "se");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_NE((*m)->Summary().find("multiply (Multiply)"), std::string::npos) << (*m)->Summary();
  Tensor x = Filled({2, 3, 2, 4}, [](int64_t i) { return std::sin(0.7f * static_cast<float>(i)); });
  Tensor y = Predict(**m, x);
  ASSERT_EQ(y.shape(), Shape({2, 3, 2, 4}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 4; ++c) {
      double mean = 0;
      for (int64_t p = 0; p < 6; ++p) mean += x.data<float>()[(n * 6 + p) * 4 + c] / 6.0;
      for (int64_t p = 0; p < 6; ++p) {
        const int64_t e = (n * 6 + p) * 4 + c;
        EXPECT_NEAR(y.data<float>()[e], x.data<float>()[e] * mean, 1e-5) << n << " " << p << " " << c;
      }
    }
  KTensor a = Input({3, 2, 4}), b = Input({2, 2, 4});
  auto bad = Model::Functional({a, b}, {Call(Multiply("mul"), {a, b})}, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mul (Multiply)"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("broadcast"), std::string::npos) << bad.status().ToString();
}

// InceptionResNetV2's block in small: a 1x3 and a 3x1 convolution ("same"), batch norm without
// gamma (scale=False: no weight at all, as Keras), CustomScaleLayer's x + 0.5 * residual.
TEST(ApplicationLayers, FactorizedConvolutionsAndScaledResidual) {
  KTensor in = Input({3, 4, 2});
  KTensor r = Call(Conv2D(2, {1, 3}, {.padding = "same", .use_bias = false, .name = "row"}), in);
  r = Call(BatchNormalization({.scale = false, .name = "bn"}), r);
  r = Call(Conv2D(2, {3, 1}, {.padding = "same", .use_bias = false, .name = "col"}), r);
  auto m = Model::Functional({in}, {Call(CustomScaleLayer(0.5f, "block"), {in, r})}, "inception_block");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string s = (*m)->Summary();
  EXPECT_NE(s.find("block (CustomScaleLayer)"), std::string::npos) << s;
  // row 1*3*2*2 + bn beta 2 (+ 2 moving statistics, non-trainable) + col 3*1*2*2: no gamma.
  EXPECT_EQ((*m)->count_params(), 12 + 2 + 4 + 12);
  EXPECT_NE(s.find("Non-trainable params: 4"), std::string::npos) << s;
  ASSERT_TRUE((*m)->compile({.optimizer = optimizers::SGD(0.01), .loss = losses::MeanSquaredError()}).ok());
  for (const auto& e : (*m)->variables()->entries()) EXPECT_EQ(e.name.find("gamma"), std::string::npos) << e.name;
  // Weights: row's kernel [1, 3, 2, 2] sums the row window of channel 0 into both outputs; col's
  // [3, 1, 2, 2] takes the centre tap of output channel c alone. Batch norm at its initial
  // statistics is x / sqrt(1 + 1e-3).
  for (const auto& e : (*m)->variables()->entries()) {
    auto view = (*m)->variables()->Value(e.name);
    ASSERT_TRUE(view.ok());
    float* w = view->data<float>();
    if (e.name == "row/kernel" || e.name == "col/kernel")
      for (int64_t i = 0; i < view->num_elements(); ++i) w[i] = 0;
    if (e.name == "row/kernel")
      for (int kw = 0; kw < 3; ++kw)
        for (int o = 0; o < 2; ++o) w[((kw * 2) + 0) * 2 + o] = 1;
    if (e.name == "col/kernel")
      for (int c = 0; c < 2; ++c) w[((1 * 2) + c) * 2 + c] = 1;
  }
  Tensor x = Filled({1, 3, 4, 2}, [](int64_t i) { return static_cast<float>(i % 7) - 3.0f; });
  auto predicted = (*m)->predict(data::Dataset::from_tensor_slices(data::Element({x})).batch(1));
  ASSERT_TRUE(predicted.ok()) << predicted.status().ToString();
  const Tensor& y = *predicted;
  ASSERT_EQ(y.shape(), Shape({1, 3, 4, 2}));
  const float* xv = x.data<float>();
  for (int64_t h = 0; h < 3; ++h)
    for (int64_t w = 0; w < 4; ++w) {
      double row = 0;
      for (int64_t dw = -1; dw <= 1; ++dw)
        if (w + dw >= 0 && w + dw < 4) row += xv[(h * 4 + w + dw) * 2 + 0];
      for (int64_t c = 0; c < 2; ++c) {
        const int64_t e = (h * 4 + w) * 2 + c;
        EXPECT_NEAR(y.data<float>()[e], xv[e] + 0.5 * row / std::sqrt(1.0 + 1e-3), 1e-5) << h << " " << w << " " << c;
      }
    }
  // From a Keras config: kernel_size [1, 3] and CustomScaleLayer's scale.
  auto spec = ModelFromJson(R"({"class_name": "Functional", "config": {"name": "spec", "layers": [
      {"class_name": "InputLayer", "name": "in", "config": {"batch_input_shape": [null, 3, 4, 2], "name": "in"},
       "inbound_nodes": []},
      {"class_name": "Conv2D", "name": "c", "config": {"name": "c", "filters": 2, "kernel_size": [1, 3],
       "padding": "same"}, "inbound_nodes": [[["in", 0, 0, {}]]]},
      {"class_name": "CustomScaleLayer", "name": "s", "config": {"name": "s", "scale": 0.17},
       "inbound_nodes": [[["in", 0, 0, {}], ["c", 0, 0, {}]]]}],
      "input_layers": [["in", 0, 0]], "output_layers": [["s", 0, 0]]}})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ((*spec)->count_params(), 1 * 3 * 2 * 2 + 2);
  // A kernel_size that is neither an int nor a pair is an error naming the layer.
  auto bad = ModelFromJson(R"({"class_name": "Sequential", "config": {"name": "bad", "layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3, 4, 2]}},
      {"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": [1, 3, 3]}}]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kernel_size"), std::string::npos) << bad.status().ToString();
}

// NASNet's adjust block shifts a feature map by one pixel: ZeroPadding2D ((0, 1), (0, 1)), then
// Cropping2D ((1, 0), (1, 0)).
TEST(ApplicationLayers, Cropping2DKeepsTheInnerRowsAndColumns) {
  auto m = Build({4, 5, 1}, {Cropping2D({.top = 1, .bottom = 0, .left = 2, .right = 1, .name = "crop"})});
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->Summary().find("crop (Cropping2D)"), std::string::npos) << m->Summary();
  Tensor x = Filled({1, 4, 5, 1}, [](int64_t i) { return static_cast<float>(i); });
  Tensor y = Predict(*m, x);
  ASSERT_EQ(y.shape(), Shape({1, 3, 2, 1}));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(y.data<float>()[r * 2 + c], static_cast<float>((r + 1) * 5 + c + 2));
  auto spec = ModelFromJson(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4, 5, 1]}},
      {"class_name": "ZeroPadding2D", "config": {"name": "pad", "padding": [[0, 1], [0, 1]]}},
      {"class_name": "Cropping2D", "config": {"name": "crop", "cropping": [[1, 0], [1, 0]]}}]}})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Tensor shifted = Predict(**spec, x);
  ASSERT_EQ(shifted.shape(), Shape({1, 4, 5, 1}));
  EXPECT_EQ(shifted.data<float>()[0], 6.0f);   // x[1][1]
  EXPECT_EQ(shifted.data<float>()[19], 0.0f);  // the padded corner
  auto err = Sequential({InputLayer({4, 5, 1}), Cropping2D({.top = 2, .bottom = 2, .name = "all_rows"})}, "m");
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("all_rows (Cropping2D)"), std::string::npos) << err.status().ToString();
}

TEST(ApplicationLayers, NormalizationStandardizesWithConstantsOrCountsTwoCPlusOne) {
  // Given a mean and a variance, Keras builds no weights (ConvNeXt's counts rely on it).
  auto m = Build({2, 2, 3}, {Normalization({.mean = {1, 2, 3}, .variance = {4, 1, 0.25f}})});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->count_params(), 0);
  Tensor x = Filled({2, 2, 2, 3}, [](int64_t i) { return static_cast<float>(i % 7) - 2.0f; });
  Tensor y = Predict(*m, x);
  const float mean[] = {1, 2, 3}, sd[] = {2, 1, 0.5f};
  for (int64_t i = 0; i < x.num_elements(); ++i)
    EXPECT_NEAR(y.data<float>()[i], (x.data<float>()[i] - mean[i % 3]) / sd[i % 3], 1e-5) << i;
  // Un-adapted: adapt()'s state, mean 0 and variance 1 (the identity), and Keras's "count".
  auto id = Build({2, 2, 3}, {Normalization()});
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->count_params(), 2 * 3 + 1);
  const std::string s = id->Summary();
  EXPECT_NE(s.find("normalization (Normalizatio"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 7"), std::string::npos) << s;
  Tensor z = Predict(*id, x);
  for (int64_t i = 0; i < x.num_elements(); ++i) EXPECT_NEAR(z.data<float>()[i], x.data<float>()[i], 1e-6);
  auto bad = Sequential({InputLayer({3}), Normalization({.mean = {1, 2}, .variance = {1, 1}, .name = "norm"})}, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("norm (Normalization): mean has 2 values"), std::string::npos)
      << bad.status().ToString();
  auto half = Sequential({InputLayer({3}), Normalization({.mean = {1, 2, 3}, .name = "norm"})}, "half");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("mean and variance must both be given"), std::string::npos)
      << half.status().ToString();
}

TEST(ApplicationLayers, DropoutNoiseShapeSharesOneDrawPerExample) {
  // EfficientNet's drop-connect, noise_shape (None, 1, 1, 1): each example kept or dropped whole.
  graph::Graph g;
  Value x = g.Input("x", DType::kF32, {64, 3, 2, 4});
  BuildContext ctx{.graph = &g, .training = true, .seed = 5};
  LayerPtr drop = Dropout(0.5f, DropoutOptions{.noise_shape = {0, 1, 1, 1}, .name = "drop"});
  auto y = drop->Call(ctx, {x});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  backend::reference::Evaluator ev(g, {*y});
  std::map<int, std::vector<double>> leaves;
  leaves[x.node] = std::vector<double>(64 * 24, 1.0);
  ASSERT_TRUE(ev.Run(leaves, 3).ok());
  const std::vector<double>& out = ev.value(*y);
  int kept = 0;
  for (int n = 0; n < 64; ++n) {
    const double v = out[n * 24];
    EXPECT_TRUE(v == 0 || std::fabs(v - 2.0) < 1e-9) << v;  // 1 / (1 - rate)
    for (int e = 1; e < 24; ++e) EXPECT_EQ(out[n * 24 + e], v) << "example " << n << " element " << e;
    kept += v != 0;
  }
  EXPECT_GT(kept, 8);   // P(<= 8 of 64 at p = 0.5) < 1e-9
  EXPECT_LT(kept, 56);
  // Inference: the identity.
  graph::Graph g2;
  Value x2 = g2.Input("x", DType::kF32, {4, 3, 2, 4});
  BuildContext infer{.graph = &g2, .training = false};
  auto y2 = drop->Call(infer, {x2});
  ASSERT_TRUE(y2.ok());
  EXPECT_EQ(g2.node(y2->node).kind, graph::OpKind::kIdentity);
  // A noise shape that fits nothing is an error naming the layer.
  LayerPtr wrong = Dropout(0.5f, DropoutOptions{.noise_shape = {0, 2, 1, 1}, .name = "wrong"});
  auto e = wrong->Call(ctx, {x});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("wrong (Dropout): noise_shape entry 1 is 2"), std::string::npos)
      << e.status().ToString();
}

// ConvNeXt's layers (issue 45): Dense on a 4-D map (a 1x1 convolution by its kernel), LayerScale
// (x * gamma along the last axis) and StochasticDepth (one draw per example in training, the
// identity at inference), their values, counts and JSON classes.
TEST(ApplicationLayers, DenseOnAnyRankAndConvNeXtsLayerScale) {
  auto m = Build({2, 3, 4}, {Dense(5, {.name = "pointwise"}), LayerScale(0.5f, 5, "scale")});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->count_params(), 4 * 5 + 5 + 5);  // kernel [4, 5], bias, gamma
  EXPECT_EQ(m->output_shape().value(), (Shape{2, 3, 5}));
  ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.01), .loss = losses::MeanSquaredError()}).ok());
  std::map<std::string, Tensor> w;
  for (const auto& e : m->variables()->entries()) w[e.name] = *m->variables()->Value(e.name);
  for (int i = 0; i < 5; ++i) w["scale/gamma"].data<float>()[i] = 0.5f + static_cast<float>(i);
  for (int i = 0; i < 5; ++i) w["pointwise/bias"].data<float>()[i] = 0.1f * static_cast<float>(i);
  Tensor x = Filled({3, 2, 3, 4}, [](int64_t i) { return std::sin(0.3f * static_cast<float>(i)); });
  auto p = m->predict(data::Dataset::from_tensor_slices(data::Element({x})).batch(3));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const Tensor& y = *p;
  ASSERT_EQ(y.shape(), Shape({3, 2, 3, 5}));
  const float* k = w["pointwise/kernel"].data<float>();
  for (int64_t row = 0; row < 3 * 2 * 3; ++row)
    for (int u = 0; u < 5; ++u) {
      double want = 0.1 * u;
      for (int f = 0; f < 4; ++f) want += x.data<float>()[row * 4 + f] * k[f * 5 + u];
      EXPECT_NEAR(y.data<float>()[row * 5 + u], want * (0.5 + u), 1e-5) << row << " " << u;
    }
  auto bad = Sequential({InputLayer({3, 4}), LayerScale(1e-6f, 3, "ls")}, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ls (LayerScale): projection_dim 3 does not match"), std::string::npos)
      << bad.status().ToString();
  auto flat = Sequential({InputLayer({}), Dense(2, {.name = "d"})}, "flat");
  ASSERT_FALSE(flat.ok());
  // The JSON classes (Keras's ConvNeXt custom objects).
  for (const char* cls : {"LayerScale", "StochasticDepth"}) EXPECT_NE(FindLayerClass(cls), nullptr) << cls;
}

TEST(ApplicationLayers, StochasticDepthDropsWholeExamplesInTraining) {
  graph::Graph g;
  Value x = g.Input("x", DType::kF32, {64, 2, 3, 4});
  BuildContext ctx{.graph = &g, .training = true, .seed = 9};
  LayerPtr sd = StochasticDepth(0.25f, "drop_path");
  auto y = sd->Call(ctx, {x});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  backend::reference::Evaluator ev(g, {*y});
  std::map<int, std::vector<double>> leaves;
  leaves[x.node] = std::vector<double>(64 * 24, 1.0);
  ASSERT_TRUE(ev.Run(leaves, 1).ok());
  const std::vector<double>& out = ev.value(*y);
  int kept = 0;
  for (int n = 0; n < 64; ++n) {
    const double v = out[n * 24];
    EXPECT_TRUE(v == 0 || std::fabs(v - 1 / 0.75) < 1e-6) << v;
    for (int e = 1; e < 24; ++e) EXPECT_EQ(out[n * 24 + e], v) << "example " << n << " element " << e;
    kept += v != 0;
  }
  EXPECT_GT(kept, 32);  // 48 expected; P(<= 32 of 64 at p = 0.75) < 1e-5
  EXPECT_LT(kept, 64);  // P(all 64 kept) = 1e-8
  graph::Graph g2;
  Value x2 = g2.Input("x", DType::kF32, {4, 3});
  BuildContext infer{.graph = &g2, .training = false};
  auto y2 = sd->Call(infer, {x2});
  ASSERT_TRUE(y2.ok());
  EXPECT_EQ(g2.node(y2->node).kind, graph::OpKind::kIdentity);
  auto wrong = StochasticDepth(1.0f, "all")->Call(ctx, {x});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("all (StochasticDepth): drop_path_rate"), std::string::npos);
}

// The building blocks of MobileNetV2 / EfficientNet / Xception in one small net: EfficientNet's
// stem normalization, correct_pad,
// a stride-2 depthwise convolution with a multiplier (valid, then same), relu6, swish, the
// Inception family's factorized convolutions and scaled residual, NASNet's pad-and-crop,
// squeeze-and-excitation, drop-connect.
std::unique_ptr<Model> Blocks() {
  KTensor in = Input({9, 9, 3});
  KTensor x = Call(Rescaling(0.5f), in);  // EfficientNet's stem: Rescaling, then Normalization
  x = Call(Normalization(NormalizationOptions{.mean = {0.1f, 0.2f, 0.3f}, .variance = {0.5f, 1, 2}}), x);
  x = Call(ZeroPadding2D(ZeroPadding2DOptions{.top = 0, .bottom = 1, .left = 0, .right = 1}), x);
  x = Call(DepthwiseConv2D(3, {.strides = 2, .padding = "valid", .depth_multiplier = 2, .use_bias = false}), x);
  x = Call(BatchNormalization({.epsilon = 1.001e-5f}), x);
  x = Call(ReLU(ReLUOptions{.max_value = 6}), x);
  x = Call(DepthwiseConv2D(3, {.strides = 2, .padding = "same", .depth_multiplier = 2}), x);
  x = Call(Activation("swish"), x);
  // InceptionResNetV2's scaled residual of 1x3 / 3x1 convolutions (batch norm without gamma),
  // NASNet's one-pixel shift.
  KTensor r = Call(Conv2D(12, {1, 3}, {.padding = "same", .use_bias = false}), x);
  r = Call(BatchNormalization({.scale = false}), r);
  r = Call(Conv2D(12, {3, 1}, {.padding = "same"}), r);
  x = Call(CustomScaleLayer(0.5f), {x, r});
  x = Call(Cropping2D({.top = 1, .left = 1}), Call(ZeroPadding2D(ZeroPadding2DOptions{.top = 0, .bottom = 1, .left = 0, .right = 1}), x));
  KTensor se = Call(Reshape({1, 1, 12}), Call(GlobalAveragePooling2D(), x));
  se = Call(Conv2D(12, 1, {.activation = "sigmoid"}), se);
  x = Call(Multiply(), {x, se});
  x = Call(Dropout(0.2f, DropoutOptions{.noise_shape = {0, 1, 1, 1}}), x);
  auto m = Model::Functional({in}, {Call(Dense(3), Call(GlobalAveragePooling2D(), x))}, "blocks");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Class c: channel c brighter.
data::Dataset BlocksData() {
  const int64_t n = 96;
  Tensor x(DType::kF32, {n, 9, 9, 3}), y(DType::kI64, {n});
  std::mt19937_64 rng(3);
  std::normal_distribution<float> noise(0, 0.3f);
  for (int64_t i = 0; i < n; ++i) {
    y.data<int64_t>()[i] = i % 3;
    for (int64_t p = 0; p < 81 * 3; ++p) x.data<float>()[i * 243 + p] = (p % 3 == i % 3 ? 1.0f : 0.0f) + noise(rng);
  }
  return data::Dataset::from_tensor_slices(data::Element({x, y})).batch(16, {.drop_remainder = true});
}

void ExpectBlocksTrain(const std::string& precision) {
  auto m = Blocks();
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9}),
                          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                          .precision = precision})
                  .ok());
  auto h = m->fit(BlocksData(), {.epochs = 6, .verbose = 0});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  for (double l : h->history["loss"]) EXPECT_TRUE(std::isfinite(l)) << precision;
  EXPECT_LT(h->history["loss"].back(), 0.8 * h->history["loss"].front())
      << precision << ": " << h->history["loss"].front() << " -> " << h->history["loss"].back();
}

TEST(ApplicationLayers, StridedDepthwiseWithMultiplierAndSqueezeExcitationTrain) {
  // Forward and backward of every new piece, trained by fit on the cpu backend.
  auto m = Blocks();
  ASSERT_NE(m, nullptr);
  // normalization (a given mean and variance: none) + depthwise 3*3*6 (no bias) + BN 4*6 + depthwise 3*3*12 + 12 + 1x3 conv
  // 3*12*12 + BN without gamma 3*12 + 3x1 conv 3*12*12 + 12 + SE conv 12*12 + 12 + dense 12*3 + 3.
  EXPECT_EQ(m->count_params(), 54 + 24 + 108 + 12 + 432 + 36 + 444 + 156 + 39);
  const std::string s = m->Summary();
  EXPECT_NE(s.find("(None, 10, 10, 3)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 4, 4, 6)"), std::string::npos) << s;  // (10 - 3) / 2 + 1
  EXPECT_NE(s.find("(None, 2, 2, 12)"), std::string::npos) << s;
  ExpectBlocksTrain("float32");
}

TEST(ApplicationLayers, BlocksTrainInMixedBfloat16) {
  // The composites (broadcast, zero constants, clipped relus) on the bf16 compile.
  if (!testing::Bf16MustRun()) {
    auto m = Blocks();
    ASSERT_NE(m, nullptr);
    Status st = m->compile({.optimizer = optimizers::SGD(0.05),
                            .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                            .precision = "mixed_bfloat16"});
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
    return;
  }
  ExpectBlocksTrain("mixed_bfloat16");
}

TEST(ApplicationLayers, SpecClassesZeroPaddingReLUMultiplyNormalizationDropout) {
  auto m = ModelFromJson(R"({"class_name": "Functional", "config": {"name": "spec", "layers": [
    {"class_name": "InputLayer", "name": "in", "config": {"batch_input_shape": [null, 6, 6, 3], "name": "in"},
     "inbound_nodes": []},
    {"class_name": "Normalization", "name": "norm", "config": {"axis": -1, "mean": [0.5, 0.5, 0.5],
     "variance": [0.25, 0.25, 0.25], "name": "norm"}, "inbound_nodes": [[["in", 0, 0, {}]]]},
    {"class_name": "ZeroPadding2D", "name": "pad_int", "config": {"padding": 1, "name": "pad_int"},
     "inbound_nodes": [[["norm", 0, 0, {}]]]},
    {"class_name": "ZeroPadding2D", "name": "pad_pair", "config": {"padding": [2, 0], "name": "pad_pair"},
     "inbound_nodes": [[["pad_int", 0, 0, {}]]]},
    {"class_name": "ZeroPadding2D", "name": "pad_full", "config": {"padding": [[0, 1], [0, 1]], "name": "pad_full"},
     "inbound_nodes": [[["pad_pair", 0, 0, {}]]]},
    {"class_name": "ReLU", "name": "relu6", "config": {"max_value": 6.0, "negative_slope": 0.0, "threshold": 0.0,
     "name": "relu6"}, "inbound_nodes": [[["pad_full", 0, 0, {}]]]},
    {"class_name": "GlobalAveragePooling2D", "name": "gap", "config": {"name": "gap"},
     "inbound_nodes": [[["relu6", 0, 0, {}]]]},
    {"class_name": "Reshape", "name": "se", "config": {"target_shape": [1, 1, 3], "name": "se"},
     "inbound_nodes": [[["gap", 0, 0, {}]]]},
    {"class_name": "Multiply", "name": "mul", "config": {"name": "mul"},
     "inbound_nodes": [[["relu6", 0, 0, {}], ["se", 0, 0, {}]]]},
    {"class_name": "Dropout", "name": "drop", "config": {"rate": 0.2, "noise_shape": [null, 1, 1, 1], "seed": null,
     "name": "drop"}, "inbound_nodes": [[["mul", 0, 0, {}]]]}],
    "input_layers": [["in", 0, 0]], "output_layers": [["drop", 0, 0]]}})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string s = (*m)->Summary();
  EXPECT_NE(s.find("(None, 8, 8, 3)"), std::string::npos) << s;    // 6 + 1 + 1
  EXPECT_NE(s.find("(None, 12, 8, 3)"), std::string::npos) << s;   // rows + 2 + 2
  EXPECT_NE(s.find("(None, 13, 9, 3)"), std::string::npos) << s;   // + 1 bottom, + 1 right
  EXPECT_NE(s.find("mul (Multiply)"), std::string::npos) << s;
  EXPECT_EQ((*m)->count_params(), 0);  // the Normalization's given mean and variance are constants, as Keras's
  // relu6 really clips: inputs of 10 (normalized: 19) come out as 6, times their pooled mean 6 * 36 / 117.
  Tensor x = Filled({1, 6, 6, 3}, [](int64_t) { return 10.0f; });
  Tensor y = Predict(**m, x);
  ASSERT_EQ(y.shape(), Shape({1, 13, 9, 3}));
  const float pooled = 6.0f * 36 / (13 * 9);
  EXPECT_NEAR(y.data<float>()[((0 * 13 + 5) * 9 + 4) * 3], 6.0f * pooled, 1e-4);
  EXPECT_EQ(y.data<float>()[0], 0.0f);

  auto bad = ModelFromJson(R"({"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4, 4, 1]}},
    {"class_name": "ZeroPadding2D", "config": {"name": "zp", "padding": [1, 2, 3]}}]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("zp (ZeroPadding2D): padding must be"), std::string::npos)
      << bad.status().ToString();
  auto bad_noise = ModelFromJson(R"({"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
    {"class_name": "Dropout", "config": {"name": "d", "rate": 0.5, "noise_shape": "x"}}]}})");
  ASSERT_FALSE(bad_noise.ok());
  EXPECT_NE(bad_noise.status().message().find("d (Dropout): noise_shape"), std::string::npos)
      << bad_noise.status().ToString();
}

// EfficientNet's initializers: VarianceScaling(2.0, fan_out, truncated normal) for convolutions,
// VarianceScaling(1/3, fan_out, uniform) for the classifier, with Keras's fans.
TEST(ApplicationLayers, VarianceScalingInitializersUseKerasFans) {
  auto m = ModelFromJson(R"({"class_name": "Sequential", "config": {"name": "vs", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8, 8, 16]}},
    {"class_name": "Conv2D", "config": {"name": "conv", "filters": 64, "kernel_size": 3, "use_bias": false,
     "kernel_initializer": {"class_name": "VarianceScaling",
                            "config": {"scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal"}}}},
    {"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 5, "depth_multiplier": 2,
     "use_bias": false, "depthwise_initializer": {"class_name": "VarianceScaling",
                            "config": {"scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal"}}}},
    {"class_name": "GlobalAveragePooling2D", "config": {"name": "gap"}},
    {"class_name": "Dense", "config": {"name": "dense", "units": 1000, "kernel_initializer":
     {"class_name": "VarianceScaling", "config": {"scale": 0.3333333333, "mode": "fan_out",
                                                    "distribution": "uniform"}}}}]}})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE((*m)->compile({.optimizer = optimizers::SGD(0.01), .loss = losses::MeanSquaredError()}).ok());
  ASSERT_NE((*m)->variables(), nullptr);  // the weights exist once compiled
  auto stats = [&](const std::string& name, double* sd, double* max_abs) {
    auto t = (*m)->variables()->Value(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    double s2 = 0;
    *max_abs = 0;
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      const double v = t->data<float>()[i];
      s2 += v * v;
      *max_abs = std::max(*max_abs, std::fabs(v));
    }
    *sd = std::sqrt(s2 / static_cast<double>(t->num_elements()));
  };
  double sd, max_abs;
  // conv: fan_out 3*3*64; the truncated normal's own deviation is sqrt(2 / fan_out).
  stats("conv/kernel", &sd, &max_abs);
  EXPECT_NEAR(sd, std::sqrt(2.0 / 576), 0.05 * std::sqrt(2.0 / 576));
  EXPECT_LE(max_abs, 2 * std::sqrt(2.0 / 576) / 0.87962566103423978 + 1e-6);
  // depthwise: Keras's kernel is [5, 5, C, 2], fan_out 5*5*2 (not 5*5*C*2).
  stats("dw/depthwise_kernel", &sd, &max_abs);
  EXPECT_NEAR(sd, std::sqrt(2.0 / 50), 0.1 * std::sqrt(2.0 / 50));
  // dense: uniform with limit sqrt(3 * (1/3) / 1000); its deviation limit / sqrt(3).
  stats("dense/kernel", &sd, &max_abs);
  const double limit = std::sqrt(1.0 / 1000);
  EXPECT_LE(max_abs, limit + 1e-7);
  EXPECT_GT(max_abs, 0.99 * limit);
  EXPECT_NEAR(sd, limit / std::sqrt(3.0), 0.03 * limit);
  auto bad = Sequential({InputLayer({4}), Dense(2, {.kernel_initializer = "variance_scaling(mode=fan_sideways)",
                                                     .name = "d"})}, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fan_sideways"), std::string::npos) << bad.status().ToString();
}

TEST(ApplicationLayers, BatchNormalizationKeepsEpsilon1001e5) {
  // ResNet50's and DenseNet121's batch norms: epsilon 1.001e-5 reaches the graph op.
  graph::Graph g;
  Value x = g.Input("x", DType::kF32, {2, 3, 3, 4});
  BuildContext ctx{.graph = &g, .training = false};
  LayerPtr bn = BatchNormalization({.epsilon = 1.001e-5f, .name = "bn"});
  auto y = bn->Call(ctx, {x});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(g.node(y->node).attrs.bn.epsilon, 1.001e-5f);
}

}  // namespace
}  // namespace strata::keras
