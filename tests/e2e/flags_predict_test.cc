// Every flag of `strata predict` does what its help says (issue 21, part 0), on a model trained
// for a few steps on the TF-written CIFAR-10 file in testdata (128 PNGs, 32x32 RGB, ids
// `test_NNNNN`) at 28x28x1. (--image-key and --id-key: feature_keys_cli_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "cli_support.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<std::string>> ReadCsv(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(p);
  std::string line, cell;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

TEST(FlagsPredict, EveryFlagHasItsEffect) {
  const fs::path dir = fs::temp_directory_path() / ("strata_flags_predict_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";
  const std::string model = (dir / "model.ckpt").string();
  auto train = RunCommand(Strata() + " train --data " + cifar + " --image-size 28 --channels 1 --epochs 1" +
                              " --steps-per-epoch 4 --batch-per-replica 8 --replicas 1 --no-monitor --out " + model,
                          true);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::string predict = Strata() + " predict --data " + cifar + " ";

  // --model CKPT --out: one row per record, ids as stored, in file order.
  auto base = RunCommand(predict + "--model " + model + " --out " + (dir / "a.csv").string(), true);
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const auto a = ReadCsv(dir / "a.csv");
  ASSERT_EQ(a.size(), 129u);
  EXPECT_EQ(a[0], (std::vector<std::string>{"id", "label"}));
  EXPECT_EQ(a[1][0], "test_09933");  // PROVENANCE.md: the file's first record
  EXPECT_EQ(a[2][0], "test_05669");

  // --probabilities: one column per class, each row a distribution whose argmax is the label.
  auto probs = RunCommand(predict + "--model " + model + " --probabilities --out " + (dir / "p.csv").string(), true);
  ASSERT_EQ(probs.exit_code, 0) << probs.output;
  const auto p = ReadCsv(dir / "p.csv");
  ASSERT_EQ(p.size(), 129u);
  ASSERT_EQ(p[0].size(), 12u);
  EXPECT_EQ(p[0][2], "prob_0");
  EXPECT_EQ(p[0][11], "prob_9");
  for (size_t r = 1; r < p.size(); ++r) {
    double sum = 0, best = -1;
    size_t arg = 0;
    for (size_t c = 2; c < p[r].size(); ++c) {
      const double v = std::stod(p[r][c]);
      sum += v;
      if (v > best) best = v, arg = c - 2;
    }
    EXPECT_NEAR(sum, 1.0, 1e-3) << "row " << r;
    EXPECT_EQ(p[r][1], std::to_string(arg)) << "row " << r;
    EXPECT_EQ(p[r][1], a[r][1]) << "row " << r;
  }

  // --model SPEC --weights CKPT: the same predictions; --batch 5: the same rows in short batches.
  auto weights = RunCommand(predict + "--model reference-cnn --weights " + model + " --out " + (dir / "w.csv").string(), true);
  ASSERT_EQ(weights.exit_code, 0) << weights.output;
  EXPECT_EQ(ReadCsv(dir / "w.csv"), a);
  auto batch = RunCommand(predict + "--model " + model + " --batch 5 --out " + (dir / "b.csv").string(), true);
  ASSERT_EQ(batch.exit_code, 0) << batch.output;
  EXPECT_EQ(ReadCsv(dir / "b.csv"), a);
  EXPECT_EQ(RunCommand(predict + "--model " + model + " --batch 0 --out " + (dir / "z.csv").string()).exit_code, 2);
  EXPECT_EQ(RunCommand(predict + "--model " + model).exit_code, 2) << "--out is required";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
