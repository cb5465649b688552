// Keras models end to end on the compiled engine: summary, fit, evaluate, predict,
// checkpoints, callbacks and replica equivalence.
#include "strata/keras/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "blobs.h"
#include "strata/core/file.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/spec.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT

using testing::Blobs;

std::unique_ptr<Model> Mlp(const std::string& name = "mlp", float dropout = 0) {
  std::vector<LayerPtr> l = {InputLayer({8}), Dense(16, {.activation = "relu"})};
  if (dropout > 0) l.push_back(Dropout(dropout));
  l.push_back(Dense(3));
  auto m = Sequential(l, name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

TEST(Model, SummaryLooksLikeKeras) {
  auto m = Mlp();
  std::string s = m->Summary();
  EXPECT_NE(s.find("Model: \"mlp\""), std::string::npos) << s;
  EXPECT_NE(s.find(" dense (Dense)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 16)"), std::string::npos) << s;
  EXPECT_NE(s.find("dense_1 (Dense)"), std::string::npos) << s;
  EXPECT_NE(s.find("Total params: 195"), std::string::npos) << s;  // 8*16+16 + 16*3+3
  EXPECT_NE(s.find("Trainable params: 195"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 0"), std::string::npos) << s;
  EXPECT_EQ(m->count_params(), 195);
}

TEST(Model, ReferenceCnnSpecHasKerasParameterCounts) {
  auto m = LoadModelSpec("reference-cnn");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // Keras: conv 288+9216+18432+36864, BN 4*(32+32+64+64)=768 (384 non-trainable),
  // dense 3136*128+128 + 128*10+10.
  EXPECT_EQ((*m)->count_params(), 288 + 9216 + 18432 + 36864 + 768 + 401536 + 1290);
  std::string s = (*m)->Summary();
  EXPECT_NE(s.find("Non-trainable params: 384"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 7, 7, 64)"), std::string::npos) << s;
}

TEST(Model, ShapeErrorsNameTheLayer) {
  // Dense takes any rank >= 2 (Keras's): a per-example scalar is below it.
  auto m = Sequential({InputLayer({}), Dense(10)}, "bad");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dense (Dense)"), std::string::npos) << m.status().ToString();
  EXPECT_NE(m.status().message().find("rank 2 or more"), std::string::npos) << m.status().ToString();
  auto spec = ModelFromJson(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
      {"class_name": "Dense", "config": {"units": 2, "bogus": 1}}]}})");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("bogus"), std::string::npos);
}

// One home per layer class (keras/layer_registry.h): every registered class builds from its
// config and names itself by the class it was registered as (aliases by their canonical name),
// reads the keys its Keras get_config writes, and an unknown class lists the known ones.
TEST(Model, EveryRegisteredLayerClassBuildsFromItsConfig) {
  const std::map<std::string, std::string> kAliases = {{"MaxPool2D", "MaxPooling2D"}, {"AvgPool2D", "AveragePooling2D"}};
  // The one required argument of the classes that have one.
  const std::map<std::string, std::string> kRequired = {{"Dense", R"({"units": 3})"},
                                                        {"Conv2D", R"({"filters": 3})"},
                                                        {"SeparableConv2D", R"({"filters": 3})"},
                                                        {"Reshape", R"({"target_shape": [4]})"},
                                                        {"LayerScale", R"({"projection_dim": 3})"},
                                                        {"MultiHeadAttention", R"({"num_heads": 2, "key_dim": 3})"},
                                                        {"Embedding", R"({"input_dim": 5, "output_dim": 3})"}};
  ASSERT_GE(LayerClasses().size(), 20u);
  for (const LayerClass& c : LayerClasses()) {
    SCOPED_TRACE(c.name);
    auto it = kRequired.find(c.name);
    auto layer = LayerFromConfig(c.name, it == kRequired.end() ? "{}" : it->second, "x");
    ASSERT_TRUE(layer.ok()) << layer.status().ToString();
    auto alias = kAliases.find(c.name);
    EXPECT_EQ((*layer)->class_name(), alias == kAliases.end() ? c.name : alias->second);
    EXPECT_EQ(FindLayerClass(c.name), &c);
  }
  const std::vector<std::string> dense = ConfigKeys(*FindLayerClass("Dense"));
  EXPECT_EQ(dense, (std::vector<std::string>{"activation", "bias_initializer", "kernel_initializer", "kernel_regularizer",
                                             "units", "use_bias"}));
  EXPECT_EQ(FindLayerClass("Dense2"), nullptr);
  auto unknown = LayerFromConfig("Dense2", "{}", "d");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("d (Dense2): unknown layer class \"Dense2\" (known: InputLayer, Dense, "),
            std::string::npos)
      << unknown.status().ToString();
}

// Keras before 2.2 wrote a Sequential's config as the bare list of its layers, the first one
// carrying batch_input_shape (seen in real files, e.g. fastmachinelearning/example-models'
// KERAS_conv2d_model.json from Keras 2.0): the same model as the object form.
TEST(Model, AKeras20SequentialSpecIsTheBareListOfItsLayers) {
  const std::string layers = R"([
      {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "batch_input_shape": [null, 4],
       "dtype": "float32", "units": 3, "activation": "relu", "use_bias": true,
       "kernel_initializer": {"class_name": "VarianceScaling", "config": {"scale": 1.0, "mode": "fan_avg",
                              "distribution": "uniform", "seed": null}},
       "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null,
       "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}},
      {"class_name": "Dense", "config": {"name": "dense_2", "units": 2, "activation": "softmax"}}])";
  auto bare = ModelFromJson(R"({"class_name": "Sequential", "keras_version": "2.0.8", "config": )" + layers + "}");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  auto object = ModelFromJson(R"({"class_name": "Sequential", "config": {"name": "s", "layers": )" + layers + "}}");
  ASSERT_TRUE(object.ok()) << object.status().ToString();
  EXPECT_EQ((*bare)->count_params(), 4 * 3 + 3 + 3 * 2 + 2);
  EXPECT_EQ((*bare)->count_params(), (*object)->count_params());
  EXPECT_NE((*bare)->Summary().find("dense_2 (Dense)"), std::string::npos) << (*bare)->Summary();
}

