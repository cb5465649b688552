// The forward pass of the five applications, and one training step of ResNet50 and MobileNetV2,
// against an independent oracle:
// tests/keras/applications_oracle.py, a PyTorch (float64, NCHW, torch.nn.functional) forward
// written from Keras's definitions, which reads Strata's weights by their Keras names from the
// checkpoint save_weights writes. The oracle sets the batch norms' moving statistics from its
// own pass over this batch (perturbed), gamma, beta and every bias at random, and checks that
// those weights could catch a Keras detail done the other way ('same' / correct_pad padding at
// the start, another batch-norm epsilon, ReLU instead of ReLU6 or swish, no squeeze-excite, the
// stride on ResNet's 3x3, a max pool's 'same' padding as zeros, DenseNet's concatenation order
// or a 'same' average pool); Strata then runs predict (inference mode) with those weights.
//
// The bound: max |strata - torch| <= 1e-4 x max |torch| over the whole output (the logits of
// a linear classifier on 10 classes, batch 2), i.e. relative to the output's largest magnitude.
// The input is 67 x 64 (an odd and an even side, not square) so both parities of correct_pad
// and of 'same' padding are exercised and rows cannot be confused with columns. Xception takes
// 71 x 74 (Keras's minimum side is 71; 74 makes block2_pool's input even: 36 -> 34) and
// DenseNet121 33 x 32 (the transition pools floor the odd side: 9 -> 4), the smallest that
// exercise the same.
//
// TrainStep...: one training step (Model::compute_gradients, Keras's train_step up to
// tape.gradient) against the oracle's float64 autograd on the same weights and batch (labels
// 3 and 7): batch norm in training mode (the batch's mean and biased variance), the sparse
// categorical cross-entropy (ResNet50 ends in softmax, compiled from_logits = false;
// MobileNetV2 in logits, from_logits = true). Compared: the loss (|strata - torch| <= 1e-4 x
// |torch|); the gradient of every trainable variable (per variable, max |strata - torch| <=
// 5e-4 x the variable's scale: its largest |gradient|, or, where the exact gradient is zero (a
// convolution bias or a beta that a training-mode batch norm takes out with the batch mean),
// its layer's kernel or gamma gradient's); and each moving statistic's change in the step
// (momentum 0.99 ResNet50, 0.999 MobileNetV2; the variance update uses the unbiased batch
// variance as TF's fused kernel: per variable, <= 2e-3 x its largest |change|). The oracle
// shows it can tell: moving statistics instead of the batch's, the unbiased variance in the
// normalisation, a summed loss, a backward without the batch statistics' dependence on the
// input (same loss, other gradients), the biased variance or the other momentum in the moving
// averages each move what is compared by more than 10x its bound. (Training mode is chaotic for
// random weights; the oracle's main_train says how it keeps them well conditioned.)
//
// KerasH5WeightsOfMobileNetV2MatchTorch: the same oracle with --keras-h5 makes every weight
// itself (kernels too) and writes them with h5py as Keras's legacy weight file; Strata takes
// them only through keras::LoadKerasWeights (by_name false, with Keras's names and with other
// names: positional; and by_name true), into a model whose parameters are zeroed first, and
// its predict must match the oracle to the same bound. SaveKerasWeights' file of that model is
// then read back with h5py (--check-saved): Keras's layers, weight names, shapes and values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <unistd.h>

#include "strata/data/dataset.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/h5_weights.h"
#include "strata/keras/model.h"

namespace strata::keras {
namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 1e-4;  // the oracle's TOLERANCE too
constexpr int64_t kBatch = 2, kHeight = 67, kWidth = 64, kClasses = 10;
// The oracle's TRAIN_LOSS_TOLERANCE, TRAIN_GRAD_TOLERANCE and MOVING_TOLERANCE.
constexpr double kTrainLossTolerance = 1e-4, kTrainGradTolerance = 5e-4, kMovingTolerance = 2e-3;

std::vector<float> ReadFloats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

void WriteFloats(const fs::path& path, const float* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
}

// Runs the oracle (its arguments after the script) and returns its exit status and output.
std::pair<int, std::string> RunOracle(const std::string& args) {
  const std::string cmd =
      "/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/keras/applications_oracle.py " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "cannot run " + cmd};
  std::string report;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) report.append(buf, n);
  return {pclose(pipe), report};
}

