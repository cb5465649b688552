// `strata export --format onnx` checked by runtimes that share no code with Strata:
//   - onnxruntime-node (npm, pinned by onnx/package-lock.json, installed into the build tree
//     with `npm ci --ignore-scripts` by remote/install_tfrecords_reader.sh) runs the exported
//     file on the same images `strata predict --probabilities` reads (PNG records this test
//     writes; the runtime gets their pixels / 255, Strata's decode) and its probabilities must
//     equal predict's to 1e-4 (onnx/run_onnx.js); so must its logits, before the softmax (the
//     final Softmax's input, made an output of a copy by onnx/add_logits_output.py), to 1e-3
//     against predict's log-probabilities, both centred per image; and the logits must vary
//     across the images, so a model with a constant output cannot pass;
//   - Debian's python3-onnx checker (onnx.checker.check_model, full_check) accepts every file
//     (onnx/check_onnx.py).
// Models: the reference CNN, the flowers Xception spec (models/flowers-xception.json) and the
// MobileNetV2 application, each trained 20 steps (so batch norm's moving statistics are no
// longer 0 and 1) at a small image size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "cli_support.h"
#include "strata/graph/graph.h"
#include "strata/image/png.h"
#include "strata/data/dataset.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/layers.h"
#include "strata/keras/model.h"
#include "strata/keras/onnx_export.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::RunCommand;
using testing::Strata;

constexpr int kClasses = 4;
constexpr int kImages = 6;

// Each row minus its mean: logits as the softmax sees them (it drops a constant per row).
std::vector<std::vector<double>> Centred(std::vector<std::vector<double>> rows) {
  for (auto& row : rows) {
    double mean = 0;
    for (double v : row) mean += v / static_cast<double>(row.size());
    for (double& v : row) v -= mean;
  }
  return rows;
}

// onnxruntime's logits against Strata's, to `tolerance`, and the logits vary across the
// images (by more than `tolerance` somewhere), so a model with a constant output cannot pass.
// `must_vary` false: a model whose inference output is constant after a short training (see
// MobileNetV2 below); the spread is printed, not required.
void ExpectSameVaryingLogits(const std::vector<std::vector<double>>& ort, const std::vector<std::vector<double>>& ours,
                             double tolerance, const std::string& what, bool must_vary = true) {
  ASSERT_EQ(ort.size(), ours.size()) << what;
  double worst = 0, spread = 0;
  for (size_t i = 0; i < ort.size(); ++i) {
    ASSERT_EQ(ort[i].size(), ours[i].size()) << what;
    for (size_t k = 0; k < ort[i].size(); ++k) {
      worst = std::max(worst, std::fabs(ort[i][k] - ours[i][k]));
      spread = std::max(spread, std::fabs(ours[i][k] - ours[0][k]));
      EXPECT_NEAR(ort[i][k], ours[i][k], tolerance) << what << " image " << i << " class " << k;
    }
  }
  std::printf("%s: logits, largest |onnxruntime - strata| = %.2e; across the images they vary by up to %.3g\n", what.c_str(),
              worst, spread);
  if (must_vary) {
    EXPECT_GT(spread, tolerance) << what << ": the same logits for every image";
  }
}

// A [n, k] f32 tensor as rows of doubles.
std::vector<std::vector<double>> Rows(const Tensor& t, int n, int k) {
  std::vector<std::vector<double>> rows(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(k)));
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < k; ++c) rows[static_cast<size_t>(i)][static_cast<size_t>(c)] = t.data<float>()[i * k + c];
  return rows;
}

std::vector<std::vector<double>> Rows(const nlohmann::json& rows) {
  std::vector<std::vector<double>> r;
  for (const auto& row : rows) r.push_back(row.get<std::vector<double>>());
  return r;
}

