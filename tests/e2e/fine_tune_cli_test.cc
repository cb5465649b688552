// Transfer learning on the command line (issue 19, "Freezing and fine-tuning"): `strata train
// --weights FILE` starts from saved weights (a Keras .h5 by layer name, or a Strata checkpoint),
// `--freeze-until LAYER` freezes the layers up to it and `--freeze-backbone-epochs N` runs the
// two-phase recipe (the head on a frozen backbone, then every layer at a lower learning rate).
// The Keras files are written by `strata train --out F.h5` and read back with h5py (Debian's
// python3-h5py) in Keras's legacy layout, independently of Strata's reader. flowers-cnn at 32 px
// on generated flowers records: each run is a fraction of a second.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_support.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// Compares two Keras legacy weight files layer by layer with h5py: one line "LAYER same" or
// "LAYER differs" for each layer with weights in the first (bit-for-bit equality).
constexpr const char* kCompareLayers = R"(import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
for layer in a.attrs["layer_names"]:
    layer = layer.decode() if isinstance(layer, bytes) else layer
    names = [n.decode() if isinstance(n, bytes) else n for n in a[layer].attrs["weight_names"]]
    if not names: continue
    same = all(np.array_equal(a[layer][n][()], b[layer][n][()]) for n in names)
    print(layer, "same" if same else "differs")
)";

class FineTuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_fine_tune_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto make = RunCommand(Strata() + " make-records --from generated-flowers --classes 4 --per-class 32 --val-per-class 8"
                                      " --test-per-class 4 --image-size 32 --out " + dir_.string() + " --quiet",
                           true);
    ASSERT_EQ(make.exit_code, 0) << make.output;
    std::ofstream(dir_ / "compare_layers.py") << kCompareLayers;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // flowers-cnn (Adam at 1e-3) at 32 px, 8 steps of 16 images per epoch, seeded, in a fixed order.
  CommandResult Train(const std::string& extra, int classes = 4) {
    return RunCommand(Strata() + " train --preset flowers --model flowers-cnn --image-size 32 --classes " +
                          std::to_string(classes) + " --data '" + Path("train/*.tfrec") +
                          "' --steps-per-epoch 8 --batch-per-replica 8 --replicas 2 --warmup-epochs 0 --precision f32"
                          " --seed 7 --deterministic --no-monitor " + extra,
                      true);
  }
  // A model trained for 3 epochs, saved as a Keras weight file: the "pretrained" weights.
  void Pretrain() {
    auto r = Train("--epochs 3 --out " + Path("pretrained.h5"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_NE(r.output.find("model saved to " + Path("pretrained.h5")), std::string::npos) << r.output;
  }
  double FirstEpochLoss(const std::string& summary_json) {
    std::ifstream in(dir_ / summary_json);
    auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || j["history"]["loss"].empty()) return -1;
    return j["history"]["loss"][0].get<double>();
  }
  // LAYER -> "same" / "differs" between two Keras weight files, read with h5py.
  std::map<std::string, std::string> CompareLayers(const std::string& a, const std::string& b) {
    auto r = RunCommand("/usr/bin/python3 " + Path("compare_layers.py") + " " + Path(a) + " " + Path(b), true);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::map<std::string, std::string> out;
    std::istringstream lines(r.output);
    std::string layer, verdict;
    while (lines >> layer >> verdict) out[layer] = verdict;
    return out;
  }

  fs::path dir_;
};