// max |predicted - expected| <= kTolerance x max |expected|, with the figures printed.
void ExpectMatchesOracle(const std::string& what, const Tensor& predicted, const std::vector<float>& expected) {
  ASSERT_EQ(static_cast<int64_t>(expected.size()), predicted.num_elements()) << what;
  double scale = 0, worst = 0;
  int64_t worst_at = 0;
  for (size_t i = 0; i < expected.size(); ++i) scale = std::max(scale, std::abs(double(expected[i])));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(double(predicted.data<float>()[i]) - double(expected[i]));
    if (err > worst || std::isnan(err)) worst = err, worst_at = static_cast<int64_t>(i);
  }
  std::printf("%s: max |strata - torch| = %.3g = %.3g x the output's scale %.4g\n", what.c_str(), worst,
              worst / scale, scale);
  EXPECT_LE(worst, kTolerance * scale) << what << ": output " << worst_at << " is "
                                       << predicted.data<float>()[worst_at] << ", torch says "
                                       << expected[static_cast<size_t>(worst_at)];
}

void MatchesTorch(const std::string& name, float pixel_max, bool keras_h5 = false, int64_t height = kHeight,
                  int64_t width = kWidth) {
  // Per process: another build of this tree may run the same test at the same time.
  const fs::path dir = fs::path(::testing::TempDir()) / ("strata-oracle-" + name + (keras_h5 ? "-h5-" : "-") +
                                                         std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto built = applications::ByName(name, {.input_shape = {height, width, 3}, .classes = kClasses,
                                           .classifier_activation = "linear"});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto& model = *built;
  ASSERT_TRUE(model->compile({.optimizer = optimizers::SGD(0.0),
                              .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})})
                  .ok());
  // The input: uniform pixels ([0, 255] for EfficientNet's Rescaling stem, else [-1, 1]).
  Tensor x(DType::kF32, {kBatch, height, width, 3}), y(DType::kI64, {kBatch});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> pixel(pixel_max > 1 ? 0.0f : -1.0f, pixel_max);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = pixel(rng);
  for (int64_t i = 0; i < kBatch; ++i) y.data<int64_t>()[i] = 0;
  WriteFloats(dir / "input.f32", x.data<float>(), static_cast<size_t>(x.num_elements()));
  std::ofstream(dir / "input.json") << "{\"shape\": [" << kBatch << ", " << height << ", " << width << ", 3]}";
  // compile() made the variables with Strata's initialisers: the kernels the oracle keeps
  // (with --keras-h5 it takes only their names and shapes from this file).
  ASSERT_TRUE(model->save_weights((dir / "init.ckpt").string()).ok());

  const auto [rc, report] = RunOracle(name + " " + dir.string() + (keras_h5 ? " --keras-h5" : ""));
  ASSERT_EQ(rc, 0) << "the oracle failed (needs Debian's python3-torch and python3-h5py, scripts/deps.sh):\n"
                   << report;
  std::cout << report;
  auto data = data::Dataset::from_tensor_slices(data::Element({x, y})).batch(kBatch);
  std::vector<float> expected = ReadFloats(dir / "expected.f32");
  Tensor& params = model->variables()->params();

  if (keras_h5) {
    struct Load {
      const char* file;
      bool by_name;
    };
    // keras_renamed.h5 shares no layer name with the model: only the positional pairing
    // (Keras's model.layers order) can load it.
    for (const Load& load : {Load{"keras.h5", false}, Load{"keras_renamed.h5", false}, Load{"keras.h5", true}}) {
      const std::string what = name + " <- " + load.file + (load.by_name ? " (by_name)" : " (positional)");
      // Zeroed first: a weight the load misses cannot keep a value that happens to fit.
      std::fill(params.data<float>(), params.data<float>() + params.num_elements(), 0.0f);
      auto loaded = LoadKerasWeights(*model, (dir / load.file).string(), {.by_name = load.by_name});
      ASSERT_TRUE(loaded.ok()) << what << ": " << loaded.status().ToString();
      EXPECT_TRUE(loaded->skipped.empty()) << what;
      EXPECT_TRUE(loaded->absent.empty()) << what << ": model layers the file lacks, e.g. " << loaded->absent[0];
      auto predicted = model->predict(data);
      ASSERT_TRUE(predicted.ok()) << what << ": " << predicted.status().ToString();
      ASSERT_EQ(predicted->shape(), Shape({kBatch, kClasses}));
      ExpectMatchesOracle(what, *predicted, expected);
    }
    // Strata's own file of those weights, read back with h5py against the Keras file.
    ASSERT_TRUE(SaveKerasWeights(*model, (dir / "strata.h5").string()).ok());
    const auto [check_rc, check_report] = RunOracle("--check-saved " + dir.string());
    EXPECT_EQ(check_rc, 0) << check_report;
    std::cout << check_report;
    fs::remove_all(dir);
    return;
  }

  // The oracle's weights, in the checkpoint's parameter layout, which is the store's.
  std::vector<float> weights = ReadFloats(dir / "weights.f32");
  ASSERT_EQ(static_cast<int64_t>(weights.size()), params.num_elements());
  std::copy(weights.begin(), weights.end(), params.data<float>());
  auto predicted = model->predict(data);
  ASSERT_TRUE(predicted.ok()) << predicted.status().ToString();
  ASSERT_EQ(predicted->shape(), Shape({kBatch, kClasses}));
  ExpectMatchesOracle(name, *predicted, expected);
  fs::remove_all(dir);
}

