// The flowers and Fashion-MNIST recipes over synthetic files in the real layouts; batch_size
// is per replica in both, and a batch holds GlobalBatch(batch_size, replicas) elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "strata/datasets/batch_size.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/synthetic.h"
#include "strata/image/pad_crop.h"

namespace strata::datasets {
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

// Every tensor of the first `limit` batches (all when -1), flattened in order.
std::vector<std::vector<double>> Drain(const data::Dataset& ds, int64_t limit = -1) {
  std::vector<std::vector<double>> out;
  auto it = ds.make_iterator();
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  if (!it.ok()) return out;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    auto e = (*it)->Next();
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok() || !e->has_value()) break;
    std::vector<double> v;
    for (const Tensor& t : (**e).tensors) {
      Tensor c = t.Contiguous();
      for (int64_t i = 0; i < c.num_elements(); ++i)
        v.push_back(c.dtype() == DType::kI64 ? static_cast<double>(c.data<int64_t>()[i]) : c.data<float>()[i]);
    }
    out.push_back(std::move(v));
  }
  return out;
}

TEST(BatchSize, GlobalIsPerReplicaTimesReplicas) {
  static_assert(GlobalBatch(128, 1) == 128);
  EXPECT_EQ(GlobalBatch(16, 8), 128);
  EXPECT_EQ(GlobalBatch(int64_t{1} << 20, 4096), int64_t{1} << 32);  // no int overflow
}

// batch_size is per replica: 8 per replica x 2 replicas gives the batches 16 x 1 gives (and
// that a global batch_size of 16 gave before batch size meant one thing), same order.
TEST(FashionMnist, BatchIsPerReplicaTimesReplicas) {
  const std::string dir = TempDir("fmnist_replicas");
  ASSERT_TRUE(WriteSyntheticFashionMnist(dir, 2, 25).ok());
  const std::string glob = dir + "/fashion_mnist-train.tfrecord-*";
  auto one = FashionMnistDataset(glob, {.batch_size = 16, .shuffle = 64, .seed = 3});
  auto two = FashionMnistDataset(glob, {.batch_size = 8, .replicas = 2, .shuffle = 64, .seed = 3});
  ASSERT_TRUE(one.ok() && two.ok());
  const auto want = Drain(*one);
  ASSERT_EQ(want.size(), 3u);  // 50 records, 16 a batch, drop_remainder
  ASSERT_EQ(want[0].size(), 16u * (784 + 1));
  EXPECT_EQ(Drain(*two), want);
  EXPECT_FALSE(FashionMnistDataset(glob, {.replicas = 0}).ok());
  fs::remove_all(dir);
}

