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

void MatchesTorch(const std::string& name, float pixel_max) {
  // Per process: another build of this tree may run the same test at the same time.
  const fs::path dir = fs::path(::testing::TempDir()) / ("strata-oracle-" + name + "-" + std::to_string(getpid()));
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
  // compile() made the variables with Strata's initialisers: the kernels the oracle keeps.
  ASSERT_TRUE(model->save_weights((dir / "init.ckpt").string()).ok());

  const std::string cmd = "/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) +
                          "/tests/keras/applications_oracle.py " + name + " " + dir.string() + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string report;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) report.append(buf, n);
  const int rc = pclose(pipe);
  ASSERT_EQ(rc, 0) << "the oracle failed (needs Debian's python3-torch, scripts/deps.sh):\n" << report;
  std::cout << report;

  // The oracle's weights, in the checkpoint's parameter layout, which is the store's.
  std::vector<float> weights = ReadFloats(dir / "weights.f32");
  Tensor& params = model->variables()->params();
  ASSERT_EQ(static_cast<int64_t>(weights.size()), params.num_elements());
  std::copy(weights.begin(), weights.end(), params.data<float>());
  auto data = data::Dataset::from_tensor_slices(data::Element({x, y})).batch(kBatch);
  auto predicted = model->predict(data);
  ASSERT_TRUE(predicted.ok()) << predicted.status().ToString();
  ASSERT_EQ(predicted->shape(), Shape({kBatch, kClasses}));
  std::vector<float> expected = ReadFloats(dir / "expected.f32");
  ASSERT_EQ(static_cast<int64_t>(expected.size()), predicted->num_elements());
  double scale = 0, worst = 0;
  int64_t worst_at = 0;
  for (size_t i = 0; i < expected.size(); ++i) scale = std::max(scale, std::abs(double(expected[i])));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(double(predicted->data<float>()[i]) - double(expected[i]));
    if (err > worst || std::isnan(err)) worst = err, worst_at = static_cast<int64_t>(i);
  }
  std::printf("%s: max |strata - torch| = %.3g = %.3g x the output's scale %.4g\n", name.c_str(), worst,
              worst / scale, scale);
  EXPECT_LE(worst, kTolerance * scale) << name << ": output " << worst_at << " is "
                                       << predicted->data<float>()[worst_at] << ", torch says "
                                       << expected[static_cast<size_t>(worst_at)];
  fs::remove_all(dir);
}

TEST(ApplicationsOracle, ResNet50ForwardMatchesTorch) { MatchesTorch("resnet50", 1.0f); }
TEST(ApplicationsOracle, MobileNetV2ForwardMatchesTorch) { MatchesTorch("mobilenet_v2", 1.0f); }
TEST(ApplicationsOracle, EfficientNetB0ForwardMatchesTorch) { MatchesTorch("efficientnet_b0", 255.0f); }

}  // namespace
}  // namespace strata::keras