// --weights with a Keras file Strata wrote (h5py reads it as Keras's layout): every layer loads by
// name, the run says so in one line, and the first epoch's loss starts far below a run from
// scratch (measured: 0.30 against 1.19).
TEST_F(FineTuneCli, WeightsFromAKerasFileLoadAndTheFirstEpochStartsLower) {
  Pretrain();
  const auto layers = CompareLayers("pretrained.h5", "pretrained.h5");
  EXPECT_EQ(layers.size(), 9u) << "4 convolutions, 4 batch norms and the Dense head in Keras's layout";
  auto warm = Train("--epochs 1 --weights " + Path("pretrained.h5") + " --out " + Path("warm.ckpt") + " --summary-json " +
                    Path("warm.json"));
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_NE(warm.output.find("weights: " + Path("pretrained.h5") +
                             " (Keras H5, by name): 9 layers loaded; skipped (shapes differ): none; not in the file: none"),
            std::string::npos)
      << warm.output;
  auto cold = Train("--epochs 1 --out " + Path("cold.ckpt") + " --summary-json " + Path("cold.json"));
  ASSERT_EQ(cold.exit_code, 0) << cold.output;
  const double warm_loss = FirstEpochLoss("warm.json"), cold_loss = FirstEpochLoss("cold.json");
  ASSERT_GT(warm_loss, 0) << warm.output;
  ASSERT_GT(cold_loss, 0) << cold.output;
  EXPECT_LT(warm_loss, 0.6 * cold_loss) << "from the weights " << warm_loss << ", from scratch " << cold_loss;

  // A Strata checkpoint loads too, and starts as low.
  auto again = Train("--epochs 1 --weights " + Path("warm.ckpt") + " --out " + Path("again.ckpt") + " --summary-json " +
                     Path("again.json"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(Strata checkpoint): every layer loaded"), std::string::npos) << again.output;
  EXPECT_LT(FirstEpochLoss("again.json"), 0.6 * cold_loss);
}

// A file with another number of classes (as an include_top=False file lacks the head) loads into
// a model with a new head: every layer but the head, which the line names with both shapes.
TEST_F(FineTuneCli, AFileWithOtherClassesLoadsEverythingButTheHead) {
  Pretrain();
  auto r = Train("--epochs 1 --weights " + Path("pretrained.h5") + " --out " + Path("five.ckpt"), /*classes=*/5);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 layers loaded; skipped (shapes differ): dense: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the model expects shape (256, 5), the file holds (256, 4)"), std::string::npos) << r.output;
}

// The two-phase recipe: phase 1 trains only the head (the trainable-params line and the weights
// saved at its end show the layers up to re_lu_3 unchanged, bit for bit, and the head changed),
// then phase 2 trains every layer (the backbone moves) for the remaining epochs.
TEST_F(FineTuneCli, FreezeBackboneEpochsTrainsTheHeadThenEverything) {
  Pretrain();
  auto r = Train("--epochs 3 --weights " + Path("pretrained.h5") + " --freeze-until re_lu_3 --freeze-backbone-epochs 1" +
                 " --checkpoint-dir " + Path("ckpt") + " --out " + Path("tuned.h5") + " --summary-json " + Path("tuned.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The head alone: the Dense's 256 x 4 + 4 of the 63,972 weights (moving statistics aside). The
  // preset's schedule without a ramp sustains its peak (5e-4 x 2 replicas) for the first epochs:
  // phase 2 starts at a tenth of it.
  const size_t phase1 = r.output.find(
      "phase 1 (head): epochs 1-1 with the layers up to re_lu_3 frozen, trainable params 1028 of 63972, learning rate from 0.001\n");
  const size_t phase2 = r.output.find("phase 2 (fine-tuning): epochs 2-3 with every layer trainable at the learning rate x 0.1, "
                                      "trainable params 63972 of 63972, learning rate from 0.0001\n");
  ASSERT_NE(phase1, std::string::npos) << r.output;
  ASSERT_NE(phase2, std::string::npos) << r.output;
  EXPECT_LT(phase1, phase2);
  EXPECT_LT(r.output.find("Epoch 1/1"), phase2) << r.output;
  EXPECT_GT(r.output.find("Epoch 3/3"), phase2) << r.output;

  // After phase 1: the frozen layers are the pretrained ones, bit for bit; the head trained.
  const auto after_phase1 = CompareLayers("pretrained.h5", "ckpt/head_trained.h5");
  ASSERT_EQ(after_phase1.size(), 9u) << r.output;
  for (const auto& [layer, verdict] : after_phase1) EXPECT_EQ(verdict, layer == "dense" ? "differs" : "same") << layer;
  // After phase 2: every layer moved.
  const auto after_phase2 = CompareLayers("ckpt/head_trained.h5", "tuned.h5");
  ASSERT_EQ(after_phase2.size(), 9u);
  for (const auto& [layer, verdict] : after_phase2) EXPECT_EQ(verdict, "differs") << layer;
  // One history over both phases.
  std::ifstream in(dir_ / "tuned.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["history"]["loss"].size(), 3u);
}

// Bad combinations are refused before any work with exit 2, naming the flag; a missing file too.
TEST_F(FineTuneCli, BadFlagCombinationsExitTwoNamingTheFlag) {
  auto no_layer = Train("--epochs 2 --freeze-backbone-epochs 1");
  EXPECT_EQ(no_layer.exit_code, 2) << no_layer.output;
  EXPECT_NE(no_layer.output.find("--freeze-backbone-epochs needs --freeze-until LAYER"), std::string::npos) << no_layer.output;

  auto no_phase2 = Train("--epochs 2 --freeze-until re_lu_3 --freeze-backbone-epochs 2");
  EXPECT_EQ(no_phase2.exit_code, 2) << no_phase2.output;
  EXPECT_NE(no_phase2.output.find("--freeze-backbone-epochs 2 leaves no epoch of --epochs 2"), std::string::npos)
      << no_phase2.output;

  auto resume = Train("--epochs 2 --freeze-until re_lu_3 --freeze-backbone-epochs 1 --resume --checkpoint-dir " + Path("c"));
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_NE(resume.output.find("--resume cannot continue a --freeze-backbone-epochs run"), std::string::npos) << resume.output;

  auto unknown = Train("--epochs 1 --freeze-until block14_sepconv2_act");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("--freeze-until block14_sepconv2_act: model flowers-cnn has no layer named block14_sepconv2_act"),
            std::string::npos)
      << unknown.output;

  auto missing = Train("--epochs 1 --weights " + Path("nope.h5"));
  EXPECT_NE(missing.exit_code, 0) << missing.output;
  EXPECT_NE(missing.output.find("--weights " + Path("nope.h5") + ": no such file"), std::string::npos) << missing.output;
  std::ofstream(dir_ / "garbage.ckpt") << "not weights";
  auto garbage = Train("--epochs 1 --weights " + Path("garbage.ckpt"));
  EXPECT_EQ(garbage.exit_code, 1) << garbage.output;
  EXPECT_NE(garbage.output.find("--weights " + Path("garbage.ckpt") + ": checkpoint"), std::string::npos) << garbage.output;
  for (const auto* r : {&no_layer, &no_phase2, &resume, &unknown, &missing, &garbage})
    EXPECT_EQ(r->output.find("Epoch 1/"), std::string::npos) << r->output;
}

// --weights imagenet: the application's Keras no-top file, looked up in the model cache
// ($STRATA_HOME/models) under Keras's name and loaded by name. MobileNet's files carry no hash
// (Keras publishes none), so a file put there stands in for the download here (the download
// itself: tests/e2e/get_file_test.cc); at 32 px Keras takes its 224 px file.
TEST_F(FineTuneCli, WeightsImagenetLoadsTheApplicationsKerasFileFromTheCache) {
  auto pre = Train("--model mobilenet --epochs 1 --out " + Path("mobilenet.h5"));
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  fs::create_directories(dir_ / "home" / "models");
  fs::copy_file(Path("mobilenet.h5"), dir_ / "home" / "models" / "mobilenet_1_0_224_tf_no_top.h5");
  auto r = RunCommand("STRATA_HOME=" + Path("home") + " " + Strata() +
                          " train --preset flowers --model mobilenet --image-size 32 --classes 4 --data '" +
                          Path("train/*.tfrec") + "' --steps-per-epoch 2 --batch-per-replica 8 --replicas 2 "
                          "--precision f32 --no-monitor --epochs 1 --weights imagenet --out " + Path("tuned.h5"),
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weights: " + Path("home") + "/models/mobilenet_1_0_224_tf_no_top.h5 (Keras H5, by name)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the ImageNet weights for 224 px are loaded"), std::string::npos) << r.output;
  // A model that is no application has no ImageNet weights.
  auto spec = Train("--epochs 1 --weights imagenet");
  EXPECT_NE(spec.exit_code, 0) << spec.output;
  EXPECT_NE(spec.output.find("--weights imagenet needs --model one of the Keras applications"), std::string::npos)
      << spec.output;
}

}  // namespace
}  // namespace strata::testing