TEST(Model, FunctionalWithSharedLayerAndConcat) {
  KTensor a = Input({8}, DType::kF32, "a");
  KTensor b = Input({8}, DType::kF32, "b");
  LayerPtr shared = Dense(4, {.activation = "relu"});
  KTensor merged = Call(Concatenate(), {Call(shared, a), Call(shared, b)});
  auto m = Model::Functional({a, b}, {Call(Dense(2), merged)}, "siamese");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->count_params(), 8 * 4 + 4 + 8 * 2 + 2);  // the shared layer counts once
  EXPECT_NE((*m)->Summary().find("Connected to"), std::string::npos);
}

TEST(Model, FitLearnsAndEvaluatePredictAgree) {
  auto m = Mlp();
  ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.1, {.momentum = 0.9}),
                          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                          .metrics = {"accuracy"}})
                  .ok());
  auto train = data::Dataset::from_tensor_slices(Blobs(960, 1)).batch(32, {.drop_remainder = true});
  auto test = data::Dataset::from_tensor_slices(Blobs(300, 2)).batch(64);  // last batch short
  auto h = m->fit(train, {.epochs = 3, .validation_data = &test, .verbose = 0});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->history["loss"].size(), 3u);
  EXPECT_LT(h->history["loss"][2], h->history["loss"][0]);
  auto logs = m->evaluate(test);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_GT(LogValue(*logs, "accuracy"), 0.95);
  EXPECT_NEAR(LogValue(*logs, "accuracy"), h->history["val_accuracy"].back(), 1e-9);
  auto p = m->predict(test);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->shape(), Shape({300, 3}));
}

TEST(Model, BatchNormInferenceUsesTheTrainedMovingStatistics) {
  // Regression: evaluation on the training data must agree with training accuracy once
  // the moving statistics have converged (momentum 0.9, 60 steps).
  auto m = Sequential({InputLayer({8}), Dense(16), BatchNormalization({.momentum = 0.9f}), ReLU(), Dense(3)}, "bn");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE((*m)->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9}),
                             .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                             .metrics = {"accuracy"}})
                  .ok());
  auto data = Blobs(640, 7);
  auto train = data::Dataset::from_tensor_slices(data).batch(64, {.drop_remainder = true});
  auto h = (*m)->fit(train, {.epochs = 6, .verbose = 0});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  auto logs = (*m)->evaluate(train);
  ASSERT_TRUE(logs.ok());
  EXPECT_GT(h->history["accuracy"].back(), 0.95);
  EXPECT_GT(LogValue(*logs, "accuracy"), 0.95);
  EXPECT_NEAR(LogValue(*logs, "loss"), h->history["loss"].back(), 0.1);
}

