// The flowers playground end to end, as a user with the competition's files runs it:
// make-records (train/val/test, generated flowers) -> strata train --preset flowers (2 short
// epochs) -> strata evaluate -> strata predict -> submission.csv.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_support.h"
#include "strata/datasets/flowers.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<std::string>> ReadCsv(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

class FlowersCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("strata_flowers_e2e_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    // 8 classes: 48 training, 12 validation and 12 test images each, at 64 px.
    make_ = RunCommand(Strata() + " make-records --from generated-flowers --classes 8 --per-class 48 --val-per-class 12" +
                           " --test-per-class 12 --image-size 64 --out " + dir_->string() + " --quiet",
                       true);
    // The recipe, short: 2 epochs of 250 steps of 32 images at 64 px (~7 s), the learning-rate
    // ramp skipped. Fewer steps learn the classes but leave batch norm's moving statistics
    // (momentum 0.99) too far from the data for inference.
    train_ = RunCommand(Strata() + " train --preset flowers --data '" + (*dir_ / "train/*.tfrec").string() + "' --val '" +
                            (*dir_ / "val/*.tfrec").string() + "' --image-size 64 --epochs 2 --steps-per-epoch 250" +
                            " --batch-per-replica 16 --replicas 2 --warmup-epochs 0 --seed 7 --deterministic --no-monitor" +
                            " --model flowers-cnn" +  // the small model keeps the test short
                            " --out " + (*dir_ / "model.ckpt").string() + " --summary-json " + (*dir_ / "train.json").string(),
                        true);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path* dir_;
  static CommandResult make_, train_;
};
fs::path* FlowersCli::dir_ = nullptr;
CommandResult FlowersCli::make_, FlowersCli::train_;

TEST_F(FlowersCli, TrainsWithThePresetAndReportsMacroF1) {
  ASSERT_EQ(make_.exit_code, 0) << make_.output;
  ASSERT_EQ(train_.exit_code, 0) << train_.output;
  EXPECT_NE(train_.output.find("Epoch 2/2"), std::string::npos) << train_.output;
  EXPECT_NE(train_.output.find("val_f1_macro"), std::string::npos) << train_.output;
  EXPECT_NE(train_.output.find("ramp-up"), std::string::npos) << train_.output;
  EXPECT_NE(train_.output.find("val macro F1: "), std::string::npos) << train_.output;
  std::ifstream in(*dir_ / "train.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["preset"], "flowers");
  EXPECT_EQ(j["history"]["val_f1_macro"].size(), 2u);
}

TEST_F(FlowersCli, EvaluateLoadsTheCheckpointAloneAndNamesClasses) {
  ASSERT_EQ(train_.exit_code, 0) << train_.output;
  auto r = RunCommand(Strata() + " evaluate --model " + (*dir_ / "model.ckpt").string() + " --data '" +
                          (*dir_ / "val/*.tfrec").string() + "' --worst 3 --json " + (*dir_ / "eval.json").string(),
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("evaluated 96 images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'pink primrose'"), std::string::npos) << r.output;   // class 0, by name
  EXPECT_NE(r.output.find("worst 3 classes"), std::string::npos) << r.output;
  std::ifstream in(*dir_ / "eval.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["images"], 96);
  // 8 classes: chance is 0.125.
  EXPECT_GT(j["accuracy"].get<double>(), 0.5) << r.output;
  EXPECT_GT(j["f1_macro"].get<double>(), 0.4) << r.output;
  EXPECT_EQ(j["classes"].size(), 104u);
  EXPECT_EQ(j["classes"][87]["name"], "cyclamen ");
}

TEST_F(FlowersCli, PredictWritesOneRowPerTestId) {
  ASSERT_EQ(train_.exit_code, 0) << train_.output;
  const fs::path out = *dir_ / "submission.csv";
  auto r = RunCommand(Strata() + " predict --model " + (*dir_ / "model.ckpt").string() + " --data '" +
                          (*dir_ / "test/*.tfrec").string() + "' --out " + out.string(),
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = ReadCsv(out);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0], (std::vector<std::string>{"id", "label"}));
  // The answer key make-records wrote for its test split.
  std::map<std::string, int> truth;
  for (const auto& row : ReadCsv(*dir_ / "test_labels.csv"))
    if (row[0] != "id") truth[row[0]] = std::stoi(row[1]);
  ASSERT_EQ(truth.size(), 96u);
  std::set<std::string> ids;
  int right = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 2u) << i;
    EXPECT_TRUE(ids.insert(rows[i][0]).second) << "duplicate id " << rows[i][0];
    ASSERT_TRUE(truth.count(rows[i][0])) << "unknown id " << rows[i][0];
    const int label = std::stoi(rows[i][1]);
    EXPECT_GE(label, 0);
    EXPECT_LT(label, datasets::kFlowersNumClasses);
    right += label == truth[rows[i][0]];
  }
  EXPECT_EQ(ids.size(), truth.size());
  EXPECT_GT(right, 96 / 2) << "test accuracy " << right << "/96 (chance: 12)";
}

