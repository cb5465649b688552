// Every flag of `strata train` does what its help says (issue 21, part 0): each test runs the
// command on the TF-written CIFAR-10 file in testdata (128 PNGs, 32x32 RGB, `image`/`label`)
// for a few steps of 8 images and checks the flag's effect in what the run prints or writes.
// docs/cli.md lists every flag with the test that shows it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "common/bf16_expected.h"
#include "strata/train/recipe.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCifar = std::string(STRATA_TESTDATA) + "/real/tfx_cifar10_test.tfrecord";

class FlagsTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("strata_flags_train_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // A short run on the CIFAR-10 file: 1 epoch of 2 steps of 8 images, one replica, the
  // monitor off; `extra` adds or overrides flags (a later flag wins); `env` is put before the
  // command (VAR=value ...).
  CommandResult Train(const std::string& extra, const std::string& env = "") const {
    return RunCommand(env + Strata() + " train --data " + kCifar + " --image-size 32 --epochs 1 --steps-per-epoch 2" +
                          " --batch-per-replica 8 --replicas 1 --no-monitor --deterministic --out " + Path("model.ckpt") +
                          " " + extra,
                      /*merge_stderr=*/true);
  }
  static nlohmann::json ReadJson(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  static bool Has(const CommandResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }
  // The training loss of a 3-step run (Train's, plus `extra`) as JSON text: runs that differ in
  // what they compute differ here.
  std::string LossHistory(const std::string& extra) const {
    auto r = Train("--steps-per-epoch 3 --summary-json " + Path("s.json") + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return ReadJson(Path("s.json"))["history"]["loss"].dump();
  }

  fs::path dir_;
};

// --image-size, --channels, --classes: the built-in model is built for the input (Keras's
// input_shape and classes=); the channels come from the first record unless --channels says.
TEST_F(FlagsTrain, BuiltInModelIsBuiltForTheInputsSizeChannelsAndClasses) {
  auto rgb = Train("--val " + kCifar + " --classes 10");
  ASSERT_EQ(rgb.exit_code, 0) << rgb.output;
  EXPECT_TRUE(Has(rgb, "input: 32x32x3 images")) << rgb.output;
  EXPECT_TRUE(Has(rgb, "channels from the first record of --data (PNG 32x32, 3 channels)")) << rgb.output;
  EXPECT_TRUE(Has(rgb, "built for input_shape [32, 32, 3]")) << rgb.output;
  EXPECT_TRUE(Has(rgb, "test accuracy")) << rgb.output;
  // The checkpoint records the input: evaluate decodes RGB at 32 px with no flags.
  auto eval = RunCommand(Strata() + " evaluate --model " + Path("model.ckpt") + " --data " + kCifar + " --json " +
                             Path("eval.json"),
                         true);
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_EQ(ReadJson(Path("eval.json"))["images"], 128) << eval.output;

  // Gray at 16 px with 12 classes: the model's input and last layer follow.
  auto gray = Train("--channels 1 --image-size 16 --classes 12");
  ASSERT_EQ(gray.exit_code, 0) << gray.output;
  EXPECT_TRUE(Has(gray, "input: 16x16x1 images")) << gray.output;
  EXPECT_TRUE(Has(gray, "channels from --channels")) << gray.output;
  EXPECT_TRUE(Has(gray, "built for input_shape [16, 16, 1]")) << gray.output;
  auto eval12 = RunCommand(Strata() + " evaluate --model " + Path("model.ckpt") + " --data " + kCifar + " --json " +
                               Path("eval12.json"),
                           true);
  ASSERT_EQ(eval12.exit_code, 0) << eval12.output;
  EXPECT_EQ(ReadJson(Path("eval12.json"))["classes"].size(), 12u) << "one score per output:\n" << eval12.output;

  // Too small for two 2x2 poolings: refused before any step, naming the size that works.
  auto tiny = Train("--image-size 2");
  EXPECT_EQ(tiny.exit_code, 2) << tiny.output;
  EXPECT_TRUE(Has(tiny, "pass --image-size 4 or more")) << tiny.output;
  EXPECT_FALSE(Has(tiny, "Epoch")) << tiny.output;
  auto bad_channels = Train("--channels 2");
  EXPECT_EQ(bad_channels.exit_code, 2) << bad_channels.output;
  EXPECT_TRUE(Has(bad_channels, "--channels must be 1 or 3")) << bad_channels.output;
}

// --model FILE keeps the spec's own input and classes: a mismatch is refused before any work.
TEST_F(FlagsTrain, ASpecFileKeepsItsInputAndClassesAndAMismatchIsRefused) {
  const std::string spec = std::string(STRATA_SOURCE_DIR) + "/models/reference-cnn.json";  // 28x28x1, 10 classes
  auto classes = Train("--model " + spec + " --image-size 28 --channels 1 --classes 12");
  EXPECT_EQ(classes.exit_code, 2) << classes.output;
  EXPECT_TRUE(Has(classes, "has 10 outputs but --classes is 12")) << classes.output;
  auto fits = Train("--model " + spec + " --image-size 28 --channels 1 --summary-json " + Path("file.json"));
  ASSERT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_TRUE(Has(fits, "from its spec file")) << fits.output;
  // At the spec's own input the built-in is the spec unchanged: the same run, loss for loss
  // (the default Fashion-MNIST job's model is not touched by building for the input).
  auto builtin = Train("--model reference-cnn --image-size 28 --channels 1 --summary-json " + Path("builtin.json"));
  ASSERT_EQ(builtin.exit_code, 0) << builtin.output;
  EXPECT_TRUE(Has(builtin, "built for input_shape [28, 28, 1]")) << builtin.output;
  EXPECT_EQ(ReadJson(Path("builtin.json"))["history"], ReadJson(Path("file.json"))["history"]);
}

// --image-key and --label-key on a real TF-written file with other feature names (deeplab's
// VOC file: JPEGs under `image/encoded`; its int64 `image/channels`, 3 for every image, serves
// as the label): without them the run stops naming the feature it missed.
TEST_F(FlagsTrain, ImageKeyAndLabelKeyReadARealFileWithOtherNames) {
  const std::string voc = std::string(STRATA_TESTDATA) + "/real/tf-models_deeplab_pascal_voc_seg_val-00000-of-00001.tfrecord";
  const std::string train = Strata() + " train --data " + voc + " --image-size 32 --epochs 1 --steps-per-epoch 2" +
                            " --batch-per-replica 1 --replicas 1 --no-monitor --out " + Path("voc.ckpt");
  auto plain = RunCommand(train, true);
  EXPECT_NE(plain.exit_code, 0) << plain.output;
  EXPECT_TRUE(Has(plain, "'image'")) << plain.output;
  auto image_only = RunCommand(train + " --image-key image/encoded", true);
  EXPECT_NE(image_only.exit_code, 0) << image_only.output;
  EXPECT_TRUE(Has(image_only, "'label'")) << image_only.output;
  auto both = RunCommand(train + " --image-key image/encoded --label-key image/channels", true);
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_TRUE(Has(both, "channels from the first record of --data (JPEG 500x366, 3 channels)")) << both.output;
}

// --deterministic with --seed gives the same run twice; --seed, --lr and --weight-decay each
// change the weights (seen in the training loss of the later steps).
TEST_F(FlagsTrain, SeedLrOptimizerAndWeightDecayChangeTheRunAndDeterministicRepeatsIt) {
  auto loss = [&](const std::string& extra) { return LossHistory(extra); };
  const std::string base = loss("");
  ASSERT_NE(base, "null");
  EXPECT_EQ(loss(""), base) << "--deterministic: the same seed gives the same run";
  EXPECT_NE(loss("--seed 43"), base);
  EXPECT_NE(loss("--lr 0.5"), base);
  EXPECT_NE(loss("--weight-decay 0.5"), base);
  EXPECT_NE(loss("--optimizer adam"), base);
  auto rmsprop = Train("--optimizer rmsprop");
  EXPECT_EQ(rmsprop.exit_code, 2) << rmsprop.output;
  EXPECT_TRUE(Has(rmsprop, "--optimizer must be sgd or adam")) << rmsprop.output;
}

// --label-smoothing changes the loss of any run; --pad-crop and --flip change what Fashion-MNIST's
// pipeline feeds (the CIFAR file read as 28x28 gray `label`led images takes that pipeline), and
// out-of-range values are refused naming the flag.
TEST_F(FlagsTrain, LabelSmoothingPadCropAndFlipChangeTheRun) {
  auto loss = [&](const std::string& extra) { return LossHistory("--image-size 28 --channels 1 " + extra); };
  const std::string base = loss("--flip 0 --label-smoothing 0");
  ASSERT_NE(base, "null");
  EXPECT_EQ(loss(""), loss("--pad-crop 0 --flip 0.5 --label-smoothing 0.1")) << "the default job's values";
  EXPECT_NE(loss("--flip 0 --label-smoothing 0.1"), base);
  EXPECT_NE(loss("--flip 0 --label-smoothing 0 --pad-crop 2"), base);
  EXPECT_NE(loss("--flip 0.5 --label-smoothing 0"), base);
  EXPECT_EQ(loss("--pad-crop 2"), loss("--pad-crop 2")) << "augmentation is seeded";
  for (const auto& [flag, message] : {std::pair<std::string, std::string>{"--pad-crop 28", "--pad-crop must be"},
                                      {"--flip 2", "--flip must be"},
                                      {"--label-smoothing 1", "--label-smoothing must be"}}) {
    auto r = Train(flag);
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_TRUE(Has(r, message)) << r.output;
  }
}

// --ema M (Keras's use_ema): training runs as without it (the same loss each step), and the
// model saved and evaluated at the end is the weights' moving average, so the test loss
// differs; with --ema 0 nothing changes. Out of range is refused naming the flag.
TEST_F(FlagsTrain, EmaLeavesTrainingAloneAndEndsAtTheAverage) {
  auto run = [&](const std::string& extra) {
    auto r = Train("--steps-per-epoch 3 --val " + kCifar + " --validation-steps 2 --summary-json " + Path("s.json") +
                   " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return ReadJson(Path("s.json"));
  };
  const nlohmann::json plain = run(""), off = run("--ema 0"), averaged = run("--ema 0.5");
  EXPECT_EQ(averaged["history"]["loss"], plain["history"]["loss"]);
  EXPECT_EQ(off["test_loss"], plain["test_loss"]);
  EXPECT_NE(averaged["test_loss"], plain["test_loss"]);
  EXPECT_EQ(averaged["recipe"]["ema"], 0.5);
  auto r = Train("--ema 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Has(r, "--ema must be")) << r.output;
}

// --tta flip: the final evaluation also reports the accuracy with each image's prediction the mean
// of the model's outputs for it and its mirror image (train/tta.h; unit-tested against a model
// written by hand in tests/train/tta_test.cc), as `strata evaluate --tta flip` gives for the saved
// model; without it nothing is added. An unknown name is refused naming the flag.
TEST_F(FlagsTrain, TtaFlipReportsTheMirroredAccuracyBesideThePlainOne) {
  auto run = [&](const std::string& extra) {
    auto r = Train("--image-size 28 --channels 1 --precision f32 --steps-per-epoch 3 --val " + kCifar +
                   " --summary-json " + Path("s.json") + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::make_pair(r, ReadJson(Path("s.json")));
  };
  const auto [plain_run, plain] = run("");
  EXPECT_FALSE(Has(plain_run, "--tta")) << plain_run.output;
  EXPECT_EQ(plain["test_accuracy_tta"], 0);
  const auto [tta_run, tta] = run("--tta flip");
  EXPECT_TRUE(Has(tta_run, "test accuracy with --tta flip: ")) << tta_run.output;
  EXPECT_EQ(tta["recipe"]["tta"], "flip");
  EXPECT_EQ(tta["test_accuracy"], plain["test_accuracy"]) << "the plain accuracy stays Keras's";
  const double trained = tta["test_accuracy_tta"].get<double>();
  EXPECT_GT(trained, 0);
  auto evaluated = RunCommand(Strata() + " evaluate --model " + Path("model.ckpt") + " --data " + kCifar +
                                  " --tta flip --json " + Path("e.json"),
                              true);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  EXPECT_NE(evaluated.output.find("accuracy with --tta flip: "), std::string::npos) << evaluated.output;
  const nlohmann::json e = ReadJson(Path("e.json"));
  EXPECT_EQ(e["accuracy_tta"]["tta"], "flip");
  // The same 128 images and weights; the engines' batches differ (one replica here, one per core
  // there), which may move a near-tie by an image.
  EXPECT_NEAR(e["accuracy_tta"]["accuracy"].get<double>(), trained, 1.0 / 128 + 1e-9);
  auto bad = Train("--tta rotate");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(Has(bad, "--tta must be flip")) << bad.output;
}

// --replicas, --batch-per-replica, --lr, --lr-scaling, --schedule, --warmup-epochs, --epochs and
// --steps-per-epoch: the printed global batch, learning rate and schedule, and the work done.
TEST_F(FlagsTrain, BatchAndLearningRateFlagsSetTheScheduleAndTheWork) {
  auto cosine = Train("--replicas 2 --batch-per-replica 8 --lr 0.1 --steps-per-epoch 4 --epochs 2 --warmup-epochs 0.5");
  ASSERT_EQ(cosine.exit_code, 0) << cosine.output;
  EXPECT_TRUE(Has(cosine, "replicas: 2")) << cosine.output;
  EXPECT_TRUE(Has(cosine, "global batch 16 = 8 per replica x 2")) << cosine.output;
  EXPECT_TRUE(Has(cosine, "learning rate 0.0125 (cosine decay 0.012500 over 6 steps, linear warm-up over 2 steps)"))
      << "--lr scaled by 16/128, warm-up 0.5 of 4 steps:\n" << cosine.output;
  EXPECT_TRUE(Has(cosine, "Epoch 2/2")) << cosine.output;
  EXPECT_TRUE(Has(cosine, "trained 128 images")) << "2 epochs x 4 steps x 16:\n" << cosine.output;

  auto constant = Train("--lr 0.1 --lr-scaling none --schedule constant");
  ASSERT_EQ(constant.exit_code, 0) << constant.output;
  EXPECT_TRUE(Has(constant, "learning rate 0.1 (constant 0.100000)")) << constant.output;

  auto rampup = Train("--schedule rampup --warmup-epochs 2 --lr 0.001");
  ASSERT_EQ(rampup.exit_code, 0) << rampup.output;
  EXPECT_TRUE(Has(rampup, "(ramp-up 2 epochs to 0.001")) << rampup.output;

  EXPECT_EQ(Train("--schedule linear").exit_code, 2);
  EXPECT_EQ(Train("--lr-scaling sqrt").exit_code, 2);
}

// --precision bf16 compiles the model as mixed_bfloat16 where the CPU has it, and is refused
// with the reason where it does not.
TEST_F(FlagsTrain, PrecisionBf16RunsMixedOrIsRefused) {
  auto r = Train("--precision bf16 --summary-json " + Path("bf16.json"));
  // Refused only where it cannot run (no AVX-512, or capped below it): common/bf16_expected.h.
  if (!testing::Bf16MustRun()) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(Has(r, "--precision bf16:")) << r.output;
  } else {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Has(r, "· precision mixed_bfloat16")) << r.output;
    auto f32 = Train("--precision f32 --summary-json " + Path("f32.json"));
    ASSERT_EQ(f32.exit_code, 0) << f32.output;
    EXPECT_FALSE(Has(f32, "mixed_bfloat16")) << f32.output;
    EXPECT_NE(ReadJson(Path("bf16.json"))["history"]["loss"], ReadJson(Path("f32.json"))["history"]["loss"])
        << "bf16 arithmetic gives other losses";
  }
  EXPECT_EQ(Train("--precision f16").exit_code, 2);
  // Without the flag: bf16 where this CPU runs it natively (AVX512_BF16 or AMX-BF16), f32
  // elsewhere, said on the run's first line.
  auto preset = Train("--summary-json " + Path("default.json"));
  ASSERT_EQ(preset.exit_code, 0) << preset.output;
  const bool native = train::NativeBf16();
  EXPECT_EQ(ReadJson(Path("default.json"))["recipe"]["precision"], native ? "bf16" : "f32");
  EXPECT_EQ(preset.output.rfind(native ? "precision: mixed_bfloat16" : "precision: float32", 0), 0u) << preset.output;
  EXPECT_EQ(Has(preset, "--precision f32 for float32"), native) << preset.output;
}

// The README's middle column: AVX-512 without AVX512_BF16 (Skylake-X, Ice Lake). With oneDNN
// and Strata capped to plain AVX-512 (AVX512_CORE; STRATA_MAX_ISA=avx512 drops AVX512_BF16 and
// AMX), bf16 still trains, emulated by oneDNN, with the native run's numbers up to the order of
// f32 accumulation (seen on Zen 5: the same loss to the last bit), and `strata devices` says
// "emulated". On a plain AVX-512 CPU both runs are emulated; without AVX-512 there is nothing to
// compare (the refusal is PrecisionBf16RunsMixedOrIsRefused's).
TEST_F(FlagsTrain, Bf16CappedToPlainAvx512IsEmulatedWithTheSameNumbers) {
  if (!testing::Bf16MustRun()) GTEST_SKIP() << "no AVX-512 here (or capped below it): bf16 is refused";
  const std::string plain = "ONEDNN_MAX_CPU_ISA=AVX512_CORE STRATA_MAX_ISA=avx512 ";
  auto native = Train("--precision bf16 --summary-json " + Path("native.json"));
  ASSERT_EQ(native.exit_code, 0) << native.output;
  auto emulated = Train("--precision bf16 --out " + Path("emulated.ckpt") + " --summary-json " + Path("emulated.json"), plain);
  ASSERT_EQ(emulated.exit_code, 0) << emulated.output;
  EXPECT_TRUE(Has(emulated, "· precision mixed_bfloat16")) << emulated.output;
  const double a = ReadJson(Path("native.json"))["history"]["loss"][0].get<double>();
  const double b = ReadJson(Path("emulated.json"))["history"]["loss"][0].get<double>();
  const double relative = std::abs(a - b) / std::abs(a);
  std::printf("[ bf16     ] loss after 2 steps: native %.7f, emulated on plain AVX-512 %.7f (relative difference %.2g)\n", a, b,
              relative);
  EXPECT_LT(relative, 1e-3);
  auto devices = RunCommand(plain + "STRATA_CACHE_DIR=" + Path("cache") + " " + Strata() + " devices", true);
  ASSERT_EQ(devices.exit_code, 0) << devices.output;
  EXPECT_TRUE(Has(devices, "f32 bf16 (emulated by oneDNN on AVX-512)")) << devices.output;
  const size_t isa = devices.output.find("\nisa ");
  ASSERT_NE(isa, std::string::npos) << devices.output;
  const std::string isa_line = devices.output.substr(isa + 1, devices.output.find('\n', isa + 1) - isa - 1);
  EXPECT_EQ(isa_line.find("AVX512_BF16"), std::string::npos) << isa_line;
  EXPECT_EQ(isa_line.find("AMX"), std::string::npos) << isa_line;
}

// --validation-steps N (Keras's validation_steps): each epoch's validation and the final
// evaluation read N batches of --val, not all of it; 0 or below -1 is a usage error.
TEST_F(FlagsTrain, ValidationStepsBoundsTheValidation) {
  auto r = Train("--val " + kCifar + " --validation-steps 1 --summary-json " + Path("v.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r, "test accuracy")) << r.output;
  const auto j = ReadJson(Path("v.json"));
  ASSERT_EQ(j["history"]["val_loss"].size(), 1u) << j.dump();
  // One batch of 8 images: an accuracy in eighths.
  const double eighths = j["test_accuracy"].get<double>() * 8;
  EXPECT_NEAR(eighths, std::round(eighths), 1e-6) << j.dump();
  EXPECT_EQ(Train("--val " + kCifar + " --validation-steps 0").exit_code, 2);
}

// --val validates on the files (and reports test accuracy); with --data and no --val there is
// no validation, and the run says so.
TEST_F(FlagsTrain, ValDefaultsToNoneWithDataAndSaysSo) {
  auto none = Train("");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_TRUE(Has(none, "validation: none (--data without --val")) << none.output;
  EXPECT_FALSE(Has(none, "test accuracy")) << none.output;
  EXPECT_FALSE(Has(none, "fashion")) << "no Fashion-MNIST behind the user's back:\n" << none.output;
  auto val = Train("--val " + kCifar);
  ASSERT_EQ(val.exit_code, 0) << val.output;
  EXPECT_TRUE(Has(val, "validation: " + kCifar)) << val.output;
  EXPECT_TRUE(Has(val, "test accuracy")) << val.output;
}

// The files a run writes: --out, --summary-json, --tensorboard, --trace, --report-json, and the
// monitor's page (--monitor-port, --monitor-bind); --no-monitor turns the monitor's outputs off.
TEST_F(FlagsTrain, OutputFlagsWriteTheirFilesAndNoMonitorTurnsTheMonitorOff) {
  // 16 steps: at about 5 ms a step on an AVX-512 core, 4 made a run of 20 ms, one window long.
  auto r = RunCommand(Strata() + " train --data " + kCifar + " --val " + kCifar + " --image-size 32 --epochs 1" +
                          " --steps-per-epoch 16 --batch-per-replica 8 --replicas 1 --out " + Path("m.ckpt") +
                          " --summary-json " + Path("s.json") + " --tensorboard " + Path("tb") + " --trace " +
                          Path("trace.json") + " --report-json " + Path("report.json") +
                          " --monitor-port 0 --monitor-bind 127.0.0.1 --monitor-interval 0.02",
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r, "model saved to " + Path("m.ckpt"))) << r.output;
  EXPECT_TRUE(fs::is_regular_file(Path("m.ckpt")));
  const auto summary = ReadJson(Path("s.json"));
  EXPECT_EQ(summary["model_path"], Path("m.ckpt"));
  EXPECT_EQ(summary["global_batch"], 8);
  const auto trace = ReadJson(Path("trace.json"));
  ASSERT_FALSE(trace.is_discarded()) << "the trace is JSON";
  EXPECT_TRUE(trace.contains("traceEvents") || trace.is_array()) << trace.dump().substr(0, 200);
  EXPECT_FALSE(ReadJson(Path("report.json")).is_discarded()) << "the input report is JSON";
  EXPECT_TRUE(Has(r, "monitor: http://127.0.0.1:")) << "--monitor-port 0 serves on a free port at --monitor-bind:\n"
                                                     << r.output;
  for (const char* sub : {"train", "validation"}) {
    bool events = false;
    for (const auto& e : fs::directory_iterator(Path("tb") + "/" + sub))
      events |= e.path().filename().string().rfind("events.out.tfevents", 0) == 0;
    EXPECT_TRUE(events) << "--tensorboard writes " << sub << "/events.out.tfevents.*";
  }

  // --monitor-interval: one window line per interval (0.02 s: several in a run of compiles and
  // steps; 1000 s: only the last, partial one).
  auto windows = [](const std::string& out) {
    int n = out.rfind("matrix ", 0) == 0;
    for (size_t p = out.find("\nmatrix "); p != std::string::npos; p = out.find("\nmatrix ", p + 1)) ++n;
    return n;
  };
  EXPECT_GE(windows(r.output), 2) << r.output;
  auto long_windows = RunCommand(Strata() + " train --data " + kCifar + " --image-size 32 --epochs 1 --steps-per-epoch 2" +
                                     " --batch-per-replica 8 --replicas 1 --out " + Path("l.ckpt") + " --monitor-interval 1000",
                                 true);
  ASSERT_EQ(long_windows.exit_code, 0) << long_windows.output;
  EXPECT_EQ(windows(long_windows.output), 1) << long_windows.output;

  auto quiet = RunCommand(Strata() + " train --data " + kCifar + " --image-size 32 --epochs 1 --steps-per-epoch 2" +
                              " --batch-per-replica 8 --replicas 1 --out " + Path("q.ckpt") + " --no-monitor" +
                              " --report-json " + Path("q-report.json") + " --trace " + Path("q-trace.json"),
                          true);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_FALSE(fs::exists(Path("q-report.json"))) << quiet.output;
  EXPECT_FALSE(Has(quiet, "monitor: ")) << quiet.output;
}

}  // namespace
}  // namespace strata::testing
