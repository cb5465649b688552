// --image-key and --label-key reach the input pipeline of `strata train` and `evaluate`: a
// TFRecord file whose features are named as in many TensorFlow-written files (`image_raw`,
// `label`) trains and evaluates, and without the flag the error names the feature it missed.
// (`strata predict` writes submission rows keyed by an `id` feature, which Fashion-MNIST-layout
// files do not have; its flowers path takes the checkpoint's keys the same way.)
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_support.h"
#include "strata/image/image.h"
#include "strata/image/png.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// 64 grayscale 28x28 PNGs under `image_raw`, their class (0..9) under `label`.
void WriteImageRaw(const std::string& path) {
  auto w = record::RecordWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  record::ExampleBuilder b;
  for (int i = 0; i < 64; ++i) {
    image::Image img;
    uint8_t* d = img.Reset(28, 28, 1);
    const int64_t label = i % 10;
    for (int p = 0; p < 28 * 28; ++p) d[p] = static_cast<uint8_t>((p % 28 < 3 * label + 3 ? 200 : 20) + i % 7);
    std::string png;
    ASSERT_TRUE(image::EncodePng(img.view(), {}, &png).ok());
    b.Clear();
    b.AddBytes("image_raw", png);
    b.AddInt64s("label", std::span(&label, 1));
    ASSERT_TRUE((*w)->WriteRecord(b.Finish()).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
}

TEST(FeatureKeysCli, ImageKeyAndLabelKeyReachTrainAndEvaluate) {
  const fs::path dir = fs::temp_directory_path() / ("strata_keys_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string data = (dir / "raw.tfrecord").string(), model = (dir / "model.ckpt").string();
  ASSERT_NO_FATAL_FAILURE(WriteImageRaw(data));
  const std::string train = Strata() + " train --data " + data + " --epochs 1 --steps-per-epoch 2 --batch-per-replica 8" +
                            " --replicas 1 --no-monitor --out " + model;

  auto without = RunCommand(train, /*merge_stderr=*/true);
  EXPECT_NE(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find("'image'"), std::string::npos) << "names the feature it looked for:\n" << without.output;

  auto with = RunCommand(train + " --image-key image_raw --val " + data, /*merge_stderr=*/true);
  ASSERT_EQ(with.exit_code, 0) << with.output;
  EXPECT_NE(with.output.find("test accuracy"), std::string::npos) << "validated on --val:\n" << with.output;

  // The checkpoint remembers the keys: evaluate reads the same file without flags.
  auto eval = RunCommand(Strata() + " evaluate --model " + model + " --data " + data, /*merge_stderr=*/true);
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("accuracy"), std::string::npos) << eval.output;
  fs::remove_all(dir);
}

// A TF-written file whose images do not fit the default model (CIFAR-10: 32x32 RGB PNGs) is
// refused before any step, with one line that names both shapes and the flags to pass.
TEST(FeatureKeysCli, ImagesThatDoNotFitTheModelAreRefusedBeforeAnyWork) {
  const std::string cifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";
  auto r = RunCommand(Strata() + " train --data " + cifar + " --val " + cifar +
                          " --classes 10 --image-size 32 --epochs 1 --batch-per-replica 8 --replicas 1 --no-monitor"
                          " --out /nonexistent/never-written.ckpt",
                      /*merge_stderr=*/true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("[28, 28, 1]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[32, 32, 3]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--image-size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Epoch"), std::string::npos) << "no training started:\n" << r.output;
}

}  // namespace
}  // namespace strata::testing
