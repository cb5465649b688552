// Every buffer is bounded: the resident set stays flat over a 10-epoch run of the flowers
// recipe (decode, shuffle(2048)-sized buffers, batches handed out and dropped).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "strata/datasets/flowers.h"
#include "strata/datasets/synthetic.h"

namespace strata::data {
namespace {

int64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * 4096;
}

TEST(PipelineMemory, RssIsFlatOverTenEpochs) {
  const std::string dir = ::testing::TempDir() + "/strata_rss_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(datasets::WriteSyntheticFlowers(dir, {.files = 4, .records_per_file = 40, .image_size = 128}).ok());
  auto ds = datasets::FlowersDataset(dir + "/*.tfrec",
                                     {.image_size = 64, .batch_size = 16, .shuffle_buffer = 64, .seed = 1});
  ASSERT_TRUE(ds.ok());
  auto it = ds->make_iterator();
  ASSERT_TRUE(it.ok());
  const int batches_per_epoch = 160 / 16;
  int64_t after_two = 0;
  for (int epoch = 0; epoch < 10; ++epoch) {
    for (int b = 0; b < batches_per_epoch; ++b) {
      auto e = (*it)->Next();
      ASSERT_TRUE(e.ok() && e->has_value()) << e.status().ToString();
    }
    if (epoch == 1) after_two = RssBytes();
  }
  const int64_t after_ten = RssBytes();
  // One batch is 16 x 64 x 64 x 3 x 4 = 786 KB; allow a few batches of drift, not epochs.
  EXPECT_LT(after_ten - after_two, 8 << 20) << "RSS grew from " << after_two << " to " << after_ten;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::data
