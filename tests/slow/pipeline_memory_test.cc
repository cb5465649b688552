// Every buffer is bounded: the resident set stays flat over a 36-epoch run of the flowers
// recipe as it ships (decode, shuffle(2048) — here holding the whole 160-record dataset —,
// batches handed out and dropped). The bound is tighter than what one leaked batch per epoch
// would add, so such a leak fails.
#include <gtest/gtest.h>

#include <cstdio>
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

TEST(PipelineMemory, RssIsFlatOverManyEpochs) {
  const std::string dir = ::testing::TempDir() + "/strata_rss_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(datasets::WriteSyntheticFlowers(dir, {.files = 4, .records_per_file = 40, .image_size = 128}).ok());
  // The recipe's own shuffle buffer (2048).
  auto ds = datasets::FlowersDataset(dir + "/*.tfrec", {.image_size = 64, .batch_size = 16, .seed = 1});
  ASSERT_TRUE(ds.ok());
  auto it = ds->make_iterator();
  ASSERT_TRUE(it.ok());
  const int batches_per_epoch = 160 / 16;
  constexpr int kWarmEpochs = 6, kEpochs = 36;
  int64_t warm = 0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (int b = 0; b < batches_per_epoch; ++b) {
      auto e = (*it)->Next();
      ASSERT_TRUE(e.ok() && e->has_value()) << e.status().ToString();
    }
    if (epoch + 1 == kWarmEpochs) warm = RssBytes();
  }
  const int64_t after = RssBytes();
  // One batch is 16 x 64 x 64 x 3 x 4 = 786 KB: a batch leaked per epoch would add 30 of them
  // (23.6 MB) over the last 30 epochs. Allowed: 4 MiB, about five batches of allocator drift.
  constexpr int64_t kBatchBytes = 16 * 64 * 64 * 3 * 4, kAllowed = 4 << 20;
  static_assert(kAllowed < (kEpochs - kWarmEpochs) * kBatchBytes / 4, "the bound must catch a batch leaked per epoch");
  std::printf("[ memory   ] RSS after epoch %d: %.1f MB, after epoch %d: %.1f MB (allowed growth %.1f MB)\n", kWarmEpochs,
              static_cast<double>(warm) / 1e6, kEpochs, static_cast<double>(after) / 1e6, static_cast<double>(kAllowed) / 1e6);
  EXPECT_LT(after - warm, kAllowed) << "RSS grew from " << warm << " to " << after;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::data
