// Model::predict and evaluate over replicas: the evaluation program runs once per local
// replica, each on its share of the batch (as fit's step), and always reads the model's
// current weights (after fit, load_weights, a recompile after set_trainable).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "strata/distribute/strategy.h"
#include "strata/keras/model.h"
#include "common/small_cnn.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT

using test_models::SmallCnn;
data::Element Images(int64_t n, uint64_t seed) { return test_models::SmallCnnImages(n, seed); }

CompileOptions Options(distribute::Strategy* strategy) {
  return {.optimizer = optimizers::SGD(0.2, {.momentum = 0.9}),
          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
          .metrics = {"accuracy"},
          .strategy = strategy};
}

std::vector<float> Predict(Model& m, const data::Element& images, int64_t batch) {
  auto p = m.predict(data::Dataset::from_tensor_slices(images).batch(batch));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return {};
  EXPECT_EQ(p->shape(), Shape({images[0].shape()[0], 3}));
  return std::vector<float>(p->data<float>(), p->data<float>() + p->num_elements());
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

// Every parameter and statistic of `from` into `to`, by name (the two may order them
// differently: trainable first).
void CopyWeights(Model& from, Model& to) {
  for (const backend::VariableStore::Entry& e : from.variables()->entries()) {
    const backend::VariableStore::Entry* t = to.variables()->Find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    ASSERT_EQ(t->size, e.size) << e.name;
    std::memcpy(to.variables()->params().data<float>() + t->offset,
                from.variables()->params().data<float>() + e.offset, static_cast<size_t>(e.size) * sizeof(float));
  }
}

// What one program on the calling thread predicts with `m`'s current weights.
std::vector<float> Reference(Model& m, const data::Element& images) {
  auto ref = SmallCnn();
  EXPECT_TRUE(ref->compile(Options(nullptr)).ok());
  CopyWeights(m, *ref);
  return Predict(*ref, images, images[0].shape()[0]);
}

TEST(Predict, ReplicasSplitTheBatchAndMatchOneProgram) {
  auto strategy = distribute::MirroredStrategy(2);
  ASSERT_TRUE(strategy.ok()) << strategy.status().ToString();
  auto one = SmallCnn(), two = SmallCnn();
  ASSERT_TRUE(one->compile(Options(nullptr)).ok());
  ASSERT_TRUE(two->compile(Options(strategy->get())).ok());
  // Trained moving statistics, so inference batch norm is not the identity.
  auto train = data::Dataset::from_tensor_slices(Images(64, 1)).batch(16, {.drop_remainder = true});
  ASSERT_TRUE(one->fit(train, {.epochs = 1, .verbose = 0}).ok());
  CopyWeights(*one, *two);
  const data::Element images = Images(11, 2);
  const std::vector<float> expected = Predict(*one, images, 11);
  // 11 rows as 4 + 4 + 3 (2 + 2 rows per replica, the last batch 2 + 1 and padded), then, on the
  // programs compiled for 4, as 3 + 3 + 3 + 2 and as 1 + ... + 1 (replica 1 gets no rows), then
  // all at once (recompiled for 11: 6 + 5).
  for (int64_t batch : {4, 3, 1, 11}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    EXPECT_LT(MaxAbsDiff(Predict(*two, images, batch), expected), 1e-5);
  }
  // evaluate gathers both halves before the loss and the metrics.
  auto ds = data::Dataset::from_tensor_slices(images).batch(4);
  auto a = one->evaluate(ds), b = two->evaluate(ds);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(LogValue(*a, "loss"), LogValue(*b, "loss"), 1e-5);
  EXPECT_DOUBLE_EQ(LogValue(*a, "accuracy"), LogValue(*b, "accuracy"));
}

TEST(Predict, SeesTheWeightsAfterFitLoadWeightsAndSetTrainable) {
  const auto dir = test::FreshTempDir("strata-predict-weights");
  auto strategy = distribute::MirroredStrategy(2);
  ASSERT_TRUE(strategy.ok()) << strategy.status().ToString();
  auto m = SmallCnn();
  ASSERT_TRUE(m->compile(Options(strategy->get())).ok());
  const data::Element images = Images(10, 3);
  auto train = data::Dataset::from_tensor_slices(Images(64, 4)).batch(16, {.drop_remainder = true});

  const std::vector<float> initial = Predict(*m, images, 4);
  EXPECT_LT(MaxAbsDiff(initial, Reference(*m, images)), 1e-5);
  ASSERT_TRUE(m->save_weights((dir / "initial.ckpt").string()).ok());

  // After fit: the trained weights and moving statistics, not the ones of the first predict.
  ASSERT_TRUE(m->fit(train, {.epochs = 1, .verbose = 0}).ok());
  const std::vector<float> trained = Predict(*m, images, 4);
  EXPECT_GT(MaxAbsDiff(trained, initial), 1e-3);
  EXPECT_LT(MaxAbsDiff(trained, Reference(*m, images)), 1e-5);

  // After load_weights: the loaded ones.
  ASSERT_TRUE(m->load_weights((dir / "initial.ckpt").string()).ok());
  EXPECT_LT(MaxAbsDiff(Predict(*m, images, 4), initial), 1e-6);

  // After set_trainable(false) and the recompile: the same weights (the recompile keeps them);
  // unfrozen again, fit's new weights show.
  m->set_trainable(false);
  ASSERT_TRUE(m->compile(Options(strategy->get())).ok());
  EXPECT_LT(MaxAbsDiff(Predict(*m, images, 4), initial), 1e-6);
  m->set_trainable(true);
  ASSERT_TRUE(m->compile(Options(strategy->get())).ok());
  ASSERT_TRUE(m->fit(train, {.epochs = 1, .verbose = 0}).ok());
  const std::vector<float> retrained = Predict(*m, images, 4);
  EXPECT_GT(MaxAbsDiff(retrained, initial), 1e-3);
  EXPECT_LT(MaxAbsDiff(retrained, Reference(*m, images)), 1e-5);
  std::filesystem::remove_all(dir);
}

// conv (bias) -> bn -> relu, conv (no bias) -> bn, depthwise (no bias) -> bn -> relu6, and a
// batch norm after a ReLU (nothing to fold into): each kind the applications have.
std::unique_ptr<Model> FoldableCnn() {
  auto m = Sequential({InputLayer({6, 6, 2}), Conv2D(4, 3, {.padding = "same", .name = "conv1"}),
                       BatchNormalization({.name = "bn1"}), ReLU("relu1"),
                       Conv2D(6, 1, {.use_bias = false, .name = "conv2"}), BatchNormalization({.name = "bn2"}),
                       DepthwiseConv2D(3, {.padding = "same", .depth_multiplier = 2, .use_bias = false, .name = "dw"}),
                       BatchNormalization({.name = "bn3"}), ReLU({.max_value = 6.0f, .name = "relu3"}),
                       BatchNormalization({.name = "bn4"}), GlobalAveragePooling2D("gap"), Dense(3, {.name = "head"})},
                      "foldable_cnn");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

int CountKernels(backend::Program* p, const std::string& op) {
  int n = 0;
  for (const backend::KernelInfo& k : p->kernels()) n += k.op == op;
  return n;
}

TEST(Predict, BatchNormFoldedIntoConvolutionsMatchesTheUnfoldedProgram) {
  auto folded = FoldableCnn(), unfolded = FoldableCnn();
  CompileOptions o = Options(nullptr);
  ASSERT_TRUE(folded->compile(o).ok());
  o.fold_batch_norm = false;
  ASSERT_TRUE(unfolded->compile(o).ok());
  // Trained gammas, betas and moving statistics far from 1 and 0.
  auto train = data::Dataset::from_tensor_slices(Images(64, 5)).batch(16, {.drop_remainder = true});
  ASSERT_TRUE(folded->fit(train, {.epochs = 2, .verbose = 0}).ok());
  CopyWeights(*folded, *unfolded);
  const data::Element images = Images(9, 6);
  const std::vector<float> a = Predict(*folded, images, 9), b = Predict(*unfolded, images, 9);
  double scale = 0;
  for (float v : b) scale = std::max(scale, std::fabs(double(v)));
  ASSERT_GT(scale, 0);
  EXPECT_LT(MaxAbsDiff(a, b), 1e-5 * scale);
  // bn1..bn3 follow convolutions and fold; bn4 follows a ReLU and stays.
  EXPECT_EQ(CountKernels(unfolded->eval_program(), "bn_inference"), 4);
  EXPECT_EQ(CountKernels(folded->eval_program(), "bn_inference"), 1 + 2 * 3);  // bn4, and w' and b' of each fold
  // The folded kernel is recomputed at every run: new weights show at once.
  ASSERT_TRUE(folded->fit(train, {.epochs = 1, .verbose = 0}).ok());
  CopyWeights(*folded, *unfolded);
  const std::vector<float> c = Predict(*folded, images, 9);
  EXPECT_GT(MaxAbsDiff(c, a), 1e-4 * scale);
  EXPECT_LT(MaxAbsDiff(c, Predict(*unfolded, images, 9)), 1e-5 * scale);
}

}  // namespace
}  // namespace strata::keras
