// What a checkpoint records of its model (train/model_source.h): the record the trainer hands
// to save_weights reads back whole, for a spec and for a Keras application; a checkpoint that
// records none says what to pass instead; files written before the header had a "model" (their
// record in "extra"."model", testdata/checkpoints/PROVENANCE.md) still give theirs. Model
// selection (SelectModel): what each kind of --model gives, resized or as written.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "strata/keras/model.h"
#include "strata/keras/spec.h"
#include "strata/train/model_source.h"
#include "common/temp_path.h"
#include "common/tiny_cnn_spec.h"

namespace strata::train {
namespace {

const std::string kTinyCnnSpec = test::TinyCnnSpec();

class ModelSource : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // The tiny CNN, compiled, saved to `name` with `info` recorded (none when null).
  void Save(const std::string& name, const ModelInfo* info) {
    auto m = keras::ModelFromJson(kTinyCnnSpec);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_TRUE((*m)->compile({.optimizer = keras::optimizers::Adam(0.001),
                               .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})})
                    .ok());
    keras::SaveWeightsOptions save;
    if (info) {
      auto json = ModelInfoJson(*info);
      ASSERT_TRUE(json.ok()) << json.status().ToString();
      save.model_json = *json;
    }
    ASSERT_TRUE((*m)->save_weights(Path(name), save).ok());
  }

  const std::string dir_ = strata::test::TempPath("strata-model-source");
};

TEST_F(ModelSource, ASpecsRecordReadsBackWhole) {
  const ModelInfo info{.spec_json = nlohmann::json::parse(kTinyCnnSpec).dump(),
                       .source = "tiny_cnn.json",
                       .preset = "flowers",
                       .image_key = "image/encoded",
                       .label_key = "class",
                       .image_size = 28,
                       .classes = 10,
                       .channels = 1};
  Save("spec.ckpt", &info);
  auto back = ReadModelInfo(Path("spec.ckpt"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(back->spec_json), nlohmann::json::parse(kTinyCnnSpec));
  EXPECT_EQ(back->source, info.source);
  EXPECT_EQ(back->preset, info.preset);
  EXPECT_EQ(back->image_key, info.image_key);
  EXPECT_EQ(back->label_key, info.label_key);
  EXPECT_EQ(back->image_size, 28);
  EXPECT_EQ(back->classes, 10);
  EXPECT_EQ(back->channels, 1);
  EXPECT_TRUE(back->application.empty());
  auto model = BuildModel(*back);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
}

TEST_F(ModelSource, AnApplicationsRecordReadsBackWhole) {
  ModelInfo info{
      .source = "xception", .preset = "flowers", .label_key = "class", .image_size = 71, .classes = 4, .channels = 3};
  info.application = "xception";
  auto options = ApplicationOptionsFor("xception", 71, 3, 4);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  info.application_options = *options;
  info.application_options.name = "my_xception";
  Save("app.ckpt", &info);
  auto back = ReadModelInfo(Path("app.ckpt"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->application, "xception");
  EXPECT_EQ(back->application_options.input_shape, Shape({71, 71, 3}));
  EXPECT_EQ(back->application_options.classes, 4);
  EXPECT_EQ(back->application_options.name, "my_xception");
  EXPECT_EQ(back->application_options.include_top, info.application_options.include_top);
  EXPECT_EQ(back->application_options.classifier_activation, info.application_options.classifier_activation);
  EXPECT_EQ(back->image_size, 71);
  EXPECT_EQ(back->classes, 4);
}

TEST_F(ModelSource, ACheckpointThatRecordsNoModelSaysWhatToPass) {
  Save("plain.ckpt", nullptr);
  auto back = ReadModelInfo(Path("plain.ckpt"));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kNotFound) << back.status().ToString();
  EXPECT_NE(back.status().message().find("--model SPEC --weights " + Path("plain.ckpt")), std::string::npos)
      << back.status().ToString();
  auto missing = ReadModelInfo(Path("missing.ckpt"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(Path("missing.ckpt")), std::string::npos) << missing.status().ToString();
}

TEST_F(ModelSource, ABadApplicationRecordIsCorruptionNamingTheFile) {
  ModelInfo info{.source = "xception"};
  info.application = "xception";
  info.application_options.input_shape = Shape{71, 71};  // not [H, W, C]
  Save("bad.ckpt", &info);
  auto back = ReadModelInfo(Path("bad.ckpt"));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kCorruption) << back.status().ToString();
  EXPECT_NE(back.status().message().find(Path("bad.ckpt")), std::string::npos) << back.status().ToString();
  EXPECT_NE(back.status().message().find("input_shape is not [H, W, C]"), std::string::npos)
      << back.status().ToString();
}

// Written by older builds, their model record in "extra"."model" (the second one by the
// rewrite `strata train` made after save_weights).
TEST_F(ModelSource, CheckpointsWrittenBeforeTheHeaderHadAModelGiveTheirs) {
  for (const char* file : {"tiny_cnn-7194b05.ckpt", "tiny_cnn_adam-1338539.ckpt"}) {
    const std::string path = std::string(STRATA_TESTDATA) + "/checkpoints/" + file;
    auto info = ReadModelInfo(path);
    ASSERT_TRUE(info.ok()) << file << ": " << info.status().ToString();
    EXPECT_EQ(nlohmann::json::parse(info->spec_json)["config"]["layers"],
              nlohmann::json::parse(kTinyCnnSpec)["config"]["layers"])
        << file;
    EXPECT_EQ(info->image_size, 28) << file;
    EXPECT_EQ(info->label_key, "label") << file;
    EXPECT_EQ(info->classes, 10) << file;
    EXPECT_TRUE(info->application.empty()) << file;
    auto model = BuildModel(*info);
    ASSERT_TRUE(model.ok()) << file << ": " << model.status().ToString();
  }
}

// Model selection (SelectModel), the one function train, evaluate, predict, export and
// bench-step call: what each kind of --model gives with nothing else said, and with a size.
TEST_F(ModelSource, SelectModelGivesEachKindItsOwnInputAndRecordKeys) {
  ModelInfo info;
  auto cnn = SelectModel({.model = "reference-cnn"}, &info);
  ASSERT_TRUE(cnn.ok()) << cnn.status().ToString();
  EXPECT_EQ(info.image_size, 28);
  EXPECT_EQ(info.channels, 1);
  EXPECT_EQ(info.classes, 10);
  EXPECT_EQ(info.label_key, "label");  // Fashion-MNIST's kind (DataKindOf)
  EXPECT_EQ(info.source, "reference-cnn");

  auto app = SelectModel({.model = "mobilenet_v2"}, &info);
  ASSERT_TRUE(app.ok()) << app.status().ToString();
  EXPECT_EQ(info.application, "mobilenet_v2");
  EXPECT_EQ(info.image_size, 224);  // Keras's default size
  EXPECT_EQ(info.channels, 3);
  EXPECT_EQ(info.classes, 1000);
  EXPECT_EQ(info.label_key, "class");  // the flowers schema

  auto sized = SelectModel({.model = "reference-cnn", .image_size = 32, .channels = 3, .classes = 4}, &info);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  EXPECT_EQ(*(*sized)->input_shape(0), (Shape{32, 32, 3}));
  EXPECT_EQ(*(*sized)->output_shape(0), (Shape{4}));
  EXPECT_EQ(info.label_key, "class");

  auto small = SelectModel({.model = "reference-cnn", .image_size = 2, .channels = 1}, &info);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("pass --image-size 4 or more"), std::string::npos) << small.status().ToString();
}

