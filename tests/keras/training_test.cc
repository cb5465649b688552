// The compiled training step's remaining Keras pieces: gradient clipping by norm (clipnorm,
// global_clipnorm) over the sharded update, binary_crossentropy, and the custom-loop API
// (compute_gradients / apply_gradients) that reproduces fit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "blobs.h"
#include "strata/keras/model.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT

std::unique_ptr<Model> Build(std::vector<LayerPtr> l, const std::string& name) {
  auto m = Sequential(std::move(l), name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// Writes `values` into the variable `name` of a compiled model.
void SetVariable(Model& m, const std::string& name, const std::vector<float>& values) {
  auto v = m.variables()->Value(name);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->num_elements(), static_cast<int64_t>(values.size())) << name;
  for (size_t i = 0; i < values.size(); ++i) v->data<float>()[i] = values[i];
}

std::vector<float> Variable(Model& m, const std::string& name) {
  auto v = m.variables()->Value(name);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return std::vector<float>(v->data<float>(), v->data<float>() + v->num_elements());
}

using testing::Blobs;

// ---- gradient clipping by norm ------------------------------------------------------------

// One example x = [1, 2], target t = [3, 4], Dense(2) from zero weights, MSE, SGD(lr = 1):
// y = 0, dL/dy = y - t = [-3, -4], so dW = x^T dy = [[-3, -4], [-6, -8]] (norm sqrt 125) and
// db = [-3, -4] (norm 5); the global norm is sqrt 150. The new weights are minus the clipped
// gradients.
struct ClipCase {
  std::unique_ptr<Model> model;
  data::Element batch;
};
ClipCase MseCase(Optimizer opt) {
  ClipCase c;
  c.model = Build({InputLayer({2}), Dense(2, {.kernel_initializer = "zeros"})}, "clip");
  Status s = c.model->compile({.optimizer = opt, .loss = losses::MeanSquaredError()});
  EXPECT_TRUE(s.ok()) << s.ToString();
  Tensor x(DType::kF32, {1, 2}), t(DType::kF32, {1, 2});
  x.data<float>()[0] = 1, x.data<float>()[1] = 2;
  t.data<float>()[0] = 3, t.data<float>()[1] = 4;
  c.batch = data::Element({x, t});
  return c;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << what << "[" << i << "]";
}

TEST(Clipping, ClipnormScalesEachVariableToItsOwnNorm) {
  auto c = MseCase(optimizers::SGD(1.0, {.clipnorm = 2.5}));
  ASSERT_TRUE(c.model->train_on_batch({c.batch[0]}, c.batch[1]).ok());
  const double k = 2.5 / std::sqrt(125.0);  // the kernel's norm is over the limit
  ExpectNear(Variable(*c.model, "dense/kernel"), {3 * k, 4 * k, 6 * k, 8 * k}, "kernel");
  ExpectNear(Variable(*c.model, "dense/bias"), {1.5, 2.0}, "bias");  // 2.5 / 5
}

TEST(Clipping, ClipnormLeavesAVariableWithinTheLimitAlone) {
  auto c = MseCase(optimizers::SGD(1.0, {.clipnorm = 6}));  // bias norm 5 < 6 < kernel norm
  ASSERT_TRUE(c.model->train_on_batch({c.batch[0]}, c.batch[1]).ok());
  const double k = 6 / std::sqrt(125.0);
  ExpectNear(Variable(*c.model, "dense/kernel"), {3 * k, 4 * k, 6 * k, 8 * k}, "kernel");
  ExpectNear(Variable(*c.model, "dense/bias"), {3, 4}, "bias");
}

TEST(Clipping, GlobalClipnormScalesAllGradientsTogether) {
  auto c = MseCase(optimizers::SGD(1.0, {.global_clipnorm = 6}));
  ASSERT_TRUE(c.model->train_on_batch({c.batch[0]}, c.batch[1]).ok());
  const double k = 6 / std::sqrt(150.0);
  ExpectNear(Variable(*c.model, "dense/kernel"), {3 * k, 4 * k, 6 * k, 8 * k}, "kernel");
  ExpectNear(Variable(*c.model, "dense/bias"), {3 * k, 4 * k}, "bias");
}

TEST(Clipping, ClippingHappensBeforeWeightDecay) {
  // Starting from zero weights the decay term is 0 on the first step; on the second it
  // adds wd * w to the clipped gradient, not to the gradient before clipping.
  auto c = MseCase(optimizers::SGD(0.5, {.weight_decay = 0.1, .global_clipnorm = 1e-3}));
  ASSERT_TRUE(c.model->train_on_batch({c.batch[0]}, c.batch[1]).ok());
  std::vector<float> w1 = Variable(*c.model, "dense/bias");
  ASSERT_TRUE(c.model->compute_gradients(c.batch).ok());
  std::vector<float> g = std::vector<float>(c.model->gradients().data<float>(), c.model->gradients().data<float>() + 6);
  ASSERT_TRUE(c.model->apply_gradients().ok());
  double norm = 0;
  for (float v : g) norm += static_cast<double>(v) * v;
  norm = std::sqrt(norm);
  // Layout: kernel [4] then bias [2] (trainable variables in creation order).
  for (int j = 0; j < 2; ++j) {
    const double want = w1[j] - 0.5 * (g[4 + j] * 1e-3 / norm + 0.1 * w1[j]);
    EXPECT_NEAR(Variable(*c.model, "dense/bias")[j], want, 1e-7) << j;
  }
}

// Variables that straddle the replicas' slices: every replica count must clip each variable
// (or all of them) by the norm over the whole variable, as computed here from the raw
// gradients compute_gradients leaves in gradients().
TEST(Clipping, NormsSpanTheReplicasSlices) {
  for (bool global : {false, true}) {
    for (int replicas : {1, 2, 4}) {
      auto strategy = distribute::MirroredStrategy(replicas);
      ASSERT_TRUE(strategy.ok());
      auto m = Build({InputLayer({8}), Dense(40, {.activation = "relu"}), Dense(3)}, "wide");  // 483 parameters
      const double limit = 0.05;
      ASSERT_TRUE(m->compile({.optimizer = global ? optimizers::SGD(1.0, {.global_clipnorm = limit})
                                                  : optimizers::SGD(1.0, {.clipnorm = limit}),
                              .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                              .strategy = strategy->get()})
                      .ok());
      const std::vector<float> before = *m->get_state();
      ASSERT_TRUE(m->compute_gradients(Blobs(8, 11)).ok());
      const Tensor& g = m->gradients();
      const std::vector<float> raw(g.data<float>(), g.data<float>() + g.num_elements());
      ASSERT_TRUE(m->apply_gradients().ok());
      const std::vector<float> after = *m->get_state();

      std::vector<std::pair<int64_t, int64_t>> groups;
      if (global) groups.push_back({0, static_cast<int64_t>(raw.size())});
      for (const auto& e : m->variables()->entries())
        if (!global && e.trainable && e.role == graph::VariableRole::kParameter) groups.push_back({e.offset, e.offset + e.size});
      ASSERT_EQ(groups.size(), global ? 1u : 4u);
      for (auto [b, e] : groups) {
        double sq = 0;
        for (int64_t i = b; i < e; ++i) sq += static_cast<double>(raw[i]) * raw[i];
        const double scale = std::min(1.0, limit / std::sqrt(sq));
        EXPECT_LT(scale, 1.0) << "the case must clip";
        for (int64_t i = b; i < e; ++i)
          ASSERT_NEAR(after[i], before[i] - raw[i] * scale, 1e-7) << "replicas " << replicas << " value " << i;
      }
    }
  }
}

// A limit far above any norm changes nothing, to the bit, over a whole fit with replicas.
TEST(Clipping, AHugeLimitIsBitwiseIdenticalToNoClipping) {
  struct Limits {
    double clipnorm = 0, global_clipnorm = 0;
  };
  auto run = [](Limits o) {
    auto strategy = distribute::MirroredStrategy(2);
    EXPECT_TRUE(strategy.ok());
    auto m = Build({InputLayer({8}), Dense(40, {.activation = "relu"}), Dense(3)}, "wide");
    EXPECT_TRUE(m->compile({.optimizer = optimizers::SGD(0.1, {.momentum = 0.9,
                                                               .nesterov = true,
                                                               .weight_decay = 1e-3,
                                                               .clipnorm = o.clipnorm,
                                                               .global_clipnorm = o.global_clipnorm}),
                            .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                            .strategy = strategy->get()})
                    .ok());
    auto train = data::Dataset::from_tensor_slices(Blobs(256, 3)).batch(32, {.drop_remainder = true});
    auto h = m->fit(train, {.epochs = 2, .verbose = 0});
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return *m->get_state();
  };
  const std::vector<float> plain = run({});
  EXPECT_EQ(run({.clipnorm = 1e30}), plain);
  EXPECT_EQ(run({.global_clipnorm = 1e30}), plain);
  EXPECT_NE(run({.global_clipnorm = 1e-3}), plain);  // and a small one does change the run
}

TEST(Clipping, EveryOptimizerTakesTheLimits) {
  EXPECT_EQ(optimizers::SGD(0.1, {.clipnorm = 2}).clipnorm, 2);
  EXPECT_EQ(optimizers::Adam(0.1, {.global_clipnorm = 3}).global_clipnorm, 3);
  EXPECT_EQ(optimizers::RMSprop(0.1, {.clipnorm = 4}).clipnorm, 4);
  const Optimizer adamw = optimizers::AdamW(0.1, {.clipnorm = 5});
  EXPECT_EQ(adamw.clipnorm, 5);
  EXPECT_EQ(adamw.weight_decay, 0.004);  // Keras's default survives naming another field
  EXPECT_EQ(adamw.name(), "AdamW");
}

TEST(Clipping, CompileRejectsBothOrNegativeLimits) {
  auto m = Build({InputLayer({2}), Dense(2)}, "clip");
  Status both = m->compile({.optimizer = optimizers::Adam(0.1, {.clipnorm = 1, .global_clipnorm = 1})});
  EXPECT_FALSE(both.ok());
  EXPECT_NE(both.message().find("not both"), std::string::npos) << both.ToString();
  Status negative = m->compile({.optimizer = optimizers::RMSprop(0.1, {.clipnorm = -1})});
  EXPECT_FALSE(negative.ok());
  EXPECT_NE(negative.message().find("RMSprop"), std::string::npos) << negative.ToString();
}

// ---- binary_crossentropy ---------------------------------------------------------------------

// x [4, 2], 0/1 labels; weights w = [0.5, -1], b = 0.25 give logits z = x w + b.
const float kX[4][2] = {{1, 2}, {0.5f, -1}, {-2, 0}, {3, 1}};
const float kT[4] = {1, 0, 1, 0};
const float kW[2] = {0.5f, -1}, kB = 0.25f;

data::Element BinaryBatch(bool column) {
  Tensor x(DType::kF32, {4, 2});
  Tensor y = column ? Tensor(DType::kF32, {4, 1}) : Tensor(DType::kF32, {4});
  for (int i = 0; i < 4; ++i) {
    x.data<float>()[i * 2] = kX[i][0], x.data<float>()[i * 2 + 1] = kX[i][1];
    y.data<float>()[i] = kT[i];
  }
  return data::Element({x, y});
}

// Keras's formula by hand: mean over the batch of -t log p - (1 - t) log (1 - p), p = sigmoid(z).
double HandBce(double* dw0, double* dw1, double* db) {
  double loss = 0;
  *dw0 = *dw1 = *db = 0;
  for (int i = 0; i < 4; ++i) {
    const double z = kX[i][0] * kW[0] + kX[i][1] * kW[1] + kB;
    const double p = 1 / (1 + std::exp(-z));
    loss += -kT[i] * std::log(p) - (1 - kT[i]) * std::log(1 - p);
    *dw0 += (p - kT[i]) * kX[i][0] / 4;  // dL/dz = (p - t) / batch
    *dw1 += (p - kT[i]) * kX[i][1] / 4;
    *db += (p - kT[i]) / 4;
  }
  return loss / 4;
}

TEST(BinaryCrossentropy, FirstStepLossAndGradientsMatchKerasFormula) {
  for (bool from_logits : {false, true}) {
    for (bool column : {true, false}) {
      auto m = Build({InputLayer({2}), Dense(1, {.activation = from_logits ? "linear" : "sigmoid"})}, "logreg");
      ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.1),
                              .loss = losses::BinaryCrossentropy({.from_logits = from_logits}),
                              .metrics = {"accuracy"}})
                      .ok());
      SetVariable(*m, "dense/kernel", {kW[0], kW[1]});
      SetVariable(*m, "dense/bias", {kB});
      double dw0, dw1, db;
      const double want = HandBce(&dw0, &dw1, &db);
      auto tape = m->compute_gradients(BinaryBatch(column));
      ASSERT_TRUE(tape.ok()) << tape.status().ToString();
      EXPECT_NEAR(tape->loss, want, 1e-6) << "from_logits " << from_logits;
      auto dw = m->variables()->Gradient("dense/kernel");
      ASSERT_TRUE(dw.ok());
      EXPECT_NEAR(dw->data<float>()[0], dw0, 1e-6);
      EXPECT_NEAR(dw->data<float>()[1], dw1, 1e-6);
      EXPECT_NEAR(m->variables()->Gradient("dense/bias")->data<float>()[0], db, 1e-6);
      // The host formula of evaluate agrees with the compiled step.
      auto logs = m->evaluate(data::Dataset::from_tensor_slices(BinaryBatch(column)).batch(4));
      ASSERT_TRUE(logs.ok()) << logs.status().ToString();
      EXPECT_NEAR(LogValue(*logs, "loss"), want, 1e-6);
    }
  }
}