TEST(Model, ReplicasMatchOneReplicaWithTheSameGlobalBatch) {
  // No batch norm and no dropout: R replicas with global batch B must equal one replica
  // with batch B (gradients are averaged over the shards).
  std::vector<std::vector<float>> finals;
  for (int replicas : {1, 2, 4}) {
    auto strategy = distribute::MirroredStrategy(replicas);
    ASSERT_TRUE(strategy.ok());
    auto m = Mlp();
    ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9, .nesterov = true, .weight_decay = 1e-3}),
                            .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                            .strategy = strategy->get()})
                    .ok());
    auto train = data::Dataset::from_tensor_slices(Blobs(256, 3)).batch(64, {.drop_remainder = true});
    auto h = m->fit(train, {.epochs = 2, .verbose = 0});
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    finals.push_back(*m->get_state());
  }
  for (size_t r = 1; r < finals.size(); ++r) {
    ASSERT_EQ(finals[r].size(), finals[0].size());
    for (size_t i = 0; i < finals[0].size(); ++i) ASSERT_NEAR(finals[r][i], finals[0][i], 1e-5) << "replica set " << r << " value " << i;
  }
}

TEST(Model, CheckpointRoundTripAndResumeGivesTheSameWeights) {
  auto dir = test::FreshTempDir("strata-keras-ckpt");
  auto train = data::Dataset::from_tensor_slices(Blobs(192, 4)).batch(32, {.drop_remainder = true});
  auto opts = [](CompileOptions o) { return o; };
  CompileOptions co{.optimizer = optimizers::Adam(0.01), .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})};

  auto straight = Mlp("mlp", 0.25f);  // dropout: the masks must follow the restored step
  ASSERT_TRUE(straight->compile(opts(co)).ok());
  ASSERT_TRUE(straight->fit(train, {.epochs = 4, .verbose = 0}).ok());

  // Two epochs, save, then a fresh model loads and trains two more.
  auto first = Mlp("mlp", 0.25f);
  ASSERT_TRUE(first->compile(opts(co)).ok());
  ASSERT_TRUE(first->fit(train, {.epochs = 2, .verbose = 0}).ok());
  ASSERT_TRUE(first->save_weights((dir / "w.ckpt").string()).ok());
  auto second = Mlp("mlp", 0.25f);
  ASSERT_TRUE(second->compile(opts(co)).ok());
  ASSERT_TRUE(second->load_weights((dir / "w.ckpt").string()).ok());
  ASSERT_TRUE(second->fit(train, {.epochs = 4, .verbose = 0, .initial_epoch = 2}).ok());
  EXPECT_EQ(*second->get_state(), *straight->get_state());  // bitwise

  // A damaged checkpoint is an error naming the file, not garbage weights.
  std::string bytes = *ReadFileToString((dir / "w.ckpt").string());
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic((dir / "bad.ckpt").string(), bytes).ok());
  Status s = second->load_weights((dir / "bad.ckpt").string());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.ckpt"), std::string::npos) << s.ToString();
}

TEST(Callbacks, EarlyStoppingCsvLoggerAndLearningRateScheduler) {
  auto dir = std::filesystem::path(test::TempPath("strata-keras-cb"));
  std::filesystem::create_directories(dir);
  auto m = Mlp();
  ASSERT_TRUE(m->compile({.optimizer = optimizers::SGD(0.0), .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})}).ok());
  auto train = data::Dataset::from_tensor_slices(Blobs(64, 5)).batch(32, {.drop_remainder = true});
  std::vector<double> lrs;
  auto sched = std::make_shared<LearningRateScheduler>([&](int epoch, double) {
    lrs.push_back(epoch * 0.0);  // lr 0: the loss never improves
    return 0.0;
  });
  auto early = std::make_shared<EarlyStopping>(EarlyStopping::Options{.monitor = "loss", .patience = 2});
  auto csv = std::make_shared<CSVLogger>((dir / "log.csv").string());
  auto h = m->fit(train, {.epochs = 10, .callbacks = {sched, early, csv}, .verbose = 0});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->epoch.size(), 3u);  // epoch 0 sets the best, 1 and 2 do not improve
  EXPECT_EQ(early->stopped_epoch(), 2);
  std::string log = *ReadFileToString((dir / "log.csv").string());
  EXPECT_EQ(log.substr(0, log.find('\n')), "epoch,loss,lr");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4);
}

}  // namespace
}  // namespace strata::keras
