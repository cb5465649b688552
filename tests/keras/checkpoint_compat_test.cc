// Checkpoints written before issue 20's redesign still load. testdata/checkpoints/
// tiny_cnn-7194b05.ckpt was written by `strata train` built at commit 7194b05 (before the
// optimizer moved out of the model into OptimizerState and the graph lost its update ops):
//   strata train --model tiny.json --epochs 1 --steps-per-epoch 20 --batch-per-replica 16
//                --replicas 1 --no-monitor --out tiny_cnn-7194b05.ckpt
// (Fashion-MNIST, SGD with Nesterov momentum: one slot block). The test loads it into the
// same spec compiled today and checks every parameter, moving statistic and momentum value
// against the file's own records, read with the record reader alone.
// tiny_cnn_adam-1338539.ckpt was written at commit 1338539, the last before the header had its
// own "model" and "optimizer" (issue 43: `strata train` added the model to "extra" by rewriting
// the file, and inference guessed the optimizer from the slots' size); testdata/checkpoints/
// PROVENANCE.md has both commands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/keras/checkpoint.h"
#include "strata/keras/model.h"
#include "strata/keras/spec.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"
#include "common/record_ends.h"
#include "common/temp_path.h"
#include "common/tiny_cnn_spec.h"

namespace strata::keras {
namespace {

const std::string kTinyCnnSpec = test::TinyCnnSpec();

TEST(CheckpointCompat, ACheckpointWrittenBeforeTheRedesignLoads) {
  const std::string path = std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn-7194b05.ckpt";
  auto model = ModelFromJson(kTinyCnnSpec);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Model& m = **model;
  ASSERT_TRUE(m.compile({.optimizer = optimizers::SGD(0.01, {.momentum = 0.9, .nesterov = true}),
                         .loss = losses::SparseCategoricalCrossentropy({.from_logits = !m.ends_in_softmax()})})
                  .ok());
  EXPECT_FALSE(m.ends_in_softmax());
  ASSERT_TRUE(m.load_weights(path).ok()) << m.load_weights(path).ToString();
  EXPECT_EQ(m.global_step(), 20);

  // The file's records: header, parameters, optimizer slots, iterator state.
  auto reader = record::RecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::string header, params, slots;
  ASSERT_TRUE((*reader)->ReadRecord(&header).ok());
  ASSERT_TRUE((*reader)->ReadRecord(&params).ok());
  ASSERT_TRUE((*reader)->ReadRecord(&slots).ok());
  const Tensor& p = m.variables()->params();
  ASSERT_EQ(params.size(), p.nbytes()) << "parameters and moving statistics, in today's block order";
  EXPECT_EQ(0, std::memcmp(params.data(), p.raw_data(), params.size()));
  auto state = m.get_state();  // parameters, then the optimizer slots
  ASSERT_TRUE(state.ok());
  const size_t np = static_cast<size_t>(p.num_elements());
  ASSERT_EQ(slots.size(), (state->size() - np) * sizeof(float)) << "one momentum block";
  EXPECT_EQ(0, std::memcmp(slots.data(), state->data() + np, slots.size()));
  float momentum_sum = 0;
  for (size_t i = np; i < state->size(); ++i) momentum_sum += std::abs((*state)[i]);
  EXPECT_GT(momentum_sum, 0) << "20 steps of SGD leave momentum";
}

// A checkpoint cut short at any byte (a crash mid-copy, a full disk), or whose header is
// damaged, is refused with the file's name, and the model keeps every value it had: no
// partial load.
std::unique_ptr<Model> CompiledTiny() {
  auto model = ModelFromJson(kTinyCnnSpec);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  Model& m = **model;
  EXPECT_TRUE(m.compile({.optimizer = optimizers::SGD(0.01, {.momentum = 0.9, .nesterov = true}),
                         .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})})
                  .ok());
  return std::move(*model);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(CheckpointCompat, ACheckpointCutShortAtAnyByteIsRefusedAndTheModelKeepsItsValues) {
  const std::string good = ReadAll(std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn-7194b05.ckpt");
  ASSERT_GT(good.size(), 1000u);
  auto model = CompiledTiny();
  auto before = model->get_state();
  ASSERT_TRUE(before.ok());
  const std::string path = strata::test::TempPath("strata-cut.ckpt");
  // Every byte of the framing and the header, then a stride through the value records, and
  // every record boundary: there every record left has a valid checksum, and only the count of
  // records tells the file was cut (TFRecord framing: u64 length, u32 CRC, data, u32 CRC).
  std::vector<size_t> cuts, boundaries = strata::testing::RecordEnds(good);
  ASSERT_EQ(boundaries.size(), 4u) << "a checkpoint is 4 records";
  ASSERT_EQ(boundaries.back(), good.size());
  boundaries.pop_back();  // the whole file
  for (size_t n = 0; n < 2048 && n < good.size(); ++n) cuts.push_back(n);
  for (size_t n = 2048; n < good.size(); n += 97) cuts.push_back(n);
  cuts.push_back(good.size() - 1);
  cuts.insert(cuts.end(), boundaries.begin(), boundaries.end());
  for (size_t n : cuts) {
    WriteAll(path, good.substr(0, n));
    Status s = model->load_weights(path);
    ASSERT_FALSE(s.ok()) << "a checkpoint cut to " << n << " of " << good.size() << " bytes loaded";
    ASSERT_NE(s.message().find(path), std::string::npos) << n << ": " << s.ToString();
    ASSERT_FALSE(s.IsOutOfRange()) << "a cut file is damage, not a clean end: " << s.ToString();
    if (std::find(boundaries.begin(), boundaries.end(), n) != boundaries.end()) {
      ASSERT_NE(s.message().find("cut short, it ends after"), std::string::npos) << n << ": " << s.ToString();
    }
    auto after = model->get_state();
    ASSERT_TRUE(after.ok());
    ASSERT_TRUE(*after == *before) << "a checkpoint cut to " << n << " bytes changed the model";
  }
  WriteAll(path, good);
  EXPECT_TRUE(model->load_weights(path).ok()) << "the whole file still loads";
  std::remove(path.c_str());
}

// A header that is well framed (valid CRCs) but wrong: each is an error naming the file,
// never an exception or a half-loaded model.
TEST(CheckpointCompat, AWellFramedButWrongHeaderIsRefusedAndTheModelKeepsItsValues) {
  const std::string src = std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn-7194b05.ckpt";
  auto reader = record::RecordReader::Open(src);
  ASSERT_TRUE(reader.ok());
  std::string header, params, slots, iter;
  ASSERT_TRUE((*reader)->ReadRecord(&header).ok());
  ASSERT_TRUE((*reader)->ReadRecord(&params).ok());
  ASSERT_TRUE((*reader)->ReadRecord(&slots).ok());
  ASSERT_TRUE((*reader)->ReadRecord(&iter).ok());
  const nlohmann::json h = nlohmann::json::parse(header);
  ASSERT_GE(h["variables"].size(), 3u);

  std::vector<std::pair<std::string, nlohmann::json>> bad;
  auto with = [&](const std::string& what, auto change) {
    nlohmann::json c = h;
    change(c);
    bad.emplace_back(what, c);
  };
  with("format is a number", [](nlohmann::json& c) { c["format"] = 7; });
  with("version 2", [](nlohmann::json& c) { c["version"] = 2; });
  with("variables is an object", [](nlohmann::json& c) { c["variables"] = nlohmann::json::object(); });
  with("a variable's name is a number", [](nlohmann::json& c) { c["variables"][1]["name"] = 5; });
  with("a variable is a string", [](nlohmann::json& c) { c["variables"][2] = "conv"; });
  with("the last variable has another shape", [](nlohmann::json& c) { c["variables"].back()["shape"] = {1, 2, 3}; });
  with("the last variable is unknown", [](nlohmann::json& c) { c["variables"].back()["name"] = "no_such_layer/kernel"; });
  with("the last variable is missing", [](nlohmann::json& c) { c["variables"].erase(c["variables"].size() - 1); });
  with("an offset past the block", [](nlohmann::json& c) { c["variables"].back()["offset"] = 1 << 30; });
  with("a size that overflows", [](nlohmann::json& c) { c["variables"].back()["offset"] = -1; });
  with("global_step is a string", [](nlohmann::json& c) { c["global_step"] = "twenty"; });
  // The optimizer record of today's files: it must agree with the slot record it describes.
  with("the optimizer has no slot_blocks", [](nlohmann::json& c) { c["optimizer"] = {{"name", "SGD"}}; });
  with("the optimizer is a string", [](nlohmann::json& c) { c["optimizer"] = "SGD"; });
  with("the optimizer keeps 2 slot blocks, the file 1",
       [](nlohmann::json& c) { c["optimizer"] = {{"name", "SGD"}, {"slot_blocks", 2}}; });
  with("the optimizer keeps 2^62 slot blocks",
       [](nlohmann::json& c) { c["optimizer"] = {{"name", "SGD"}, {"slot_blocks", int64_t{1} << 62}}; });

  auto model = CompiledTiny();
  auto before = model->get_state();
  ASSERT_TRUE(before.ok());
  const std::string path = strata::test::TempPath("strata-bad-header.ckpt");
  for (const auto& [what, json] : bad) {
    {
      auto w = record::RecordWriter::Open(path);
      ASSERT_TRUE(w.ok());
      ASSERT_TRUE((*w)->WriteRecord(json.dump()).ok());
      ASSERT_TRUE((*w)->WriteRecord(params).ok());
      ASSERT_TRUE((*w)->WriteRecord(slots).ok());
      ASSERT_TRUE((*w)->WriteRecord(iter).ok());
      ASSERT_TRUE((*w)->Close().ok());
    }
    Status s = model->load_weights(path);
    ASSERT_FALSE(s.ok()) << what << ": loaded";
    EXPECT_NE(s.message().find(path), std::string::npos) << what << ": " << s.ToString();
    auto after = model->get_state();
    ASSERT_TRUE(after.ok());
    EXPECT_TRUE(*after == *before) << what << ": the model changed";
  }
  std::remove(path.c_str());
}

// The parameters and slots of a file, read with the record reader alone.
struct Records {
  nlohmann::json header;
  std::string params, slots;
};
Records ReadRecords(const std::string& path) {
  Records r;
  auto reader = record::RecordReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  std::string header;
  EXPECT_TRUE((*reader)->ReadRecord(&header).ok());
  EXPECT_TRUE((*reader)->ReadRecord(&r.params).ok());
  EXPECT_TRUE((*reader)->ReadRecord(&r.slots).ok());
  r.header = nlohmann::json::parse(header);
  return r;
}

std::unique_ptr<Model> Tiny(const Optimizer& optimizer) {
  auto model = ModelFromJson(kTinyCnnSpec);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  const CompileOptions options{.optimizer = optimizer,
                               .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})};
  EXPECT_TRUE((*model)->compile(options).ok());
  return std::move(*model);
}