TEST_F(ModelSource, SelectModelKeepsASpecFileAsWrittenUnlessAskedToResize) {
  const std::string file = Path("tiny.json");
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(kTinyCnnSpec.c_str(), f);
  std::fclose(f);
  ModelInfo info;
  auto kept = SelectModel({.model = file, .image_size = 32}, &info);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*(*kept)->input_shape(0), (Shape{28, 28, 1}));
  EXPECT_EQ(info.image_size, 28);
  auto resized = SelectModel({.model = file, .image_size = 32, .resize_spec_file = true}, &info);
  ASSERT_TRUE(resized.ok()) << resized.status().ToString();
  EXPECT_EQ(*(*resized)->input_shape(0), (Shape{32, 32, 1}));
  EXPECT_EQ(info.image_size, 32);
}

TEST_F(ModelSource, SelectModelOfACheckpointGivesItsRecordAndARecipeRefusesOne) {
  const ModelInfo recorded{.spec_json = nlohmann::json::parse(kTinyCnnSpec).dump(), .source = "tiny_cnn.json",
                           .preset = "", .image_key = "img", .label_key = "lbl", .image_size = 28, .classes = 10,
                           .channels = 1};
  Save("recorded.ckpt", &recorded);
  ModelInfo info;
  auto model = SelectModel({.model = Path("recorded.ckpt")}, &info);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(info.image_key, "img");
  EXPECT_EQ(info.label_key, "lbl");
  EXPECT_EQ(info.source, "tiny_cnn.json");

  Recipe r;
  r.model = Path("recorded.ckpt");
  r.image_size = 28;
  r.channels = 1;
  auto refused = BuildRecipeModel(r, &info);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is a checkpoint: pass the model it was trained as with --model"),
            std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace strata::train
