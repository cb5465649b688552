// Every flag of `strata make-records` does what its help says (issue 21, part 0): --quality
// sets the JPEGs' quality (smaller files at a lower one), --quiet drops the progress and the
// summary, and the generated-flowers counts (--classes, --per-class, --val-per-class,
// --test-per-class) are the records written. (The folder form's other flags:
// make_records_test.cc.) docs/cli.md lists every flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "strata/image/image.h"
#include "strata/image/jpeg.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

int64_t BytesUnder(const fs::path& dir) {
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".tfrec") n += static_cast<int64_t>(e.file_size());
  return n;
}

// Records per split, from `strata records count --json` (its "total").
int64_t Count(const std::string& glob_dir) {
  auto r = RunCommand(Strata() + " records count --json " + glob_dir + "/*.tfrec");
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  return j.is_discarded() ? -1 : j.value("total", int64_t{-1});
}

TEST(FlagsMakeRecords, QualityQuietAndTheGeneratedCounts) {
  const fs::path root = fs::path(::testing::TempDir()) / ("strata_flags_make_records_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(root / "in" / ("class" + std::to_string(c)));
    for (int i = 0; i < 3; ++i) {
      image::Image img;
      uint8_t* d = img.Reset(48, 48, 3);
      for (int p = 0; p < 48 * 48 * 3; ++p) d[p] = static_cast<uint8_t>((p * (7 + i + c) + p / 144 * 13) % 251);
      std::string jpg;
      ASSERT_TRUE(image::EncodeJpeg(img.view(), {}, &jpg).ok());
      std::ofstream(root / "in" / ("class" + std::to_string(c)) / (std::to_string(i) + ".jpg"), std::ios::binary) << jpg;
    }
  }
  const std::string from = Strata() + " make-records --from " + (root / "in").string() + " --image-size 48 --shards 1";
  auto high = RunCommand(from + " --quality 95 --out " + (root / "q95").string(), true);
  ASSERT_EQ(high.exit_code, 0) << high.output;
  EXPECT_NE(high.output.find("wrote 6 examples"), std::string::npos) << "the summary without --quiet:\n" << high.output;
  auto low = RunCommand(from + " --quality 20 --quiet --out " + (root / "q20").string(), true);
  ASSERT_EQ(low.exit_code, 0) << low.output;
  EXPECT_EQ(low.output, "") << "--quiet prints nothing";
  EXPECT_LT(BytesUnder(root / "q20"), BytesUnder(root / "q95")) << "--quality 20 writes smaller JPEGs than 95";

  auto gen = RunCommand(Strata() + " make-records --from generated-flowers --classes 3 --per-class 4 --val-per-class 2" +
                            " --test-per-class 1 --image-size 32 --quiet --out " + (root / "gen").string(),
                        true);
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(Count((root / "gen" / "train").string()), 12) << "3 classes x 4";
  EXPECT_EQ(Count((root / "gen" / "val").string()), 6) << "3 classes x 2";
  EXPECT_EQ(Count((root / "gen" / "test").string()), 3) << "3 classes x 1";
  fs::remove_all(root);
}

}  // namespace
}  // namespace strata::testing
