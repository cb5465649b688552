// The forward pass of ResNet50, MobileNetV2 and EfficientNetB0 against an independent oracle:
// tests/keras/applications_oracle.py, a PyTorch (float64, NCHW, torch.nn.functional) forward
// written from Keras's definitions, which reads Strata's weights by their Keras names from the
// checkpoint save_weights writes. The oracle sets the batch norms' moving statistics from its
// own pass over this batch (perturbed), gamma, beta and every bias at random, and checks that
// those weights could catch a Keras detail done the other way ('same' / correct_pad padding at
// the start, another batch-norm epsilon, ReLU instead of ReLU6 or swish, no squeeze-excite, the
// stride on ResNet's 3x3); Strata then runs predict (inference mode) with those weights.
//
// The bound: max |strata - torch| <= 1e-4 x max |torch| over the whole output (the logits of
// a linear classifier on 10 classes, batch 2), i.e. relative to the output's largest magnitude.
// The input is 67 x 64 (an odd and an even side, not square) so both parities of correct_pad
// and of 'same' padding are exercised and rows cannot be confused with columns.
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

void MatchesTorch(const std::string& name, float pixel_max, bool keras_h5 = false) {
  // Per process: another build of this tree may run the same test at the same time.
  const fs::path dir = fs::path(::testing::TempDir()) / ("strata-oracle-" + name + (keras_h5 ? "-h5-" : "-") +
                                                         std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto built = applications::ByName(name, {.input_shape = {kHeight, kWidth, 3}, .classes = kClasses,
                                           .classifier_activation = "linear"});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto& model = *built;
  ASSERT_TRUE(model->compile({.optimizer = optimizers::SGD(0.0),
                              .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})})
                  .ok());
  // The input: uniform pixels ([0, 255] for EfficientNet's Rescaling stem, else [-1, 1]).
  Tensor x(DType::kF32, {kBatch, kHeight, kWidth, 3}), y(DType::kI64, {kBatch});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> pixel(pixel_max > 1 ? 0.0f : -1.0f, pixel_max);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = pixel(rng);
  for (int64_t i = 0; i < kBatch; ++i) y.data<int64_t>()[i] = 0;
  WriteFloats(dir / "input.f32", x.data<float>(), static_cast<size_t>(x.num_elements()));
  std::ofstream(dir / "input.json") << "{\"shape\": [" << kBatch << ", " << kHeight << ", " << kWidth << ", 3]}";
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

TEST(ApplicationsOracle, ResNet50ForwardMatchesTorch) { MatchesTorch("resnet50", 1.0f); }
TEST(ApplicationsOracle, MobileNetV2ForwardMatchesTorch) { MatchesTorch("mobilenet_v2", 1.0f); }
TEST(ApplicationsOracle, EfficientNetB0ForwardMatchesTorch) { MatchesTorch("efficientnet_b0", 255.0f); }
TEST(ApplicationsOracle, KerasH5WeightsOfMobileNetV2MatchTorch) {
  MatchesTorch("mobilenet_v2", 1.0f, /*keras_h5=*/true);
}

}  // namespace
}  // namespace strata::keras
