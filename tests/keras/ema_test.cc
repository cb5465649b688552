// Keras's use_ema (weight averaging) over the sharded update: the average follows Keras's rule
// on every replica count, fit leaves the model at the average, the average is saved and
// restored with the optimizer's other slots, and a variable that becomes trainable starts its
// average at its weights.
#include <gtest/gtest.h>

#include <filesystem>

#include "blobs.h"
#include "strata/keras/model.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT
using testing::Blobs;

std::unique_ptr<Model> Wide(const std::string& name = "wide") {  // 483 parameters: every replica gets a slice
  auto m = Sequential({InputLayer({8}), Dense(40, {.activation = "relu"}), Dense(3)}, name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

Optimizer Averaging(double momentum, int64_t overwrite = 0) {
  return optimizers::SGD(0.1, {.momentum = 0.9, .nesterov = true, .use_ema = true, .ema_momentum = momentum,
                               .ema_overwrite_frequency = overwrite});
}

CompileOptions Options(Optimizer o, distribute::Strategy* strategy = nullptr) {
  return {.optimizer = std::move(o), .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
          .strategy = strategy};
}

// get_state() is [parameters | slot blocks]: Averaging's SGD keeps two, the velocity and, last,
// the average.
std::vector<float> Params(const Model& m) {
  auto s = *m.get_state();
  return {s.begin(), s.end() - 2 * m.variables()->num_trainable()};
}
std::vector<float> Average(const Model& m) {
  auto s = *m.get_state();
  const int64_t n = m.variables()->num_trainable();
  return {s.end() - n, s.end()};
}

TEST(Ema, TheAverageFollowsKerasRuleOnEveryReplicaCount) {
  const double mom = 0.8;
  for (int replicas : {1, 2, 4}) {
    auto strategy = distribute::MirroredStrategy(replicas);
    ASSERT_TRUE(strategy.ok());
    auto m = Wide();
    ASSERT_TRUE(m->compile(Options(Averaging(mom), strategy->get())).ok());
    const int64_t n = m->variables()->num_trainable();
    // Keras: m = 0 on the first update (the average starts at the weights), then
    // average = m average + (1 - m) w after each update.
    std::vector<double> want(static_cast<size_t>(n), 0.0);
    for (int step = 0; step < 4; ++step) {
      ASSERT_TRUE(m->train_on_batch({Blobs(32, 10 + step)[0]}, Blobs(32, 10 + step)[1]).ok());
      const std::vector<float> w = Params(*m);
      const double k = step == 0 ? 0.0 : mom;
      for (int64_t i = 0; i < n; ++i) want[i] = k * want[i] + (1 - k) * w[i];
    }
    const std::vector<float> got = Average(*m);
    ASSERT_EQ(got.size(), want.size());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << replicas << " replicas, value " << i;
    // train_on_batch leaves the weights being trained: they are not the average.
    const std::vector<float> w = Params(*m);
    EXPECT_NE(std::vector<float>(w.begin(), w.begin() + n), got);
  }
}

TEST(Ema, FitEndsAtTheAverageAndOverwritesEveryNSteps) {
  auto train = data::Dataset::from_tensor_slices(Blobs(192, 4)).batch(32, {.drop_remainder = true});  // 6 steps
  auto m = Wide();
  ASSERT_TRUE(m->compile(Options(Averaging(0.9))).ok());
  ASSERT_TRUE(m->fit(train, {.epochs = 2, .verbose = 0}).ok());
  const int64_t n = m->variables()->num_trainable();
  const std::vector<float> p = Params(*m);
  EXPECT_EQ(std::vector<float>(p.begin(), p.begin() + n), Average(*m));  // Keras's finalize_variable_values

  // ema_overwrite_frequency 3: after updates 3, 6, ... the weights are the average (and after
  // the first, where the average starts at the weights).
  auto o = Wide("overwritten");
  ASSERT_TRUE(o->compile(Options(Averaging(0.9, 3))).ok());
  for (int step = 1; step <= 4; ++step) {
    ASSERT_TRUE(o->train_on_batch({Blobs(32, step)[0]}, Blobs(32, step)[1]).ok());
    const std::vector<float> w = Params(*o);
    const bool same = std::vector<float>(w.begin(), w.begin() + n) == Average(*o);
    EXPECT_EQ(same, step == 1 || step == 3) << "after update " << step;
  }
}

TEST(Ema, TheAverageIsSavedAndRestored) {
  auto dir = test::FreshTempDir("strata-keras-ema");
  auto step = [](Model& m, int k) { return m.train_on_batch({Blobs(32, 20 + k)[0]}, Blobs(32, 20 + k)[1]); };

  auto straight = Wide();
  ASSERT_TRUE(straight->compile(Options(Averaging(0.9))).ok());
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(step(*straight, k).ok());

  auto first = Wide();
  ASSERT_TRUE(first->compile(Options(Averaging(0.9))).ok());
  for (int k = 0; k < 2; ++k) ASSERT_TRUE(step(*first, k).ok());
  ASSERT_TRUE(first->save_weights((dir / "w.ckpt").string()).ok());
  auto second = Wide();
  ASSERT_TRUE(second->compile(Options(Averaging(0.9))).ok());
  ASSERT_TRUE(second->load_weights((dir / "w.ckpt").string()).ok());
  EXPECT_EQ(*second->get_state(), *first->get_state());  // the average came back with the weights
  for (int k = 2; k < 4; ++k) ASSERT_TRUE(step(*second, k).ok());
  EXPECT_EQ(*second->get_state(), *straight->get_state());  // bitwise: the average went on, not restarted

  // An optimizer without the average cannot take this file's slots, and says so.
  auto plain = Wide();
  ASSERT_TRUE(plain->compile(Options(optimizers::SGD(0.1, {.momentum = 0.9, .nesterov = true}))).ok());
  Status s = plain->load_weights((dir / "w.ckpt").string());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("w.ckpt"), std::string::npos) << s.ToString();
}

TEST(Ema, AVariableThatBecomesTrainableStartsItsAverageAtItsWeights) {
  auto dir = test::FreshTempDir("strata-keras-ema-freeze");
  auto frozen = Wide();
  ASSERT_TRUE(frozen->freeze_until("dense").ok());  // the first Dense frozen: only dense_1 trains
  ASSERT_TRUE(frozen->compile(Options(Averaging(0.9))).ok());
  ASSERT_TRUE(frozen->train_on_batch({Blobs(32, 1)[0]}, Blobs(32, 1)[1]).ok());
  ASSERT_TRUE(frozen->save_weights((dir / "w.ckpt").string()).ok());

  auto all = Wide();
  ASSERT_TRUE(all->compile(Options(Averaging(0.9))).ok());
  ASSERT_TRUE(all->load_weights((dir / "w.ckpt").string()).ok());
  const std::vector<float> p = Params(*all), avg = Average(*all);
  for (const auto& e : all->variables()->entries()) {
    if (!e.trainable || e.role != graph::VariableRole::kParameter) continue;
    for (int64_t i = 0; i < e.size; ++i) {
      // dense/*: trainable only now, so its average is its weights; dense_1/*: the file's average,
      // which after one update is the weights too.
      ASSERT_EQ(avg[e.offset + i], p[e.offset + i]) << e.name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace strata::keras