TEST_F(FlowersCli, PredictReadsARealTensorFlowFileOfTheSameSchema) {
  // TFX's CIFAR-10 test records, written by TensorFlow: `image` (PNG bytes), `label`, `id`
  // (testdata/real/PROVENANCE.md). A submission for them: every id as stored, in a valid class.
  ASSERT_EQ(train_.exit_code, 0) << train_.output;
  const fs::path out = *dir_ / "cifar.csv";
  auto r = RunCommand(Strata() + " predict --model " + (*dir_ / "model.ckpt").string() + " --data " +
                          std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord --out " + out.string(),
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = ReadCsv(out);
  ASSERT_EQ(rows.size(), 129u);  // the header and the file's 128 records
  std::set<std::string> ids;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 2u) << i;
    EXPECT_EQ(rows[i][0].rfind("test_", 0), 0u) << rows[i][0];
    EXPECT_EQ(rows[i][0].size(), 10u) << rows[i][0];
    ids.insert(rows[i][0]);
    EXPECT_LT(std::stoi(rows[i][1]), datasets::kFlowersNumClasses);
  }
  EXPECT_EQ(ids.size(), 128u);
  EXPECT_TRUE(ids.count("test_09933")) << "the first record's id";
}

TEST_F(FlowersCli, PredictProbabilitiesAddsAColumnPerClass) {
  ASSERT_EQ(train_.exit_code, 0) << train_.output;
  const fs::path out = *dir_ / "probabilities.csv";
  auto r = RunCommand(Strata() + " predict --probabilities --batch 40 --model " + (*dir_ / "model.ckpt").string() +
                          " --data '" + (*dir_ / "test/*.tfrec").string() + "' --out " + out.string(),
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = ReadCsv(out);
  ASSERT_EQ(rows.size(), 97u);  // a short last batch (96 = 2 x 40 + 16) is kept
  ASSERT_EQ(rows[0].size(), 2u + datasets::kFlowersNumClasses);
  EXPECT_EQ(rows[0][2], "prob_0");
  for (size_t i = 1; i < rows.size(); ++i) {
    double sum = 0, best = -1;
    int arg = -1;
    for (int c = 0; c < datasets::kFlowersNumClasses; ++c) {
      const double p = std::stod(rows[i][2 + c]);
      sum += p;
      if (p > best) best = p, arg = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-3) << i;
    EXPECT_EQ(arg, std::stoi(rows[i][1])) << i;
  }
}

// examples/flowers: the same recipe through the library API learns the generated classes.
TEST_F(FlowersCli, TheLibraryExampleRunsTheRecipe) {
  ASSERT_EQ(make_.exit_code, 0) << make_.output;
  auto r = RunCommand(std::string(STRATA_EXAMPLES_DIR) + "/flowers/example_flowers '" + (*dir_ / "train/*.tfrec").string() +
                          "' '" + (*dir_ / "val/*.tfrec").string() + "' 64 2 250",
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto at = r.output.find("val accuracy: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_GT(std::stod(r.output.substr(at + 14)), 0.5) << r.output;  // chance: 0.125
  EXPECT_NE(r.output.find("val macro F1: "), std::string::npos) << r.output;
}

TEST(FlowersClasses, AreTheCompetitionsNames) {
  EXPECT_STREQ(datasets::kFlowersClasses[0], "pink primrose");
  EXPECT_STREQ(datasets::kFlowersClasses[4], "wild geranium");
  EXPECT_STREQ(datasets::kFlowersClasses[103], "wild rose");
  std::set<std::string> distinct(datasets::kFlowersClasses, datasets::kFlowersClasses + datasets::kFlowersNumClasses);
  EXPECT_EQ(distinct.size(), 104u);
  int trailing_space = 0;
  for (const char* c : datasets::kFlowersClasses) trailing_space += std::string(c).back() == ' ';
  EXPECT_EQ(trailing_space, 2);  // 'cyclamen ' and 'hippeastrum '
  EXPECT_STREQ(datasets::kFlowersClasses[87], "cyclamen ");
  EXPECT_STREQ(datasets::kFlowersClasses[90], "hippeastrum ");
}

TEST(FlowersCliErrors, PresetNeedsData) {
  auto r = RunCommand(Strata() + " train --preset flowers", true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--data"), std::string::npos) << r.output;
}

TEST(FlowersCliErrors, EvaluateNamesAMissingSpec) {
  auto r = RunCommand(Strata() + " evaluate --model /nonexistent/model.ckpt --data x", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/model.ckpt"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata::testing
