// Every flag of `strata evaluate` does what its help says (issue 21, part 0), on a model trained
// for a few steps on the TF-written CIFAR-10 file in testdata (128 PNGs, 32x32 RGB) at 28x28x1,
// the reference CNN's own input, so the spec and the checkpoint can be given apart.
// (--image-key and --label-key: feature_keys_cli_test.cc.) docs/cli.md lists every flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

TEST(FlagsEvaluate, EveryFlagHasItsEffect) {
  const fs::path dir = fs::temp_directory_path() / ("strata_flags_evaluate_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";
  const std::string model = (dir / "model.ckpt").string();
  auto train = RunCommand(Strata() + " train --data " + cifar + " --image-size 28 --channels 1 --epochs 1" +
                              " --steps-per-epoch 4 --batch-per-replica 8 --replicas 1 --no-monitor --out " + model,
                          true);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  auto json = [&](const std::string& name) {
    std::ifstream in(dir / name);
    return nlohmann::json::parse(in, nullptr, false);
  };
  const std::string evaluate = Strata() + " evaluate --data " + cifar + " ";

  // --model CKPT --json: the metrics of all 128 images, one entry per class.
  auto ckpt = RunCommand(evaluate + "--model " + model + " --json " + (dir / "ckpt.json").string(), true);
  ASSERT_EQ(ckpt.exit_code, 0) << ckpt.output;
  const auto by_ckpt = json("ckpt.json");
  ASSERT_FALSE(by_ckpt.is_discarded()) << ckpt.output;
  EXPECT_EQ(by_ckpt["images"], 128);
  EXPECT_EQ(by_ckpt["classes"].size(), 10u);
  EXPECT_NE(ckpt.output.find("per-class F1"), std::string::npos) << ckpt.output;
  EXPECT_NE(ckpt.output.find("worst 10 classes"), std::string::npos) << ckpt.output;

  // --model SPEC --weights CKPT: the same weights, the same metrics; without --weights, fresh ones.
  auto spec = RunCommand(evaluate + "--model reference-cnn --weights " + model + " --json " + (dir / "spec.json").string(),
                         true);
  ASSERT_EQ(spec.exit_code, 0) << spec.output;
  EXPECT_EQ(json("spec.json")["accuracy"], by_ckpt["accuracy"]);
  EXPECT_NEAR(json("spec.json")["loss"].get<double>(), by_ckpt["loss"].get<double>(), 1e-5);
  auto fresh = RunCommand(evaluate + "--model reference-cnn --json " + (dir / "fresh.json").string(), true);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_NE(json("fresh.json")["loss"], by_ckpt["loss"]) << "no --weights: untrained weights";

  // --batch 5: 25 full batches and a short one give the same metrics as one pass of 64s.
  auto batch = RunCommand(evaluate + "--model " + model + " --batch 5 --json " + (dir / "b5.json").string(), true);
  ASSERT_EQ(batch.exit_code, 0) << batch.output;
  EXPECT_EQ(json("b5.json")["images"], 128);
  EXPECT_EQ(json("b5.json")["accuracy"], by_ckpt["accuracy"]);
  EXPECT_NEAR(json("b5.json")["loss"].get<double>(), by_ckpt["loss"].get<double>(), 1e-4);
  EXPECT_EQ(RunCommand(evaluate + "--model " + model + " --batch 0").exit_code, 2);

  // --worst 2 and --no-per-class shape the printed report.
  auto terse = RunCommand(evaluate + "--model " + model + " --worst 2 --no-per-class", true);
  ASSERT_EQ(terse.exit_code, 0) << terse.output;
  EXPECT_NE(terse.output.find("worst 2 classes"), std::string::npos) << terse.output;
  EXPECT_EQ(terse.output.find("per-class F1"), std::string::npos) << terse.output;

  // --tta flip: the accuracy with each image and its mirror image beside the plain one (its value
  // against train's: FlagsTrain.TtaFlipReportsTheMirroredAccuracyBesideThePlainOne); an unknown
  // name is a usage error.
  auto tta = RunCommand(evaluate + "--model " + model + " --tta flip --json " + (dir / "tta.json").string(), true);
  ASSERT_EQ(tta.exit_code, 0) << tta.output;
  EXPECT_NE(tta.output.find("accuracy with --tta flip: "), std::string::npos) << tta.output;
  EXPECT_EQ(json("tta.json")["accuracy"], by_ckpt["accuracy"]);
  EXPECT_TRUE(json("tta.json")["accuracy_tta"]["accuracy"].is_number());
  EXPECT_FALSE(by_ckpt.contains("accuracy_tta")) << "no --tta, no entry";
  EXPECT_EQ(RunCommand(evaluate + "--model " + model + " --tta rotate").exit_code, 2);

  // --summary: the model's summary, no data read.
  auto summary = RunCommand(Strata() + " evaluate --model " + model + " --summary", true);
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_NE(summary.output.find("reference_cnn"), std::string::npos) << summary.output;
  EXPECT_EQ(summary.output.find("evaluated"), std::string::npos) << summary.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