const std::string kAdam1338539 = std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn_adam-1338539.ckpt";
const std::string k7194b05 = std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn-7194b05.ckpt";

// Adam, two slot blocks, and a header with neither "optimizer" nor "model" of its own: the
// optimizer is told by the slots' size and the model by "extra"."model", as before.
TEST(CheckpointCompat, ACheckpointWrittenBeforeTheHeaderRecordedItsOptimizerAndModelLoads) {
  const Records file = ReadRecords(kAdam1338539);
  ASSERT_FALSE(file.header.contains("optimizer")) << "written by the old code";
  ASSERT_FALSE(file.header.contains("model")) << "written by the old code";
  ASSERT_TRUE(file.header["extra"].contains("model")) << "the rewrite `strata train` made";

  auto m = Tiny(optimizers::Adam(0.001));
  ASSERT_TRUE(m->load_weights(kAdam1338539).ok()) << m->load_weights(kAdam1338539).ToString();
  EXPECT_EQ(m->global_step(), 2);
  const Tensor& p = m->variables()->params();
  ASSERT_EQ(file.params.size(), p.nbytes());
  EXPECT_EQ(0, std::memcmp(file.params.data(), p.raw_data(), p.nbytes()));
  auto state = m->get_state();
  ASSERT_TRUE(state.ok());
  const size_t np = static_cast<size_t>(p.num_elements());
  ASSERT_EQ(file.slots.size(), (state->size() - np) * sizeof(float)) << "Adam's m and v";
  EXPECT_EQ(0, std::memcmp(file.slots.data(), state->data() + np, file.slots.size()));

  // Another optimizer's slots: refused as before, naming the file.
  auto sgd = Tiny(optimizers::SGD(0.01, {.momentum = 0.9}));
  Status s = sgd->load_weights(kAdam1338539);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(kAdam1338539), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("a different optimizer?"), std::string::npos) << s.ToString();

  // The model record is read where the old code put it.
  for (const std::string& path : {kAdam1338539, k7194b05}) {
    auto header = ReadCheckpointHeader(path);
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    const auto model = nlohmann::json::parse(header->model_json, nullptr, false);
    ASSERT_TRUE(model.is_object()) << path << ": " << header->model_json;
    EXPECT_EQ(model["spec"]["config"]["layers"], nlohmann::json::parse(kTinyCnnSpec)["config"]["layers"]) << path;
    EXPECT_EQ(model.value("image_size", 0), 28) << path;
    EXPECT_TRUE(header->optimizer_json.empty()) << path << ": " << header->optimizer_json;
    EXPECT_TRUE(IsCheckpointFile(path));
  }
}

