// Checkpoints written before issue 20's redesign still load. testdata/checkpoints/
// tiny_cnn-7194b05.ckpt was written by `strata train` built at commit 7194b05 (before the
// optimizer moved out of the model into OptimizerState and the graph lost its update ops):
//   strata train --model tiny.json --epochs 1 --steps-per-epoch 20 --batch-per-replica 16
//                --replicas 1 --no-monitor --out tiny_cnn-7194b05.ckpt
// (Fashion-MNIST, SGD with Nesterov momentum: one slot block). The test loads it into the
// same spec compiled today and checks every parameter, moving statistic and momentum value
// against the file's own records, read with the record reader alone.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "strata/keras/model.h"
#include "strata/keras/spec.h"
#include "strata/record/record_reader.h"

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

}  // namespace
}  // namespace strata::keras
