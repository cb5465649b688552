// Every flag of `strata bench-input` does what its help says (issue 21, part 0): the JSON's first
// batch shows --image-size, --batch and --seed (with --deterministic true), its clock --seconds.
// (--threads and --json: bench_input_cli_test.cc.) docs/cli.md lists every flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "strata/datasets/synthetic.h"

namespace strata::testing {
namespace {

TEST(FlagsBenchInput, ImageSizeBatchSeedAndSecondsShowInTheFirstBatch) {
  const std::string dir = ::testing::TempDir() + "/strata_flags_bench_input_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto files = datasets::WriteSyntheticFlowers(dir, {.files = 2, .records_per_file = 16, .image_size = 64});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto run = [&](const std::string& extra) {
    auto r = RunCommand(Strata() + " bench-input --data '" + dir + "/*.tfrec' --seconds 0.2 --threads 2 --json " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  };
  const auto a = run("--image-size 40 --batch 12 --deterministic true --seed 3");
  ASSERT_FALSE(a.is_discarded());
  EXPECT_EQ(a["first_batch_shape"], nlohmann::json({12, 40, 40, 3}));
  EXPECT_EQ(a["first_batch_labels"].size(), 12u);
  EXPECT_GE(a["seconds"].get<double>(), 0.2) << "--seconds: measured for at least that long";
  const auto again = run("--image-size 40 --batch 12 --deterministic true --seed 3");
  EXPECT_EQ(again["first_batch_labels"], a["first_batch_labels"]) << "the same seed, the same order";
  const auto other = run("--image-size 40 --batch 12 --deterministic true --seed 4");
  EXPECT_NE(other["first_batch_labels"], a["first_batch_labels"]) << "another seed, another order";
  const auto small = run("--image-size 24 --batch 5");
  EXPECT_EQ(small["first_batch_shape"], nlohmann::json({5, 24, 24, 3}));
  EXPECT_EQ(small["deterministic"], false);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
