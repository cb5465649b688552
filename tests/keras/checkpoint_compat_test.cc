// Checkpoints written before issue 20's redesign still load. testdata/checkpoints/
// tiny_cnn-7194b05.ckpt was written by `strata train` built at commit 7194b05 (before the
// optimizer moved out of the model into OptimizerState and the graph lost its update ops):
//   strata train --model tiny.json --epochs 1 --steps-per-epoch 20 --batch-per-replica 16
//                --replicas 1 --no-monitor --out tiny_cnn-7194b05.ckpt
// (Fashion-MNIST, SGD with Nesterov momentum: one slot block). The test loads it into the
// same spec compiled today and checks every parameter, moving statistic and momentum value
// against the file's own records, read with the record reader alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/keras/model.h"
#include "strata/keras/spec.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"
#include "common/record_ends.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

constexpr char kTinySpec[] = R"({"class_name": "Sequential", "config": {"name": "tiny_cnn", "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1]}},
  {"class_name": "Conv2D", "config": {"filters": 4, "kernel_size": 3, "padding": "same", "use_bias": false}},
  {"class_name": "BatchNormalization", "config": {}},
  {"class_name": "ReLU", "config": {}},
  {"class_name": "MaxPooling2D", "config": {"pool_size": 2}},
  {"class_name": "Flatten", "config": {}},
  {"class_name": "Dense", "config": {"units": 10}}]}})";

TEST(CheckpointCompat, ACheckpointWrittenBeforeTheRedesignLoads) {
  const std::string path = std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn-7194b05.ckpt";
  auto model = ModelFromJson(kTinySpec);
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
  auto model = ModelFromJson(kTinySpec);
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

}  // namespace
}  // namespace strata::keras
