// Freezing and fine-tuning with Keras's semantics (issue 19): Layer::trainable,
// Model::set_trainable / freeze_until, a frozen BatchNormalization in inference mode, no
// gradient kernels for frozen layers, checkpoints that keep the frozen state, recompiling after
// unfreezing, and Keras .h5 through save_weights / load_weights.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "strata/keras/model.h"
#include "common/small_cnn.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT

using test_models::SmallCnn;
data::Element Images(int64_t n, uint64_t seed) { return test_models::SmallCnnImages(n, seed); }

CompileOptions Adam() {
  return {.optimizer = optimizers::Adam(0.01), .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})};
}

std::vector<float> Values(Model& m, const std::string& name) {
  const backend::VariableStore::Entry* e = m.variables()->Find(name);
  EXPECT_NE(e, nullptr) << name;
  if (e == nullptr) return {};
  const float* p = m.variables()->params().data<float>() + e->offset;
  return std::vector<float>(p, p + e->size);
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int CountKernels(Model& m, const std::string& op, const std::string& name_part = "") {
  int n = 0;
  for (const backend::KernelInfo& k : m.train_program()->kernels())
    n += k.op == op && k.name.find(name_part) != std::string::npos;
  return n;
}

const std::vector<std::string> kBackbone = {"conv1/kernel", "conv1/bias", "bn1/gamma", "bn1/beta", "bn1/moving_mean",
                                            "bn1/moving_variance", "conv2/kernel", "conv2/bias", "bn2/gamma", "bn2/beta",
                                            "bn2/moving_mean", "bn2/moving_variance"};

TEST(Freezing, FrozenBackboneKeepsItsWeightsBitForBitAndTakesNoSlots) {
  auto m = SmallCnn();
  ASSERT_TRUE(m->freeze_until("gap").ok());
  EXPECT_FALSE(m->layers()[0]->trainable);
  EXPECT_TRUE(m->layers().back()->trainable);
  ASSERT_TRUE(m->compile(Adam()).ok());
  // Only the head (4 x 3 + 3) is trainable; Adam keeps two slots for each of its values only.
  EXPECT_EQ(m->variables()->num_trainable(), 15);
  EXPECT_NE(m->Summary().find("Trainable params: 15"), std::string::npos) << m->Summary();
  auto state = m->get_state();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->size(), static_cast<size_t>(m->variables()->params().num_elements() + 2 * 15));
  std::map<std::string, std::vector<float>> before;
  for (const auto& v : kBackbone) before[v] = Values(*m, v);
  const std::vector<float> head_before = Values(*m, "head/kernel");

  auto train = data::Dataset::from_tensor_slices(Images(96, 1)).batch(32, {.drop_remainder = true});
  ASSERT_TRUE(m->fit(train, {.epochs = 2, .verbose = 0}).ok());
  for (const auto& v : kBackbone) EXPECT_TRUE(BitIdentical(Values(*m, v), before[v])) << v << " changed";
  EXPECT_FALSE(BitIdentical(Values(*m, "head/kernel"), head_before)) << "the head did not train";
}

TEST(Freezing, FrozenBatchNormRunsInInferenceMode) {
  // The training step's loss on a batch equals evaluate()'s (inference: moving statistics)
  // exactly when every BatchNormalization is frozen; trainable, it normalizes with the batch's.
  auto batch = Images(32, 2);
  auto one = data::Dataset::from_tensor_slices(batch).batch(32);
  for (bool freeze : {true, false}) {
    auto m = SmallCnn();
    if (freeze) {
      ASSERT_TRUE(m->freeze_until("gap").ok());
    }
    ASSERT_TRUE(m->compile(Adam()).ok());
    auto eval = m->evaluate(one);
    ASSERT_TRUE(eval.ok()) << eval.status().ToString();
    auto tape = m->compute_gradients(batch);
    ASSERT_TRUE(tape.ok()) << tape.status().ToString();
    if (freeze) {
      EXPECT_NEAR(tape->loss, LogValue(*eval, "loss"), 1e-5);
      EXPECT_EQ(CountKernels(*m, "bn_fwd"), 0);
    } else {
      EXPECT_GT(std::abs(tape->loss - LogValue(*eval, "loss")), 1e-3);
      EXPECT_EQ(CountKernels(*m, "bn_fwd"), 2);
    }
  }
}