TEST(BinaryCrossentropy, ProbabilitiesAreClippedToEpsilonAsKerasDoes) {
  // One example with logit 30 and label 0: from probabilities Keras clips p to 1 - eps, so
  // the loss is -log(eps); from logits it is the exact 30 + log(1 + exp(-30)).
  for (bool from_logits : {false, true}) {
    auto m = Build({InputLayer({1}), Dense(1, {.activation = from_logits ? "linear" : "sigmoid"})}, "sure");
    ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.1), .loss = losses::BinaryCrossentropy({.from_logits = from_logits})}).ok());
    SetVariable(*m, "dense/kernel", {30});
    SetVariable(*m, "dense/bias", {0});
    Tensor x(DType::kF32, {1, 1}), y(DType::kF32, {1, 1});
    x.data<float>()[0] = 1, y.data<float>()[0] = 0;
    auto tape = m->compute_gradients(data::Element({x, y}));
    ASSERT_TRUE(tape.ok()) << tape.status().ToString();
    const double want = from_logits ? 30.0 : -std::log(static_cast<double>(kEps));
    EXPECT_NEAR(tape->loss, want, 2e-5 * want) << "from_logits " << from_logits;
    // Clipped: no gradient flows (clip_by_value's); from logits: sigmoid(30) - 0.
    EXPECT_NEAR(m->variables()->Gradient("dense/bias")->data<float>()[0], from_logits ? 1.0 : 0.0, 1e-6);
    auto logs = m->evaluate(data::Dataset::from_tensor_slices(data::Element({x, y})).batch(1));
    ASSERT_TRUE(logs.ok()) << logs.status().ToString();
    EXPECT_NEAR(LogValue(*logs, "loss"), want, 2e-5 * want);
  }
}