// One training step of `name` (see the top): loss, every gradient, every moving statistic's change.
void TrainStepMatchesTorch(const std::string& name, bool softmax, int64_t height = kHeight, int64_t width = kWidth) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("strata-oracle-" + name + "-train-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto built = applications::ByName(name, {.input_shape = {height, width, 3}, .classes = kClasses,
                                           .classifier_activation = softmax ? "softmax" : "linear"});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto& model = *built;
  ASSERT_TRUE(model->compile({.optimizer = optimizers::SGD(0.1),
                              .loss = losses::SparseCategoricalCrossentropy({.from_logits = !softmax})})
                  .ok());
  Tensor x(DType::kF32, {kBatch, height, width, 3}), y(DType::kI64, {kBatch});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = pixel(rng);
  const int64_t labels[kBatch] = {3, 7};
  std::copy(labels, labels + kBatch, y.data<int64_t>());
  WriteFloats(dir / "input.f32", x.data<float>(), static_cast<size_t>(x.num_elements()));
  std::ofstream(dir / "input.json") << "{\"shape\": [" << kBatch << ", " << height << ", " << width
                                    << ", 3], \"labels\": [" << labels[0] << ", " << labels[1]
                                    << "], \"from_logits\": " << (softmax ? "false" : "true") << "}";
  ASSERT_TRUE(model->save_weights((dir / "init.ckpt").string()).ok());
  const auto [rc, report] = RunOracle(name + " " + dir.string() + " --train");
  ASSERT_EQ(rc, 0) << "the oracle failed (needs Debian's python3-torch, scripts/deps.sh):\n" << report;
  std::cout << report;

  backend::VariableStore& store = *model->variables();
  Tensor& params = store.params();
  const std::vector<float> weights = ReadFloats(dir / "weights.f32");
  ASSERT_EQ(static_cast<int64_t>(weights.size()), params.num_elements());
  std::copy(weights.begin(), weights.end(), params.data<float>());
  auto tape = model->compute_gradients(data::Element({x, y}));
  ASSERT_TRUE(tape.ok()) << tape.status().ToString();

  // The loss.
  const std::vector<float> loss = ReadFloats(dir / "loss.f32");
  ASSERT_EQ(loss.size(), 1u);
  const double loss_error = std::abs(tape->loss - double(loss[0])) / std::abs(double(loss[0]));
  std::printf("%s train step: loss %.7g, torch %.7g: |strata - torch| = %.3g x torch's\n", name.c_str(), tape->loss,
              double(loss[0]), loss_error);
  EXPECT_LE(loss_error, kTrainLossTolerance) << name << ": loss " << tape->loss << ", torch says " << loss[0];

  // Every trainable variable's gradient, each against its own scale.
  const std::vector<float> grads = ReadFloats(dir / "grads.f32");
  ASSERT_EQ(static_cast<int64_t>(grads.size()), store.num_trainable());
  std::map<std::string, double> scales;
  {
    std::ifstream in(dir / "grad_scales.txt");
    std::string var;
    double scale;
    while (in >> var >> scale) scales[var] = scale;
  }
  const float* got = model->gradients().data<float>();
  double worst = 0;
  std::string worst_var;
  int compared = 0, failed = 0;
  std::ostringstream failures;  // the first few
  for (const auto& e : store.entries()) {
    if (!e.trainable) continue;
    ASSERT_TRUE(scales.count(e.name)) << "the oracle gave no gradient scale for " << e.name;
    const double scale = scales[e.name];
    ASSERT_GT(scale, 0) << e.name;
    double err = 0;
    int64_t at = 0;
    for (int64_t i = e.offset; i < e.offset + e.size; ++i) {
      const double d = std::abs(double(got[i]) - double(grads[static_cast<size_t>(i)]));
      if (d > err || std::isnan(d)) err = d, at = i;
    }
    if (!(err <= kTrainGradTolerance * scale) && ++failed <= 5)
      failures << "\n  " << e.name << " element " << at - e.offset << ": " << got[at] << ", torch says "
               << grads[static_cast<size_t>(at)] << " (" << err / scale << " x the variable's scale " << scale << ")";
    if (err / scale > worst || std::isnan(err)) worst = err / scale, worst_var = e.name;
    ++compared;
  }
  std::printf("%s train step: %d gradients, worst max |strata - torch| = %.3g x its scale (%s)\n", name.c_str(),
              compared, worst, worst_var.c_str());
  EXPECT_EQ(failed, 0) << name << ": " << failed << " of " << compared << " gradients off by more than "
                       << kTrainGradTolerance << " x their scale, e.g." << failures.str();

  // Every moving statistic's change in the step (the state block, after the trainable one).
  const std::vector<float> delta = ReadFloats(dir / "moving_delta.f32");
  const int64_t num_trainable = store.num_trainable();
  ASSERT_EQ(static_cast<int64_t>(delta.size()), params.num_elements() - num_trainable);
  double worst_moving = 0;
  std::string worst_moving_var;
  int moving = 0, moving_failed = 0;
  std::ostringstream moving_failures;
  for (const auto& e : store.entries()) {
    if (e.trainable) continue;
    double scale = 0, err = 0;
    int64_t at = 0;
    for (int64_t i = e.offset; i < e.offset + e.size; ++i)
      scale = std::max(scale, std::abs(double(delta[static_cast<size_t>(i - num_trainable)])));
    ASSERT_GT(scale, 0) << e.name;
    for (int64_t i = e.offset; i < e.offset + e.size; ++i) {
      const double change = double(params.data<float>()[i]) - double(weights[static_cast<size_t>(i)]);
      const double d = std::abs(change - double(delta[static_cast<size_t>(i - num_trainable)]));
      if (d > err || std::isnan(d)) err = d, at = i;
    }
    if (!(err <= kMovingTolerance * scale) && ++moving_failed <= 5)
      moving_failures << "\n  " << e.name << " element " << at - e.offset << " moved by "
                      << double(params.data<float>()[at]) - double(weights[static_cast<size_t>(at)])
                      << ", torch says " << delta[static_cast<size_t>(at - num_trainable)] << " (" << err / scale
                      << " x the variable's scale " << scale << ")";
    if (err / scale > worst_moving || std::isnan(err)) worst_moving = err / scale, worst_moving_var = e.name;
    ++moving;
  }
  std::printf("%s train step: %d moving statistics, worst max |change - torch's| = %.3g x its scale (%s)\n",
              name.c_str(), moving, worst_moving, worst_moving_var.c_str());
  EXPECT_EQ(moving_failed, 0) << name << ": " << moving_failed << " of " << moving
                              << " moving statistics changed by more than " << kMovingTolerance
                              << " x their scale off torch's, e.g." << moving_failures.str();
  fs::remove_all(dir);
}

