// The flowers and Fashion-MNIST recipes over synthetic files in the real layouts.
#include "strata/data/recipes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "strata/data/synthetic.h"

namespace strata::data {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const char* name) {
  std::string d = testing::TempDir() + "/strata_recipes_" + std::to_string(::getpid()) + "_" + name;
  fs::remove_all(d);
  return d;
}

TEST(FashionMnist, BatchesOfScaledImagesAndLabels) {
  const std::string dir = TempDir("fmnist");
  auto files = WriteSyntheticFashionMnist(dir, 2, 25);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto ds = FashionMnistDataset(dir + "/fashion_mnist-train.tfrecord-*", {.batch_size = 16, .shuffle = 0});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto it = ds->make_iterator();
  ASSERT_TRUE(it.ok());
  int batches = 0;
  int64_t seen = 0;
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    if (!e->has_value()) break;
    const Tensor& img = (**e)[0];
    const Tensor& label = (**e)[1];
    ASSERT_EQ(img.shape(), (Shape{16, 28, 28, 1}));
    ASSERT_EQ(img.dtype(), DType::kF32);
    ASSERT_EQ(label.shape(), Shape{16});
    ASSERT_EQ(label.dtype(), DType::kI64);
    for (int b = 0; b < 16; ++b) {
      const int64_t l = label.data<int64_t>()[b];
      EXPECT_EQ(l, (seen + b) % 10);  // file order, no shuffle
      float mn = 1;
      for (int i = 0; i < 784; ++i) {
        const float v = img.data<float>()[b * 784 + i];
        ASSERT_GE(v, 0.0f);
        ASSERT_LE(v, 1.0f);
        mn = std::min(mn, v);
      }
      EXPECT_GE(mn, 10.0f * l / 255.0f - 1e-6f);
    }
    seen += 16;
    ++batches;
  }
  EXPECT_EQ(batches, 3);  // 50 records, drop_remainder
  fs::remove_all(dir);
}

TEST(Flowers, SeededDeterministicRecipeIsTheSameForAnyThreadCount) {
  const std::string dir = TempDir("flowers");
  auto files = WriteSyntheticFlowers(dir, {.files = 3, .records_per_file = 8, .image_size = 64});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto run = [&](int64_t threads) {
    auto ds = FlowersDataset(dir + "/*.tfrec", {.image_size = 32,
                                                .batch_size = 4,
                                                .replicas = 2,
                                                .deterministic = true,
                                                .shuffle_buffer = 16,
                                                .seed = 5,
                                                .num_parallel_reads = threads,
                                                .num_parallel_calls = threads});
    EXPECT_TRUE(ds.ok()) << ds.status().ToString();
    auto it = ds->make_iterator();
    std::vector<float> pixels;
    std::vector<int64_t> labels;
    for (int i = 0; i < 5; ++i) {  // 40 elements: crosses the epoch boundary (24 per epoch)
      auto e = (*it)->Next();
      EXPECT_TRUE(e.ok() && e->has_value()) << e.status().ToString();
      if (!e.ok() || !e->has_value()) break;
      const Tensor& img = (**e)[0];
      EXPECT_EQ(img.shape(), (Shape{8, 32, 32, 3}));
      EXPECT_EQ((**e)[1].shape(), Shape{8});
      pixels.insert(pixels.end(), img.data<float>(), img.data<float>() + img.num_elements());
      labels.insert(labels.end(), (**e)[1].data<int64_t>(), (**e)[1].data<int64_t>() + 8);
    }
    return std::make_pair(pixels, labels);
  };
  auto one = run(1);
  ASSERT_EQ(one.second.size(), 40u);
  for (float v : one.first) {
    ASSERT_GE(v, -1e-5f);  // saturation may round a hair below 0
    ASSERT_LE(v, 1.0f + 1e-5f);
  }
  EXPECT_EQ(run(3), one);
  EXPECT_EQ(run(AUTOTUNE), one);
  fs::remove_all(dir);
}

TEST(Flowers, NonDeterministicDefaultRunsAndNamesBadGlobs) {
  const std::string dir = TempDir("flowers_nd");
  ASSERT_TRUE(WriteSyntheticFlowers(dir, {.files = 2, .records_per_file = 6, .image_size = 48}).ok());
  auto ds = FlowersDataset(dir + "/*.tfrec", {.image_size = 24, .batch_size = 5, .shuffle_buffer = 8, .seed = 1});
  ASSERT_TRUE(ds.ok());
  auto it = ds->make_iterator();
  for (int i = 0; i < 6; ++i) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok() && e->has_value()) << e.status().ToString();
    EXPECT_EQ((**e)[0].shape(), (Shape{5, 24, 24, 3}));
  }
  auto bad = FlowersDataset(dir + "/*.nothing");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("*.nothing"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::data

// Evaluation/prediction: every record once (the last short batch kept), each with its id.
namespace strata::data {
namespace {

TEST(Flowers, EvaluationKeepsTheRemainderAndCarriesIds) {
  const std::string dir = TempDir("flowers_ids");
  auto files = WriteSyntheticFlowers(dir, {.files = 2, .records_per_file = 7, .image_size = 32});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto ds = FlowersDataset(dir + "/*.tfrec", {.image_size = 16, .batch_size = 4, .deterministic = true,
                                              .augment = false, .repeat = false, .shuffle_buffer = 0, .seed = 1,
                                              .drop_remainder = false, .id_key = "id"});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto it = ds->make_iterator();
  ASSERT_TRUE(it.ok());
  std::vector<int64_t> rows;
  std::set<std::string> ids;
  for (;;) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    if (!e->has_value()) break;
    ASSERT_EQ((**e).size(), 3u);  // image, class, id
    const Tensor& id = (**e)[2];
    ASSERT_EQ(id.dtype(), DType::kU8);
    const int64_t b = (**e)[0].shape()[0], len = id.num_elements() / b;
    rows.push_back(b);
    for (int64_t r = 0; r < b; ++r) {
      std::string s(reinterpret_cast<const char*>(id.data<uint8_t>() + r * len), static_cast<size_t>(len));
      s.erase(s.find_last_not_of('\0') + 1);
      EXPECT_FALSE(s.empty());
      ids.insert(s);
    }
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{4, 4, 4, 2}));  // 14 records, the remainder kept
  EXPECT_EQ(ids.size(), 14u);                           // distinct ids, none lost
  fs::remove_all(dir);
}

TEST(Flowers, ClassNamesAreTheCompetitions) {
  EXPECT_STREQ(kFlowersClasses[0], "pink primrose");
  EXPECT_STREQ(kFlowersClasses[87], "cyclamen ");
  EXPECT_STREQ(kFlowersClasses[90], "hippeastrum ");
  EXPECT_STREQ(kFlowersClasses[103], "wild rose");
}

}  // namespace
}  // namespace strata::data