class ExportOnnx : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("strata_export_onnx_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    install_ = RunCommand(std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/install_tfrecords_reader.sh " +
                          std::string(STRATA_EXAMPLES_DIR) + "/../npm-onnxruntime " + STRATA_SOURCE_DIR +
                          "/tests/e2e/onnx onnxruntime-node/package.json");
    make_ = RunCommand(Strata() + " make-records --from generated-flowers --classes " + std::to_string(kClasses) +
                           " --per-class 8 --val-per-class 2 --test-per-class 2 --image-size 40 --out " +
                           dir_->string() + " --quiet",
                       true);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }

  // n images [n, side, side, 3] with element e = ((e * 7919) % modulus) / (modulus - 1), written
  // raw to `f32` (run_onnx.js's input) and given to `model`'s predict() in batches of `batch`:
  // its outputs.
  static Result<Tensor> PredictTestImages(keras::Model& model, int n, int side, int modulus, int batch,
                                          const std::string& f32) {
    Tensor images(DType::kF32, Shape{n, side, side, 3});
    float* px = images.data<float>();
    for (int64_t i = 0; i < images.num_elements(); ++i)
      px[i] = static_cast<float>((i * 7919) % modulus) / static_cast<float>(modulus - 1);
    std::ofstream(f32, std::ios::binary)
        .write(reinterpret_cast<const char*>(px), static_cast<std::streamsize>(images.num_elements() * 4));
    data::Element e;
    e.tensors.push_back(images);
    return model.predict(data::Dataset::from_tensor_slices(std::move(e)).batch(batch));
  }

  // kImages RGB images of side `size` with every pixel value in use, as PNG records (`image`,
  // `id`) in images.tfrec, and their pixels / 255 as float32 [N, S, S, 3] in images.f32.
  static void WriteImages(int size) {
    auto w = record::RecordWriter::Open(Path("images.tfrec"));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::ofstream raw(Path("images.f32"), std::ios::binary);
    for (int i = 0; i < kImages; ++i) {
      std::vector<uint8_t> px(static_cast<size_t>(size) * size * 3);
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
          for (int c = 0; c < 3; ++c)
            px[(static_cast<size_t>(y) * size + x) * 3 + c] =
                static_cast<uint8_t>((x * (37 + 11 * i) + y * (53 + 7 * c) + (x * y) % (13 + i) + 40 * c + 17 * i) % 256);
      std::string png;
      ASSERT_TRUE(image::EncodePng({px.data(), size, size, 3, size * 3}, {}, &png).ok());
      record::Example e;
      e.features["image"] = record::Feature::Bytes({png});
      e.features["id"] = record::Feature::Bytes({"img" + std::to_string(i)});
      ASSERT_TRUE((*w)->WriteRecord(record::EncodeExample(e)).ok());
      for (uint8_t v : px) {
        const float f = static_cast<float>(v) / 255.0f;
        raw.write(reinterpret_cast<const char*>(&f), 4);
      }
    }
    ASSERT_TRUE((*w)->Close().ok());
  }

  // Runs `onnx` in onnxruntime-node (onnx/run_onnx.js) on `n` float32 images [n, h, w, 3]
  // from `images` and returns what it prints; a run that fails is a failed expectation and a
  // discarded JSON.
  static nlohmann::json RunOnnx(const std::string& onnx, const std::string& images, int n, int h, int w) {
    const std::string ort_dir = install_.output.substr(0, install_.output.find('\n'));
    auto run = RunCommand("NODE_PATH=" + ort_dir + "/node_modules node " + std::string(STRATA_SOURCE_DIR) +
                              "/tests/e2e/onnx/run_onnx.js " + onnx + " " + images + " " + std::to_string(n) + " " +
                              std::to_string(h) + " " + std::to_string(w) + " 3",
                          true);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    auto j = nlohmann::json::parse(run.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << run.output;
    return j;
  }

  // onnxruntime's logits for `onnx` on the images (as RunOnnx): the final Softmax's input, read
  // from a copy at `copy` that also outputs it (onnx/add_logits_output.py). Empty, and a failed
  // expectation, when either step fails.
  static std::vector<std::vector<double>> OnnxLogits(const std::string& onnx, const std::string& copy,
                                                     const std::string& images, int n, int h, int w) {
    auto add = RunCommand("/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/onnx/add_logits_output.py " +
                              onnx + " " + copy,
                          true);
    EXPECT_EQ(add.exit_code, 0) << add.output;
    if (add.exit_code != 0) return {};
    const std::string name = add.output.substr(0, add.output.find('\n'));
    const nlohmann::json j = RunOnnx(copy, images, n, h, w);
    if (j.is_discarded() || !j["outputs"].contains(name)) {
      ADD_FAILURE() << copy << ": no output " << name << " in " << j.dump();
      return {};
    }
    return Rows(j["outputs"][name]);
  }

  // Trains `model` a few steps at `size` px, exports it, checks it with python3-onnx, runs it
  // with onnxruntime-node on the test images and compares with `strata predict --probabilities`.
  // `classes`: the outputs the model has (--classes for models that take it; 0: the spec's own).
  void ExportAndCompare(const std::string& model, int size, int classes, int spec_classes = 0, bool must_vary = true) {
    ASSERT_EQ(install_.exit_code, 0) << "npm ci of onnxruntime-node failed (needs node/npm and the npm registry)";
    ASSERT_EQ(make_.exit_code, 0) << make_.output;
    const std::string stem = fs::path(model).stem().string();
    const std::string ckpt = Path(stem + ".ckpt"), onnx = Path(stem + ".onnx");
    const int k_out = spec_classes ? spec_classes : classes;
    auto train = RunCommand(Strata() + " train --preset flowers --model " + model + " --image-size " +
                                std::to_string(size) + (spec_classes ? "" : " --classes " + std::to_string(classes)) +
                                " --data '" +
                                Path("train/*.tfrec") + "' --epochs 1 --steps-per-epoch 20 --batch-per-replica 4" +
                                " --replicas 2 --warmup-epochs 0 --precision f32 --seed 7 --deterministic --no-monitor" +
                                " --out " + ckpt,
                            true);
    ASSERT_EQ(train.exit_code, 0) << train.output;
    auto exp = RunCommand(Strata() + " export --model " + ckpt + " --format onnx --out " + onnx, true);
    ASSERT_EQ(exp.exit_code, 0) << exp.output;
    const std::string side = std::to_string(size);
    EXPECT_NE(exp.output.find("input `input` float32 [N, " + side + ", " + side + ", 3]"), std::string::npos) << exp.output;

    auto check = RunCommand("/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/onnx/check_onnx.py " + onnx, true);
    ASSERT_EQ(check.exit_code, 0) << "python3-onnx's checker rejects " << onnx << ":\n" << check.output;
    EXPECT_NE(check.output.find("ok opset 13 input input ['N', " + side + ", " + side + ", 3] output probabilities"),
              std::string::npos)
        << check.output;

    WriteImages(size);
    auto pred = RunCommand(Strata() + " predict --model " + ckpt + " --data " + Path("images.tfrec") + " --out " +
                               Path("pred.csv") + " --probabilities --batch 4",
                           true);
    ASSERT_EQ(pred.exit_code, 0) << pred.output;
    std::ifstream csv(Path("pred.csv"));
    std::string line;
    std::getline(csv, line);  // id,label,prob_0..
    std::vector<std::vector<double>> strata_probs;
    while (std::getline(csv, line)) {
      std::stringstream ss(line);
      std::string cell;
      std::vector<double> row;
      for (int col = 0; std::getline(ss, cell, ','); ++col)
        if (col >= 2) row.push_back(std::stod(cell));
      strata_probs.push_back(row);
    }
    ASSERT_EQ(strata_probs.size(), static_cast<size_t>(kImages));

    const auto j = RunOnnx(onnx, Path("images.f32"), kImages, size, size);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["input"], "input");
    EXPECT_EQ(j["output"], "probabilities");
    const auto& ort = j["probabilities"];
    ASSERT_EQ(ort.size(), static_cast<size_t>(kImages)) << j.dump();
    double worst = 0;
    for (int i = 0; i < kImages; ++i) {
      ASSERT_EQ(ort[i].size(), static_cast<size_t>(k_out));
      ASSERT_EQ(strata_probs[i].size(), static_cast<size_t>(k_out));
      for (int k = 0; k < k_out; ++k) {
        const double d = std::fabs(ort[i][k].get<double>() - strata_probs[i][k]);
        worst = std::max(worst, d);
        EXPECT_NEAR(ort[i][k].get<double>(), strata_probs[i][k], 1e-4) << model << " image " << i << " class " << k;
      }
    }
    std::printf("%s: %d images, largest |onnxruntime - strata predict| = %.2e\n", model.c_str(), kImages, worst);

    // Before the softmax: a copy of the file that also outputs the final Softmax's input.
    // Strata's logits are predict's log-probabilities up to a constant per image (printed to 6
    // significant digits: about 1e-5 in the log), so both sides are centred.
    const auto ort_logits = OnnxLogits(onnx, Path(stem + "-logits.onnx"), Path("images.f32"), kImages, size, size);
    ASSERT_FALSE(ort_logits.empty());
    std::vector<std::vector<double>> log_probs = strata_probs;
    for (auto& row : log_probs)
      for (double& p : row) {
        ASSERT_GT(p, 0) << model << ": a probability printed as 0 has no logarithm";
        p = std::log(p);
      }
    ExpectSameVaryingLogits(Centred(ort_logits), Centred(log_probs), 1e-3, model, must_vary);
  }

  static fs::path* dir_;
  static CommandResult install_, make_;
};
fs::path* ExportOnnx::dir_ = nullptr;
CommandResult ExportOnnx::install_, ExportOnnx::make_;