TEST(BinaryCrossentropy, FitLearnsABinaryProblem) {
  // Label: is x0 + x1 - x2 > 0, over 4 noisy features; 2 replicas.
  const int64_t n = 512;
  Tensor x(DType::kF32, {n, 4}), y(DType::kF32, {n, 1});
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    float* r = x.data<float>() + i * 4;
    for (int j = 0; j < 4; ++j) r[j] = normal(rng);
    y.data<float>()[i] = r[0] + r[1] - r[2] > 0 ? 1.0f : 0.0f;
  }
  auto strategy = distribute::MirroredStrategy(2);
  ASSERT_TRUE(strategy.ok());
  auto m = Build({InputLayer({4}), Dense(16, {.activation = "relu"}), Dense(1, {.activation = "sigmoid"})}, "binary");
  ASSERT_TRUE(m->compile({.optimizer = optimizers::Adam(0.02),
                          .loss = losses::BinaryCrossentropy(),
                          .metrics = {"accuracy"},
                          .strategy = strategy->get()})
                  .ok());
  auto train = data::Dataset::from_tensor_slices(data::Element({x, y})).batch(64, {.drop_remainder = true});
  auto h = m->fit(train, {.epochs = 8, .verbose = 0});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_LT(h->history["loss"].back(), 0.5 * h->history["loss"].front());
  EXPECT_GT(h->history["accuracy"].back(), 0.9);
  auto logs = m->evaluate(train);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_GT(LogValue(*logs, "accuracy"), 0.9);
}

