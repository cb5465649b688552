// Keras weight files: the error paths. Each bad input is an error whose message names the
// file (and the layer, weight and shapes where they apply), and the model is left unchanged.
// The layouts themselves are checked against h5py and NumPy in h5_weights_test.py.
#include "strata/keras/h5_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "strata/keras/model.h"

namespace strata::keras {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Model> SmallModel(int head_units, bool extra_layer = false) {
  std::vector<LayerPtr> ls = {layers::InputLayer({6, 6, 3}),
                              layers::Conv2D(4, 3, {.padding = "same", .name = "conv"}),
                              layers::BatchNormalization({.name = "bn"}), layers::ReLU("relu"),
                              layers::GlobalAveragePooling2D("gap")};
  if (extra_layer) ls.push_back(layers::Dense(5, {.name = "extra"}));
  ls.push_back(layers::Dense(head_units, {.name = "head"}));
  auto m = Sequential(ls, "small");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE((*m)->compile({.loss = losses::SparseCategoricalCrossentropy({.from_logits = true})}).ok());
  return std::move(*m);
}

class KerasH5Weights : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_h5_weights_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    saved_ = (dir_ / "small.h5").string();
    auto source = SmallModel(3);
    ASSERT_TRUE(SaveKerasWeights(*source, saved_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads `path` into `model` expecting an error that contains `what`; the state is unchanged.
  void ExpectErrorUnchanged(Model& model, const std::string& path, const std::string& what, KerasWeightsOptions o = {}) {
    auto before = model.get_state();
    ASSERT_TRUE(before.ok());
    auto r = LoadKerasWeights(model, path, o);
    ASSERT_FALSE(r.ok()) << "loaded " << path;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << "the message names no file: " << r.status().ToString();
    auto after = model.get_state();
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(*before, *after) << "a failed load changed the model";
  }

  fs::path dir_;
  std::string saved_;
};

TEST_F(KerasH5Weights, RoundTripLoadsEveryLayer) {
  auto m = SmallModel(3);
  auto r = LoadKerasWeights(*m, saved_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->loaded, (std::vector<std::string>{"conv", "bn", "head"}));
  EXPECT_TRUE(IsHdf5File(saved_));
}

TEST_F(KerasH5Weights, ShapeMismatchNamesLayerWeightAndBothShapes) {
  auto m = SmallModel(4);
  ExpectErrorUnchanged(*m, saved_,
                       "layer head (Dense), weight kernel (file: head/kernel:0): the model expects shape (4, 4), "
                       "the file holds (4, 3)");
  // by_name without skip_mismatch fails the same way; with it, the layer is skipped.
  ExpectErrorUnchanged(*m, saved_, "the model expects shape (4, 4)", {.by_name = true});
  auto r = LoadKerasWeights(*m, saved_, {.by_name = true, .skip_mismatch = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->loaded, (std::vector<std::string>{"conv", "bn"}));
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].rfind("head: ", 0), 0u) << r->skipped[0];
}

TEST_F(KerasH5Weights, MissingLayerIsNamed) {
  auto m = SmallModel(3, /*extra_layer=*/true);
  ExpectErrorUnchanged(*m, saved_,
                       "layer count mismatch: the model has 4 layers with weights, the file 3; missing from the file: extra");
}

TEST_F(KerasH5Weights, NotHdf5FileIsNamed) {
  const std::string path = (dir_ / "weights.h5").string();
  std::ofstream(path) << "this is not HDF5\n";
  auto m = SmallModel(3);
  EXPECT_FALSE(IsHdf5File(path));
  ExpectErrorUnchanged(*m, path, "not an HDF5 file (no HDF5 signature)");
}

TEST_F(KerasH5Weights, TruncatedFileIsNamed) {
  const std::string path = (dir_ / "truncated.h5").string();
  fs::copy_file(saved_, path);
  fs::resize_file(path, fs::file_size(path) / 2);
  auto m = SmallModel(3);
  ExpectErrorUnchanged(*m, path, "truncated");
}

TEST_F(KerasH5Weights, MissingFileIsNamed) {
  auto m = SmallModel(3);
  ExpectErrorUnchanged(*m, (dir_ / "absent.h5").string(), "cannot open");
}

TEST_F(KerasH5Weights, SkipMismatchNeedsByNameForLegacyFiles) {
  auto m = SmallModel(3);
  ExpectErrorUnchanged(*m, saved_, "skip_mismatch needs by_name for a legacy .h5 file", {.skip_mismatch = true});
}

TEST_F(KerasH5Weights, UncompiledModelIsAnError) {
  auto m = Sequential({layers::InputLayer({4}), layers::Dense(2)});
  ASSERT_TRUE(m.ok());
  auto r = LoadKerasWeights(**m, saved_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("compile model sequential first"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(SaveKerasWeights(**m, (dir_ / "x.h5").string()).ok());
}

TEST_F(KerasH5Weights, SaveIntoMissingDirectoryFailsAndLeavesNoTemporary) {
  auto m = SmallModel(3);
  const std::string path = (dir_ / "no_such_dir" / "w.h5").string();
  Status st = SaveKerasWeights(*m, path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
  EXPECT_FALSE(fs::exists(dir_ / "no_such_dir"));
}

}  // namespace
}  // namespace strata::keras