TEST_F(ExportOnnx, ReferenceCnnMatchesPredictInOnnxRuntime) { ExportAndCompare("reference-cnn", 28, kClasses); }
// The spec file keeps its 104-way classifier (the competition's classes); the records use 4 of them.
TEST_F(ExportOnnx, FlowersXceptionSpecMatchesPredictInOnnxRuntime) {
  ExportAndCompare(std::string(STRATA_SOURCE_DIR) + "/models/flowers-xception.json", 32, kClasses, 104);
}
// After 20 steps MobileNetV2's batch norms (momentum 0.999) still hold moving statistics near
// their initial 0 and 1, so at inference the activations grow through its 52 layers until every
// ReLU6 saturates and every image gets the same logits (measured: a spread of 0). The export is
// compared value for value all the same; that its outputs follow the input is shown by the
// other three models (a constant-output export fails them).
TEST_F(ExportOnnx, MobileNetV2ApplicationMatchesPredictInOnnxRuntime) {
  ExportAndCompare("mobilenet_v2", 32, kClasses, 0, /*must_vary=*/false);
}

// The Vision Transformer (ViTS16 at 32 px: 2 x 2 patches and the class token, fresh weights,
// logits out): its class token and position embedding given to every image of the file's
// symbolic batch (Expand to [N, ...]), its attention's batch merged with the tokens and split
// again. onnxruntime's logits match predict()'s to 1e-4 and vary across the images.
TEST_F(ExportOnnx, VisionTransformerMatchesPredictInOnnxRuntime) {
  ASSERT_EQ(install_.exit_code, 0) << "npm ci of onnxruntime-node failed (needs node/npm and the npm registry)";
  auto model = keras::applications::ViTS16({.input_shape = {32, 32, 3}, .classes = 5, .classifier_activation = "linear"});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE((*model)->compile({.loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})}).ok());
  constexpr int kN = 4;
  // 251: prime, so that no two images (3,072 values each) repeat each other.
  auto out = PredictTestImages(**model, kN, 32, 251, kN, Path("vit.f32"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(keras::SaveOnnx(**model, Path("vit.onnx")).ok());
  const auto ort_logits = OnnxLogits(Path("vit.onnx"), Path("vit-logits.onnx"), Path("vit.f32"), kN, 32, 32);
  ASSERT_FALSE(ort_logits.empty());
  ExpectSameVaryingLogits(ort_logits, Rows(*out, kN, 5), 1e-4, "vit_s16");
}

TEST(ExportOnnxFlags, FormatAndRequiredFlagsAreUsageErrors) {
  auto r = RunCommand(Strata() + " export --model reference-cnn --out /tmp/x.onnx --format tflite", true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--format must be onnx, got 'tflite'"), std::string::npos) << r.output;
  r = RunCommand(Strata() + " export --model reference-cnn", true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model and --out are required"), std::string::npos) << r.output;
  r = RunCommand(Strata() + " export --model /nonexistent/model.ckpt --out /tmp/x.onnx", true);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/model.ckpt"), std::string::npos) << r.output;
}

// Every layer the mapping table lists, in one small functional model (fresh weights, ending in
// logits so the export adds the softmax): its exported file run by onnxruntime-node gives
// predict()'s outputs, softmaxed, to 1e-4, and python3-onnx's checker accepts it.
TEST_F(ExportOnnx, EveryMappedLayerMatchesPredictInOnnxRuntime) {
  ASSERT_EQ(install_.exit_code, 0) << "npm ci of onnxruntime-node failed (needs node/npm and the npm registry)";
  namespace L = keras::layers;
  keras::KTensor x = keras::Input({8, 8, 3});
  auto t = keras::Call(L::Rescaling(2.0f, -1.0f), x);
  t = keras::Call(L::Normalization({.mean = {0.1f, -0.2f, 0.3f}, .variance = {1.0f, 2.0f, 0.5f}}), t);
  t = keras::Call(L::ZeroPadding2D({.top = 1, .bottom = 0, .left = 0, .right = 1}), t);  // [9, 9, 3]
  t = keras::Call(L::DepthwiseConv2D(3, {.padding = "same", .depth_multiplier = 2, .dilation_rate = 2, .activation = "gelu"}), t);
  t = keras::Call(L::Conv2D(4, 3, {.strides = 2, .padding = "same", .activation = "swish"}), t);  // [5, 5, 4]
  // InceptionResNetV2's block: 1x3 and 3x1 convolutions, a batch norm without gamma, the scaled
  // residual; NASNet's one-pixel shift (pad, then crop).
  auto r = keras::Call(L::Conv2D(4, {1, 3}, {.padding = "same", .use_bias = false}), t);
  r = keras::Call(L::BatchNormalization({.scale = false}), r);
  r = keras::Call(L::Conv2D(4, {3, 1}, {.padding = "same"}), r);
  t = keras::Call(L::CustomScaleLayer(0.3f), {t, r});
  t = keras::Call(L::ZeroPadding2D({.top = 0, .bottom = 1, .left = 0, .right = 1}), t);     // [6, 6, 4]
  t = keras::Call(L::Cropping2D({.top = 1, .bottom = 0, .left = 1, .right = 0}), t);        // [5, 5, 4]
  t = keras::Call(L::BatchNormalization(), t);
  t = keras::Call(L::LayerNormalization({.epsilon = 1e-5f}), t);  // over the channels: NCHW's axis 1
  t = keras::Call(L::ReLU(L::ReLUOptions{.max_value = 4, .negative_slope = 0.1f}), t);
  auto hs = keras::Call(L::Activation("hard_sigmoid"), t);
  auto th = keras::Call(L::Activation("tanh"), t);
  auto hw = keras::Call(L::Activation("hard_swish"), t);
  auto cat = keras::Call(L::Concatenate(), {hs, th, hw});  // [5, 5, 12]
  auto se = keras::Call(L::GlobalAveragePooling2D(), cat);
  se = keras::Call(L::Reshape({1, 1, 12}), se);
  se = keras::Call(L::Activation("hard_sigmoid_keras3"), se);  // MobileNetV3's gate
  se = keras::Call(L::Activation("sigmoid"), se);
  auto scaled = keras::Call(L::Multiply(), {cat, se});  // broadcast [5, 5, 12] * [1, 1, 12]
  auto avg = keras::Call(L::AveragePooling2D({.pool_size = 2, .padding = "same"}), scaled);  // [3, 3, 12]
  auto mx = keras::Call(L::MaxPooling2D({.pool_size = 3, .strides = 2, .padding = "same"}), scaled);  // [3, 3, 12]
  auto sum = keras::Call(L::Add(), {avg, mx});
  auto conv = keras::Call(L::Conv2D(6, 1, {.activation = "relu6"}), sum);
  auto flat = keras::Call(L::Flatten(), conv);  // 54
  auto gmax = keras::Call(L::GlobalMaxPooling2D(), sum);  // 12
  // Attention, as in a ViT block: the 9 positions as tokens, self-attention with 2 heads of 3
  // (in the file: the batch merged with the tokens for the projections, split again for the
  // heads), a Dense on the tokens, flattened.
  auto tokens = keras::Call(L::Reshape({9, 12}), sum);
  auto att = keras::Call(L::MultiHeadAttention({.num_heads = 2, .key_dim = 3}), {tokens, tokens});
  att = keras::Call(L::Dense(4, {.activation = "gelu"}), att);
  auto att_flat = keras::Call(L::Flatten(), att);  // 36
  auto head = keras::Call(L::Concatenate(), {flat, gmax, att_flat});
  head = keras::Call(L::Dense(16, {.activation = "gelu_approximate"}), head);
  head = keras::Call(L::LayerNormalization(), head);
  head = keras::Call(L::BatchNormalization(), head);
  head = keras::Call(L::Dropout(0.5f), head);
  auto logits = keras::Call(L::Dense(5), head);
  auto model = keras::Model::Functional({x}, {logits}, "every_layer");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE((*model)->compile({.loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})}).ok());

  constexpr int kN = 6;
  auto out = PredictTestImages(**model, kN, 8, 256, 4, Path("every.f32"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(keras::SaveOnnx(**model, Path("every.onnx")).ok());

  auto check = RunCommand("/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/onnx/check_onnx.py " +
                              Path("every.onnx"),
                          true);
  ASSERT_EQ(check.exit_code, 0) << check.output;
  for (const char* op : {" Pad ", " Conv ", " Erf ", " Sigmoid ", " BatchNormalization ", " Clip ", " Tanh ", " Concat ",
                         " GlobalAveragePool ", " GlobalMaxPool ", " AveragePool ", " MaxPool ", " MatMul ", " Softmax",
                         " Slice ", " Transpose", " Reshape "})
    EXPECT_NE(check.output.find(op), std::string::npos) << op << " missing: " << check.output;
  const auto j = RunOnnx(Path("every.onnx"), Path("every.f32"), kN, 8, 8);
  ASSERT_FALSE(j.is_discarded());
  const float* logit = out->data<float>();
  // Before the softmax: predict()'s outputs are the logits themselves here.
  const auto ort_logits = OnnxLogits(Path("every.onnx"), Path("every-logits.onnx"), Path("every.f32"), kN, 8, 8);
  ASSERT_FALSE(ort_logits.empty());
  ExpectSameVaryingLogits(ort_logits, Rows(*out, kN, 5), 1e-4, "every_layer");
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(j["probabilities"][i].size(), 5u);
    double mx = -1e30, z = 0;
    for (int k = 0; k < 5; ++k) mx = std::max(mx, static_cast<double>(logit[i * 5 + k]));
    for (int k = 0; k < 5; ++k) z += std::exp(logit[i * 5 + k] - mx);
    for (int k = 0; k < 5; ++k)
      EXPECT_NEAR(j["probabilities"][i][k].get<double>(), std::exp(logit[i * 5 + k] - mx) / z, 1e-4) << i << " " << k;
  }
}

// A layer whose op has no ONNX mapping fails the export with an error naming the layer, and
// nothing is written. Here a user layer that normalizes with the batch's own statistics at
// inference too (graph::Graph::BatchNorm, the training op: ONNX's BatchNormalization only takes
// fixed statistics).
class BatchStatisticsNorm final : public keras::Layer {
 public:
  std::string class_name() const override { return "BatchStatisticsNorm"; }
  Result<graph::Value> Build(keras::BuildContext& ctx, const std::vector<graph::Value>& in) override {
    const int64_t c = in[0].shape()[-1];
    STRATA_ASSIGN_OR_RETURN(graph::Value mean, ctx.Variable(name(), "moving_mean", {c}, {}, false));
    STRATA_ASSIGN_OR_RETURN(graph::Value var, ctx.Variable(name(), "moving_variance", {c}, {.init = graph::Init::kOnes}, false));
    graph::Value gamma = ctx.graph->Constant(1.0f, Shape{c}, name() + "/gamma");
    graph::Value beta = ctx.graph->Constant(0.0f, Shape{c}, name() + "/beta");
    return ctx.graph->BatchNorm(in[0], gamma, beta, mean, var, {}, name());
  }
};

TEST(ExportOnnxErrors, LayerWithoutOnnxMappingIsNamedAndNothingIsWritten) {
  auto odd = std::make_shared<BatchStatisticsNorm>();
  odd->set_name("batch_stats_norm");
  auto model = keras::Sequential({keras::layers::InputLayer({4}), keras::layers::Dense(3), odd, keras::layers::Dense(2)});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Status compiled = (*model)->compile({.loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  ASSERT_TRUE(compiled.ok()) << compiled.ToString();
  const std::string path = (fs::temp_directory_path() / ("strata_unmapped_" + std::to_string(::getpid()) + ".onnx")).string();
  Status s = keras::SaveOnnx(**model, path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer 'batch_stats_norm'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("cannot be expressed in ONNX"), std::string::npos) << s.ToString();
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace strata