TEST(BinaryCrossentropy, ErrorsNameTheProblem) {
  auto m = Build({InputLayer({2}), Dense(1)}, "nosigmoid");  // probabilities expected, none given
  Status s = m->compile({.loss = losses::BinaryCrossentropy()});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sigmoid"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("from_logits=true"), std::string::npos) << s.ToString();

  auto soft = Build({InputLayer({2}), Dense(1, {.activation = "sigmoid"})}, "soft");
  ASSERT_TRUE(soft->compile({.loss = losses::BinaryCrossentropy()}).ok());
  data::Element b = BinaryBatch(true);
  b.tensors[1].data<float>()[2] = 0.3f;
  auto tape = soft->compute_gradients(b);
  ASSERT_FALSE(tape.ok());
  EXPECT_NE(tape.status().message().find("example 2"), std::string::npos) << tape.status().ToString();
}

// ---- the custom training loop ------------------------------------------------------------------

// compute_gradients + apply_gradients + metric updates, batch by batch, is fit: the same
// weights, loss and accuracy to the bit (2 replicas, dropout and batch norm included).
TEST(CustomLoop, ReproducesFitBitwise) {
  auto make = [](distribute::Strategy* s) {
    auto m = Build({InputLayer({8}), Dense(16), BatchNormalization(), ReLU(), Dropout(0.2f), Dense(3)}, "loop");
    EXPECT_TRUE(m->compile({.optimizer = optimizers::SGD(schedules::CosineDecay(0.1, 12), {.momentum = 0.9, .nesterov = true,
                                                                                          .global_clipnorm = 1.0}),
                            .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                            .metrics = {"accuracy"},
                            .strategy = s})
                    .ok());
    return m;
  };
  auto strategy = distribute::MirroredStrategy(2);
  ASSERT_TRUE(strategy.ok());
  auto train = data::Dataset::from_tensor_slices(Blobs(192, 9)).batch(32, {.drop_remainder = true});

  auto reference = make(strategy->get());
  auto h = reference->fit(train, {.epochs = 2, .verbose = 0});
  ASSERT_TRUE(h.ok()) << h.status().ToString();

  auto m = make(strategy->get());
  auto accuracy = MakeMetric("accuracy", m->compile_options().loss);
  ASSERT_TRUE(accuracy.ok());
  Mean loss;
  for (int epoch = 0; epoch < 2; ++epoch) {
    loss.Reset();
    (*accuracy)->Reset();
    auto it = train.make_iterator();
    ASSERT_TRUE(it.ok());
    for (;;) {
      data::Element batch;
      bool end = false;
      ASSERT_TRUE((*it)->GetNext(&batch, &end).ok());
      if (end) break;
      auto tape = m->compute_gradients(batch);
      ASSERT_TRUE(tape.ok()) << tape.status().ToString();
      ASSERT_TRUE(m->apply_gradients().ok());
      loss.Update(tape->loss);
      for (const MetricBatch& b : tape->replicas) (*accuracy)->Update(b);
    }
  }
  EXPECT_EQ(m->global_step(), reference->global_step());
  EXPECT_EQ(*m->get_state(), *reference->get_state());
  EXPECT_EQ(loss.Result(), h->history["loss"].back());
  EXPECT_EQ((*accuracy)->Result(), h->history["accuracy"].back());
}

TEST(CustomLoop, ApplyGradientsNeedsComputeGradientsFirst) {
  auto m = Build({InputLayer({8}), Dense(3)}, "order");
  ASSERT_TRUE(m->compile({.loss = losses::SparseCategoricalCrossentropy({.from_logits = true})}).ok());
  Status s = m->apply_gradients();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("compute_gradients"), std::string::npos) << s.ToString();
  ASSERT_TRUE(m->compute_gradients(Blobs(4, 1)).ok());
  EXPECT_TRUE(m->apply_gradients().ok());
  EXPECT_FALSE(m->apply_gradients().ok());  // once per computed step
  EXPECT_EQ(m->global_step(), 1);
}

}  // namespace
}  // namespace strata::keras