TEST(ApplicationsOracle, ResNet50ForwardMatchesTorch) { MatchesTorch("resnet50", 1.0f); }
TEST(ApplicationsOracle, MobileNetV2ForwardMatchesTorch) { MatchesTorch("mobilenet_v2", 1.0f); }
TEST(ApplicationsOracle, EfficientNetB0ForwardMatchesTorch) { MatchesTorch("efficientnet_b0", 255.0f); }
TEST(ApplicationsOracle, XceptionForwardMatchesTorch) { MatchesTorch("xception", 1.0f, false, 71, 74); }
TEST(ApplicationsOracle, DenseNet121ForwardMatchesTorch) { MatchesTorch("densenet121", 1.0f, false, 33, 32); }
TEST(ApplicationsOracle, TrainStepOfResNet50MatchesTorch) { TrainStepMatchesTorch("resnet50", /*softmax=*/true); }
TEST(ApplicationsOracle, TrainStepOfMobileNetV2MatchesTorch) {
  TrainStepMatchesTorch("mobilenet_v2", /*softmax=*/false);
}
TEST(ApplicationsOracle, KerasH5WeightsOfMobileNetV2MatchTorch) {
  MatchesTorch("mobilenet_v2", 1.0f, /*keras_h5=*/true);
}

}  // namespace
}  // namespace strata::keras
