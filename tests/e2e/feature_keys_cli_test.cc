// --image-key and --label-key reach the input pipeline of `strata train`, `evaluate` and
// `predict` (with --id-key): a TFRecord file whose features are named as in many
// TensorFlow-written files (`image_raw`, `label`) trains and evaluates, and without the flag
// the error names the feature it missed; a real TF-written file with other names again
// (deeplab's `image/encoded`, `image/filename`) is evaluated and predicted with the flags.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

  // The command with --preset flowers: the recipe's model (the small one here) built
  // for the file's gray images at --image-size and its --classes, validated with macro F1.
  auto preset = RunCommand(Strata() + " train --preset flowers --model flowers-cnn --data " + data + " --val " + data +
                               " --image-key image_raw --label-key label --classes 10 --image-size 64 --epochs 1" +
                               " --steps-per-epoch 2 --batch-per-replica 8 --replicas 1 --no-monitor --out " +
                               (dir / "preset.ckpt").string(),
                           /*merge_stderr=*/true);
  ASSERT_EQ(preset.exit_code, 0) << preset.output;
  EXPECT_NE(preset.output.find("model flowers-cnn built for input_shape [64, 64, 1]"), std::string::npos) << preset.output;
  EXPECT_NE(preset.output.find("val macro F1"), std::string::npos) << preset.output;

  // The checkpoint remembers the keys: evaluate reads the same file without flags.
  auto eval = RunCommand(Strata() + " evaluate --model " + model + " --data " + data, /*merge_stderr=*/true);
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("accuracy"), std::string::npos) << eval.output;
  fs::remove_all(dir);
}

// --image-key, --label-key and --id-key of evaluate and predict, on the real TF-written deeplab
// file (3 JPEGs under `image/encoded`, names under `image/filename`; its int64
// `image/channels`, 3 for every image, serves as the label): a model trained on the other
// layout reads it with the flags, and without them the error names the missing feature.
TEST(FeatureKeysCli, EvaluateAndPredictReadARealFileWithOtherFeatureNames) {
  const fs::path dir = fs::temp_directory_path() / ("strata_keys_eval_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";
  const std::string voc = std::string(STRATA_TESTDATA) + "/real/tf-models_deeplab_pascal_voc_seg_val-00000-of-00001.tfrecord";
  const std::string model = (dir / "model.ckpt").string(), csv = (dir / "sub.csv").string();
  auto train = RunCommand(Strata() + " train --data " + cifar + " --image-size 32 --epochs 1 --steps-per-epoch 2" +
                              " --batch-per-replica 8 --replicas 1 --no-monitor --out " + model,
                          true);
  ASSERT_EQ(train.exit_code, 0) << train.output;

  auto eval_plain = RunCommand(Strata() + " evaluate --model " + model + " --data " + voc, true);
  EXPECT_NE(eval_plain.exit_code, 0) << eval_plain.output;
  EXPECT_NE(eval_plain.output.find("'image'"), std::string::npos) << eval_plain.output;
  auto eval = RunCommand(Strata() + " evaluate --model " + model + " --data " + voc +
                             " --image-key image/encoded --label-key image/channels",
                         true);
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("evaluated 3 images"), std::string::npos) << eval.output;

  auto predict_plain = RunCommand(Strata() + " predict --model " + model + " --data " + voc + " --out " + csv, true);
  EXPECT_NE(predict_plain.exit_code, 0) << predict_plain.output;
  auto predict = RunCommand(Strata() + " predict --model " + model + " --data " + voc + " --out " + csv +
                                " --image-key image/encoded --id-key image/filename",
                            true);
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  std::ifstream in(csv);
  std::string header, a, b, c;
  std::getline(in, header);
  std::getline(in, a);
  std::getline(in, b);
  std::getline(in, c);
  EXPECT_EQ(header, "id,label");
  EXPECT_EQ(a.substr(0, a.find(',')), "2007_000033");  // the file's order (the deeplab test's expectation)
  EXPECT_EQ(b.substr(0, b.find(',')), "2007_000042");
  EXPECT_EQ(c.substr(0, c.find(',')), "2007_000061");

  // --id-key '': rows numbered in file order, for files without ids.
  auto numbered = RunCommand(Strata() + " predict --model " + model + " --data " + voc + " --out " + csv +
                                 " --image-key image/encoded --id-key ''",
                             true);
  ASSERT_EQ(numbered.exit_code, 0) << numbered.output;
  std::ifstream in2(csv);
  std::getline(in2, header);
  std::getline(in2, a);
  std::getline(in2, b);
  EXPECT_EQ(a.substr(0, a.find(',')), "0");
  EXPECT_EQ(b.substr(0, b.find(',')), "1");
  fs::remove_all(dir);
}

// A TF-written file whose images do not fit a spec file's input (CIFAR-10: 32x32 RGB PNGs; the
// reference CNN's spec file: 28x28x1) is refused before any step, with one line that names both
// shapes and the flags to pass. (A built-in model is built for the input instead:
// flags_train_test.cc.)
TEST(FeatureKeysCli, ImagesThatDoNotFitTheModelAreRefusedBeforeAnyWork) {
  const std::string cifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";
  auto r = RunCommand(Strata() + " train --data " + cifar + " --val " + cifar + " --model " + STRATA_SOURCE_DIR +
                          "/models/reference-cnn.json --classes 10 --image-size 32 --epochs 1 --batch-per-replica 8"
                          " --replicas 1 --no-monitor --out /nonexistent/never-written.ckpt",
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