TEST(Freezing, CompiledStepHasNoGradientKernelsForFrozenLayers) {
  auto batch = Images(32, 3);
  auto flops = [](Model& m) {
    int64_t f = 0;
    for (const backend::KernelInfo& k : m.train_program()->kernels()) f += k.matrix_flops;
    return f;
  };
  auto m = SmallCnn();
  ASSERT_TRUE(m->compile(Adam()).ok());
  ASSERT_TRUE(m->compute_gradients(batch).ok());
  EXPECT_EQ(CountKernels(*m, "conv_bwd_weights"), 2);
  EXPECT_EQ(CountKernels(*m, "bn_bwd"), 2);
  const int64_t all_flops = flops(*m);

  // Backbone frozen: nothing below the head is differentiated.
  ASSERT_TRUE(m->freeze_until("gap").ok());
  ASSERT_TRUE(m->compile(Adam()).ok());
  ASSERT_TRUE(m->compute_gradients(batch).ok());
  EXPECT_EQ(CountKernels(*m, "conv_bwd_weights"), 0);
  EXPECT_EQ(CountKernels(*m, "conv_bwd_data"), 0);
  EXPECT_EQ(CountKernels(*m, "bn_bwd"), 0);
  const int64_t frozen_flops = flops(*m);
  EXPECT_LT(frozen_flops * 2, all_flops);  // the forward convolutions only: a third of the step's

  // conv1 frozen, bn1 and above trainable: conv2 gets its weight and input gradients (bn1
  // needs the latter), conv1 neither.
  ASSERT_TRUE(m->freeze_until("conv1").ok());
  ASSERT_TRUE(m->compile(Adam()).ok());
  ASSERT_TRUE(m->compute_gradients(batch).ok());
  EXPECT_EQ(CountKernels(*m, "conv_bwd_weights"), 1);
  EXPECT_EQ(CountKernels(*m, "conv_bwd_weights", "conv2"), 1);
  EXPECT_EQ(CountKernels(*m, "conv_bwd_data"), 1);
  EXPECT_EQ(CountKernels(*m, "conv_bwd_data", "conv2"), 1);
  EXPECT_EQ(CountKernels(*m, "bn_bwd"), 2);
}

TEST(Freezing, TrainabilityChangesTakeEffectAtTheNextCompileWhichKeepsTheWeights) {
  auto m = SmallCnn();
  m->set_trainable(false);
  EXPECT_FALSE(m->trainable());
  ASSERT_TRUE(m->freeze_until("gap").ok());
  EXPECT_TRUE(m->trainable());
  ASSERT_TRUE(m->compile(Adam()).ok());
  auto train = data::Dataset::from_tensor_slices(Images(64, 4)).batch(32, {.drop_remainder = true});
  ASSERT_TRUE(m->fit(train, {.epochs = 1, .verbose = 0}).ok());
  auto trained = m->get_state();
  ASSERT_TRUE(trained.ok());

  // Unfreezing without a recompile is refused, naming the layer and the remedy.
  m->set_trainable(true);
  auto refused = m->fit(train, {.epochs = 1, .verbose = 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("layer conv1 was made trainable"), std::string::npos) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("call compile() again"), std::string::npos);

  // The recompile keeps every weight (by name: the flat layout changed) and trains them all.
  const std::vector<std::string> names = {"conv1/kernel", "bn1/gamma", "bn1/moving_mean", "conv2/kernel", "head/kernel"};
  std::map<std::string, std::vector<float>> before;
  for (const auto& v : names) before[v] = Values(*m, v);
  ASSERT_TRUE(m->compile({.optimizer = optimizers::Adam(1e-3),
                          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})})
                  .ok());
  EXPECT_EQ(m->variables()->num_trainable(), m->count_params() - 16);  // all but 2 x 2 x 4 moving statistics
  for (const auto& v : names) EXPECT_TRUE(BitIdentical(Values(*m, v), before[v])) << v << " not kept";
  ASSERT_TRUE(m->fit(train, {.epochs = 1, .verbose = 0}).ok());
  for (const auto& v : names) EXPECT_FALSE(BitIdentical(Values(*m, v), before[v])) << v << " did not train";
}

