// `strata evaluate|predict|export --model CKPT` on checkpoints written by older builds
// (testdata/checkpoints/PROVENANCE.md): their model record sits in "extra"."model" and their
// header names no optimizer, and they run from the file alone, as they did when written. The
// weights are loaded without the optimizer's slots, so nothing guesses the optimizer: an Adam
// file (two slot blocks) and a momentum file (one) take the same path, and give the metrics the
// build before issue 43 gave (`strata evaluate --json` at commit 1338539 on the same records).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointCompatCli, OldCheckpointsEvaluatePredictAndExportFromTheFileAlone) {
  const fs::path dir = fs::temp_directory_path() / ("strata_checkpoint_compat_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The TF-written CIFAR-10 file, read at the 28x28x1 the old checkpoints' model record says.
  const std::string cifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";
  struct Old {
    std::string file;
    double loss, accuracy;
  };
  for (const Old& old : {Old{"tiny_cnn-7194b05.ckpt", 2.2995111709460616, 19.0 / 128},
                         Old{"tiny_cnn_adam-1338539.ckpt", 2.302914146333933, 12.0 / 128}}) {
    const std::string& file = old.file;
    const std::string ckpt = std::string(STRATA_TESTDATA) + "/checkpoints/" + file;
    const std::string json = (dir / (file + ".json")).string();
    auto eval = RunCommand(Strata() + " evaluate --model " + ckpt + " --data " + cifar + " --json " + json, true);
    ASSERT_EQ(eval.exit_code, 0) << file << ": " << eval.output;
    std::ifstream in(json);
    const auto metrics = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(metrics.is_discarded()) << eval.output;
    EXPECT_EQ(metrics["images"], 128) << file;
    EXPECT_EQ(metrics["classes"].size(), 10u) << file;
    EXPECT_NEAR(metrics["loss"].get<double>(), old.loss, 1e-6) << file;
    EXPECT_DOUBLE_EQ(metrics["accuracy"].get<double>(), old.accuracy) << file;

    const std::string csv = (dir / (file + ".csv")).string();
    auto predict = RunCommand(Strata() + " predict --model " + ckpt + " --data " + cifar + " --out " + csv, true);
    ASSERT_EQ(predict.exit_code, 0) << file << ": " << predict.output;
    EXPECT_TRUE(fs::file_size(csv) > 0) << file;

    const std::string onnx = (dir / (file + ".onnx")).string();
    auto exported = RunCommand(Strata() + " export --model " + ckpt + " --out " + onnx, true);
    ASSERT_EQ(exported.exit_code, 0) << file << ": " << exported.output;
    EXPECT_TRUE(fs::file_size(onnx) > 0) << file;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