// The training augmentation: each image a pad-crop-mirror window of its decoded original (the
// same rows with no augmentation, as the shuffle is off), the same under a seed, a fresh draw
// each epoch and for another seed, and the labels untouched.
TEST(FashionMnist, AugmentationIsAWindowOfEachImageSeededPerElement) {
  const std::string dir = TempDir("fmnist_augment");
  ASSERT_TRUE(WriteSyntheticFashionMnist(dir, 1, 32).ok());
  const std::string glob = dir + "/fashion_mnist-train.tfrecord-*";
  auto plain = FashionMnistDataset(glob, {.batch_size = 16, .shuffle = 0, .repeat = true});
  auto aug = [&](uint64_t seed) {
    return FashionMnistDataset(glob, {.batch_size = 16, .shuffle = 0, .seed = seed, .repeat = true, .pad_crop = 2,
                                      .flip_left_right = 0.5f});
  };
  auto a = aug(5), b = aug(5), c = aug(6);
  ASSERT_TRUE(plain.ok() && a.ok() && b.ok() && c.ok());
  const auto originals = Drain(*plain, 4), views = Drain(*a, 4);  // two epochs of two batches
  ASSERT_EQ(views.size(), 4u);
  EXPECT_EQ(Drain(*b, 4), views);
  EXPECT_NE(Drain(*c, 4), views);
  EXPECT_NE(std::vector<double>(views[0].begin(), views[0].end()), views[2]);  // epoch 2 draws again
  int mirrored = 0, moved = 0;
  for (size_t batch = 0; batch < views.size(); ++batch) {
    for (int row = 0; row < 16; ++row) {
      std::vector<float> src(784), want(784);
      for (int i = 0; i < 784; ++i) src[i] = static_cast<float>(originals[batch][row * 784 + i]);
      bool found = false;
      for (int dy = -2; dy <= 2 && !found; ++dy)
        for (int dx = -2; dx <= 2 && !found; ++dx)
          for (bool flip : {false, true}) {
            image::PadCropFlip(src.data(), 28, 28, 1, {.dy = dy, .dx = dx, .flip = flip}, want.data());
            if (std::equal(want.begin(), want.end(), views[batch].begin() + row * 784,
                           [](float w, double v) { return static_cast<double>(w) == v; })) {
              found = true;
              mirrored += flip;
              moved += dy != 0 || dx != 0;
              break;
            }
          }
      EXPECT_TRUE(found) << "batch " << batch << " row " << row << " is no window of its image";
      EXPECT_EQ(views[batch][16 * 784 + row], originals[batch][16 * 784 + row]) << "label";
    }
  }
  EXPECT_GT(mirrored, 10);  // of 64 at p = 0.5
  EXPECT_GT(moved, 40);     // 24 of 25 offsets move
  EXPECT_FALSE(FashionMnistDataset(glob, {.pad_crop = -1}).ok());
  EXPECT_FALSE(FashionMnistDataset(glob, {.flip_left_right = 1.5f}).ok());
  fs::remove_all(dir);
}

TEST(Flowers, BatchIsPerReplicaTimesReplicas) {
  const std::string dir = TempDir("flowers_replicas");
  ASSERT_TRUE(WriteSyntheticFlowers(dir, {.files = 2, .records_per_file = 8, .image_size = 32}).ok());
  auto run = [&](int64_t per_replica, int replicas) {
    auto ds = FlowersDataset(dir + "/*.tfrec", {.image_size = 16, .batch_size = per_replica, .replicas = replicas,
                                                .deterministic = true, .shuffle_buffer = 8, .seed = 2});
    EXPECT_TRUE(ds.ok()) << ds.status().ToString();
    return ds.ok() ? Drain(*ds, 4) : std::vector<std::vector<double>>{};
  };
  const auto want = run(6, 1);
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(want[0].size(), 6u * (16 * 16 * 3 + 1));
  EXPECT_EQ(run(3, 2), want);
  EXPECT_EQ(run(2, 3), want);
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
  EXPECT_EQ(run(data::AUTOTUNE), one);
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
}  // namespace strata::datasets

// Evaluation/prediction: every record once (the last short batch kept), each with its id.
namespace strata::datasets {
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
}  // namespace strata::datasets

// Moved from tests/data/map_and_batch_test.cc with the recipe: the flowers recipe's fused
// map_into + batch yields the unfused path's batches for any thread count.
namespace strata::datasets {
namespace {

TEST(MapAndBatch, FlowersRecipeFusedEqualsUnfused) {
  const std::string dir = TempDir("map_and_batch");
  auto files = WriteSyntheticFlowers(dir, {.files = 2, .records_per_file = 10, .image_size = 48});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto run = [&](int64_t threads, bool fused) {
    auto ds = FlowersDataset(dir + "/*.tfrec", {.image_size = 24, .batch_size = 3, .deterministic = true,
                                                .shuffle_buffer = 8, .seed = 9, .num_parallel_calls = threads});
    EXPECT_TRUE(ds.ok()) << ds.status().ToString();
    // 27 images: crosses the epoch boundary (20 per epoch)
    return Drain(ds->with_options({.map_and_batch_fusion = fused}), 9);
  };
  const auto want = run(1, false);
  ASSERT_EQ(want.size(), 9u);
  for (int64_t threads : {int64_t{1}, int64_t{2}, int64_t{4}}) EXPECT_EQ(run(threads, true), want) << threads;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::datasets