TEST(Freezing, CheckpointsKeepTheFrozenState) {
  const std::string dir = strata::test::TempPath("freezing_ckpt");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/backup.ckpt";
  auto train = data::Dataset::from_tensor_slices(Images(64, 5)).batch(32, {.drop_remainder = true});

  auto a = SmallCnn();
  ASSERT_TRUE(a->freeze_until("gap").ok());
  ASSERT_TRUE(a->compile(Adam()).ok());
  ASSERT_TRUE(a->fit(train, {.epochs = 1, .verbose = 0}).ok());
  ASSERT_TRUE(a->SaveBackup(path, 1, 0).ok());
  auto saved = a->get_state();
  ASSERT_TRUE(saved.ok());

  // The same layers frozen: resumes exactly (weights and the head's Adam slots), and the
  // backbone stays frozen after more steps.
  auto b = SmallCnn();
  ASSERT_TRUE(b->freeze_until("gap").ok());
  ASSERT_TRUE(b->compile(Adam()).ok());
  ASSERT_TRUE(b->RestoreBackup(path).ok());
  auto restored = b->get_state();
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(BitIdentical(*restored, *saved));
  const std::vector<float> conv2 = Values(*b, "conv2/kernel");
  ASSERT_TRUE(b->fit(train, {.epochs = 2, .verbose = 0, .initial_epoch = 1}).ok());
  EXPECT_TRUE(BitIdentical(Values(*b, "conv2/kernel"), conv2));

  // Other layers frozen: a resume would misplace the slots, so it fails naming a variable
  // and leaves the model as it was.
  auto c = SmallCnn();
  ASSERT_TRUE(c->compile(Adam()).ok());
  auto fresh = c->get_state();
  ASSERT_TRUE(fresh.ok());
  Status s = c->RestoreBackup(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("frozen (not trainable) in the checkpoint but trainable in the model"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("variable conv"), std::string::npos) << s.ToString();
  EXPECT_TRUE(BitIdentical(*c->get_state(), *fresh));

  // load_weights takes it: every weight by name, the head's slots carried, the rest zero.
  ASSERT_TRUE(c->load_weights(path).ok());
  for (const auto& v : kBackbone) EXPECT_TRUE(BitIdentical(Values(*c, v), Values(*a, v))) << v;
  EXPECT_TRUE(BitIdentical(Values(*c, "head/kernel"), Values(*a, "head/kernel")));
  auto loaded = c->get_state();
  ASSERT_TRUE(loaded.ok());
  const int64_t np = c->variables()->params().num_elements(), nt = c->variables()->num_trainable();
  const backend::VariableStore::Entry* head_c = c->variables()->Find("head/kernel");
  const backend::VariableStore::Entry* head_a = a->variables()->Find("head/kernel");
  const backend::VariableStore::Entry* conv_c = c->variables()->Find("conv1/kernel");
  const int64_t np_a = a->variables()->params().num_elements(), nt_a = a->variables()->num_trainable();
  for (int64_t block = 0; block < 2; ++block) {
    for (int64_t i = 0; i < head_c->size; ++i)
      EXPECT_EQ((*loaded)[np + block * nt + head_c->offset + i], (*saved)[np_a + block * nt_a + head_a->offset + i]);
    for (int64_t i = 0; i < conv_c->size; ++i) EXPECT_EQ((*loaded)[np + block * nt + conv_c->offset + i], 0.0f);
  }
  std::filesystem::remove_all(dir);
}

TEST(Freezing, SaveAndLoadWeightsTakeKerasH5) {
  const std::string dir = strata::test::TempPath("freezing_h5");
  std::filesystem::create_directories(dir);
  auto a = SmallCnn();
  ASSERT_TRUE(a->compile(Adam()).ok());
  auto train = data::Dataset::from_tensor_slices(Images(32, 6)).batch(32, {.drop_remainder = true});
  ASSERT_TRUE(a->fit(train, {.epochs = 1, .verbose = 0}).ok());
  ASSERT_TRUE(a->save_weights(dir + "/w.h5").ok());
  auto b = SmallCnn();
  ASSERT_TRUE(b->compile(Adam()).ok());
  ASSERT_TRUE(b->load_weights(dir + "/w.h5").ok());
  for (const auto& v : kBackbone) EXPECT_TRUE(BitIdentical(Values(*b, v), Values(*a, v))) << v;
  EXPECT_TRUE(BitIdentical(Values(*b, "head/kernel"), Values(*a, "head/kernel")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::keras
