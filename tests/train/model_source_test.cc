// What a checkpoint records of its model (train/model_source.h): the record the trainer hands
// to save_weights reads back whole, for a spec and for a Keras application; a checkpoint that
// records none says what to pass instead; files written before the header had a "model" (their
// record in "extra"."model", testdata/checkpoints/PROVENANCE.md) still give theirs.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace strata::train
