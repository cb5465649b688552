// The checkpoint's header as one save writes it (issue 43): the optimizer the slots belong to
// and, when the save is told, the model the weights belong to, next to the weights, with no
// second pass over the file; a weights-only load for inference. (Files written by older code:
// checkpoint_compat_test.cc.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "blobs.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/model.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT
using testing::Blobs;

std::unique_ptr<Model> TrainedMlp(const Optimizer& optimizer) {
  auto m = Sequential({InputLayer({8}), Dense(4, {.activation = "relu"}), Dense(3)}, "mlp");
  EXPECT_TRUE(m.ok());
  const CompileOptions options{.optimizer = optimizer,
                               .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})};
  EXPECT_TRUE((*m)->compile(options).ok());
  auto train = data::Dataset::from_tensor_slices(Blobs(64, 3)).batch(32, {.drop_remainder = true});
  EXPECT_TRUE((*m)->fit(train, {.epochs = 1, .verbose = 0}).ok());
  return std::move(*m);
}

nlohmann::json Header(const std::string& path, int* records = nullptr) {
  auto r = record::RecordReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::string header, rest;
  EXPECT_TRUE((*r)->ReadRecord(&header).ok());
  int n = 1;
  while ((*r)->ReadRecord(&rest).ok()) ++n;
  if (records) *records = n;
  return nlohmann::json::parse(header, nullptr, false);
}

class CheckpointHeader : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string dir_ = strata::test::TempPath("strata-checkpoint-header");
};

TEST_F(CheckpointHeader, OneSaveWritesTheOptimizerAndTheModelBesideTheWeights) {
  auto m = TrainedMlp(optimizers::Adam(0.01, {.clipnorm = 1}));
  const std::string described = R"({"source": "mlp.json", "spec": {"class_name": "Sequential"}, "image_size": 8})";
  ASSERT_TRUE(m->save_weights(Path("w.ckpt"), {.model_json = described}).ok());
  int records = 0;
  const auto h = Header(Path("w.ckpt"), &records);
  EXPECT_EQ(records, 4);
  EXPECT_EQ(h["model"], nlohmann::json::parse(described));
  EXPECT_EQ(h["optimizer"]["name"], "Adam");
  EXPECT_EQ(h["optimizer"]["slot_blocks"], 2);
  EXPECT_EQ(h["optimizer"]["clipnorm"], 1.0);
  EXPECT_EQ(h["optimizer"]["beta_2"], 0.999);
  EXPECT_EQ(h["slots"], 2 * m->variables()->num_trainable());
  EXPECT_EQ(h["extra"], nlohmann::json::object()) << "the model is no longer added to extra";

  auto back = ReadCheckpointHeader(Path("w.ckpt"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(back->model_json), nlohmann::json::parse(described));
  EXPECT_EQ(nlohmann::json::parse(back->optimizer_json), h["optimizer"]);
  EXPECT_EQ(back->global_step, m->global_step());
  EXPECT_TRUE(IsCheckpointFile(Path("w.ckpt")));

  // Without a description: the optimizer alone (plain SGD keeps no slots); a backup too.
  auto sgd = TrainedMlp(optimizers::SGD(0.1));
  ASSERT_TRUE(sgd->save_weights(Path("plain.ckpt")).ok());
  const auto plain = Header(Path("plain.ckpt"));
  EXPECT_FALSE(plain.contains("model"));
  EXPECT_EQ(plain["optimizer"]["name"], "SGD");
  EXPECT_EQ(plain["optimizer"]["slot_blocks"], 0);
  EXPECT_EQ(plain["slots"], 0);
  ASSERT_TRUE(sgd->SaveBackup(Path("backup.ckpt"), 1, 0).ok());
  EXPECT_EQ(Header(Path("backup.ckpt"))["optimizer"]["slot_blocks"], 0);
  EXPECT_TRUE(sgd->RestoreBackup(Path("backup.ckpt")).ok());
}

TEST_F(CheckpointHeader, AModelDescriptionThatIsNotAJsonObjectIsRefusedAndNothingIsWritten) {
  auto m = TrainedMlp(optimizers::SGD(0.1, {.momentum = 0.9}));
  for (const std::string bad : {"not json", "[1, 2]", "\"a string\""}) {
    Status s = m->save_weights(Path("w.ckpt"), {.model_json = bad});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(Path("w.ckpt")), std::string::npos) << s.ToString();
    EXPECT_FALSE(std::filesystem::exists(Path("w.ckpt"))) << bad;
  }
}

// A whole load (training goes on) needs the optimizer's slots; the error now names the file's
// optimizer. The weights-only load (inference) takes them into a model with any optimizer.
TEST_F(CheckpointHeader, AWholeLoadNamesTheFilesOptimizerAWeightsOnlyLoadNeedsNone) {
  auto adam = TrainedMlp(optimizers::Adam(0.01));
  ASSERT_TRUE(adam->save_weights(Path("adam.ckpt")).ok());
  auto momentum = TrainedMlp(optimizers::SGD(0.1, {.momentum = 0.9}));
  const auto before = momentum->get_state();
  ASSERT_TRUE(before.ok());
  Status s = momentum->load_weights(Path("adam.ckpt"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(Path("adam.ckpt")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("the checkpoint's optimizer is Adam with 2 slot blocks"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(*momentum->get_state(), *before) << "a refused load changes nothing";

  const int64_t step = momentum->global_step();
  ASSERT_TRUE(momentum->load_weights(Path("adam.ckpt"), {.weights_only = true}).ok());
  const Tensor& p = momentum->variables()->params();
  const Tensor& q = adam->variables()->params();
  ASSERT_EQ(p.nbytes(), q.nbytes());
  EXPECT_EQ(0, std::memcmp(p.raw_data(), q.raw_data(), p.nbytes()));
  const auto after = momentum->get_state();
  const size_t np = static_cast<size_t>(p.num_elements());
  EXPECT_TRUE(std::equal(before->begin() + np, before->end(), after->begin() + np, after->end())) << "slots kept";
  EXPECT_EQ(momentum->global_step(), step);
  // The loaded weights are the ones predict runs with.
  auto x = data::Dataset::from_tensor_slices(data::Element({Blobs(16, 3)[0]})).batch(16);
  auto a = adam->predict(x), b = momentum->predict(x);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(0, std::memcmp(a->raw_data(), b->raw_data(), a->nbytes()));

  // A damaged file is refused by a weights-only load too: every record is still checked.
  std::ifstream in(Path("adam.ckpt"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes[bytes.size() - 6] ^= 0x10;  // inside the last record's data or its CRC
  std::ofstream(Path("bad.ckpt"), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  s = momentum->load_weights(Path("bad.ckpt"), {.weights_only = true});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(Path("bad.ckpt")), std::string::npos) << s.ToString();
}

TEST_F(CheckpointHeader, IsCheckpointFileTellsACheckpointFromOtherFiles) {
  std::ofstream(Path("text.ckpt")) << "not a checkpoint";
  {
    auto w = record::RecordWriter::Open(Path("other.tfrecord"));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteRecord(R"({"format": 7})").ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  EXPECT_FALSE(IsCheckpointFile(Path("text.ckpt")));
  EXPECT_FALSE(IsCheckpointFile(Path("other.tfrecord")));
  EXPECT_FALSE(IsCheckpointFile(dir_));
  EXPECT_FALSE(IsCheckpointFile(Path("missing.ckpt")));
  auto s = ReadCheckpointHeader(Path("other.tfrecord"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(Path("other.tfrecord")), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace strata::keras