// Inference takes the weights of any checkpoint, old or new, into a model compiled with any
// optimizer: the parameters and moving statistics load, the slots and the step stay.
TEST(CheckpointCompat, AWeightsOnlyLoadTakesOldCheckpointsIntoAModelWithAnyOptimizer) {
  for (const std::string& path : {kAdam1338539, k7194b05}) {
    const Records file = ReadRecords(path);
    for (const Optimizer& opt : {optimizers::SGD(0.01), optimizers::RMSprop(0.001), optimizers::Adam(0.001)}) {
      auto m = Tiny(opt);
      const auto before = m->get_state();
      ASSERT_TRUE(before.ok());
      Status s = m->load_weights(path, {.weights_only = true});
      ASSERT_TRUE(s.ok()) << path << " into " << opt.name() << ": " << s.ToString();
      const Tensor& p = m->variables()->params();
      ASSERT_EQ(file.params.size(), p.nbytes());
      EXPECT_EQ(0, std::memcmp(file.params.data(), p.raw_data(), p.nbytes())) << path << " into " << opt.name();
      const auto after = m->get_state();
      ASSERT_TRUE(after.ok());
      const size_t np = static_cast<size_t>(p.num_elements());
      EXPECT_TRUE(std::equal(before->begin() + np, before->end(), after->begin() + np, after->end()))
          << "the optimizer's slots stay";
      EXPECT_EQ(m->global_step(), 0) << "the step stays";
    }
  }
  // A whole load into plain SGD (no slots) still refuses a file with slots.
  auto sgd = Tiny(optimizers::SGD(0.01));
  EXPECT_FALSE(sgd->load_weights(kAdam1338539).ok());
}

}  // namespace
}  // namespace strata::keras
