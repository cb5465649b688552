// FirstImageInfo (what `strata train` builds a built-in model for) and the flowers recipe's
// grayscale option, over synthetic files in the real layouts.
#include <gtest/gtest.h>

#include <filesystem>

#include "strata/datasets/flowers.h"
#include "strata/datasets/image_example.h"
#include "strata/datasets/synthetic.h"

namespace strata::datasets {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const char* name) {
  std::string d = testing::TempDir() + "/strata_first_image_" + std::to_string(::getpid()) + "_" + name;
  fs::remove_all(d);
  return d;
}

TEST(FirstImageInfo, ReadsTheFirstRecordsImageHeader) {
  const std::string gray = TempDir("gray"), rgb = TempDir("rgb");
  ASSERT_TRUE(WriteSyntheticFashionMnist(gray, 1, 3).ok());
  ASSERT_TRUE(WriteSyntheticFlowers(rgb, {.files = 1, .records_per_file = 2, .image_size = 40}).ok());
  auto png = FirstImageInfo(gray + "/fashion_mnist-train.tfrecord-*", "image", "label");
  ASSERT_TRUE(png.ok()) << png.status().ToString();
  EXPECT_EQ(png->format, image::ImageFormat::kPng);
  EXPECT_EQ(png->height, 28);
  EXPECT_EQ(png->width, 28);
  EXPECT_EQ(png->channels, 1);
  auto jpeg = FirstImageInfo(rgb + "/*.tfrec", "image", "class");
  ASSERT_TRUE(jpeg.ok()) << jpeg.status().ToString();
  EXPECT_EQ(jpeg->format, image::ImageFormat::kJpeg);
  EXPECT_EQ(jpeg->height, 40);
  EXPECT_EQ(jpeg->channels, 3);
  fs::remove_all(gray);
  fs::remove_all(rgb);
}

TEST(FirstImageInfo, MissingFeaturesAndFilesAreNamed) {
  const std::string dir = TempDir("missing");
  ASSERT_TRUE(WriteSyntheticFlowers(dir, {.files = 1, .records_per_file = 1, .image_size = 16}).ok());
  auto image = FirstImageInfo(dir + "/*.tfrec", "image_raw");
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("'image_raw'"), std::string::npos) << image.status().ToString();
  EXPECT_NE(image.status().message().find(dir), std::string::npos) << image.status().ToString();
  auto label = FirstImageInfo(dir + "/*.tfrec", "image", "label");
  ASSERT_FALSE(label.ok());
  EXPECT_NE(label.status().message().find("'label'"), std::string::npos) << label.status().ToString();
  auto none = FirstImageInfo(dir + "/*.nothing", "image");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("*.nothing"), std::string::npos) << none.status().ToString();
  fs::remove_all(dir);
}

TEST(FlowersDataset, ChannelsOneDecodesGrayAndOtherCountsAreRefused) {
  const std::string dir = TempDir("channels");
  ASSERT_TRUE(WriteSyntheticFlowers(dir, {.files = 1, .records_per_file = 4, .image_size = 32}).ok());
  auto ds = FlowersDataset(dir + "/*.tfrec", {.image_size = 24, .channels = 1, .batch_size = 4, .augment = true,
                                              .repeat = false, .seed = 1});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto it = ds->make_iterator();
  ASSERT_TRUE(it.ok());
  auto batch = (*it)->Next();
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((**batch)[0].shape(), (Shape{4, 24, 24, 1}));
  auto two = FlowersDataset(dir + "/*.tfrec", {.channels = 2});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("channels"), std::string::npos) << two.status().ToString();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::datasets
