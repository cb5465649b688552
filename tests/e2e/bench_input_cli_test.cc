// strata bench-input, run as a user would, over synthetic flowers TFRecords.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "strata/datasets/synthetic.h"

namespace strata {
namespace {

using testing::RunCommand;
using testing::Strata;

class BenchInputCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/strata_bench_input_" + std::to_string(::getpid()));
    std::filesystem::remove_all(*dir_);
    auto r = datasets::WriteSyntheticFlowers(*dir_, {.files = 2, .records_per_file = 12, .image_size = 96});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string* dir_;
};
std::string* BenchInputCli::dir_ = nullptr;

TEST_F(BenchInputCli, JsonHasRatesAndStages) {
  auto r = RunCommand(Strata() + " bench-input --data '" + *dir_ + "/*.tfrec' --image-size 48 --batch 8 --seconds 0.5" +
                      " --threads 2 --seed 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_GT(j["images_per_second"].get<double>(), 0);
  EXPECT_GT(j["mb_per_second"].get<double>(), 0);
  EXPECT_EQ(j["batch"], 8);
  EXPECT_EQ(j["cpu_budget"], 2);
  std::set<std::string> names;
  for (const auto& s : j["stages"]) names.insert(s["stage"].get<std::string>());
  for (const char* want : {"files", "tfrecord", "parallel_interleave", "parallel_map", "repeat", "shuffle", "batch",
                           "prefetch"})
    EXPECT_TRUE(names.count(want)) << want << " missing in " << r.output;
}

TEST_F(BenchInputCli, TablePrintsImagesPerSecondAndStages) {
  auto r = RunCommand(Strata() + " bench-input --data '" + *dir_ + "/*.tfrec' --image-size 32 --batch 4 --seconds 0.3" +
                      " --deterministic true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("images/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MB/s read"), std::string::npos);
  EXPECT_NE(r.output.find("parallel_map"), std::string::npos);
  EXPECT_NE(r.output.find("deterministic true"), std::string::npos);
}

TEST_F(BenchInputCli, UsageErrorsExit2AndMissingFilesExit1) {
  EXPECT_EQ(RunCommand(Strata() + " bench-input").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " bench-input --data x --deterministic maybe").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " bench-input --data x --batch 0").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " bench-input --data x --frobnicate").exit_code, 2);
  auto r = RunCommand(Strata() + " bench-input --data '" + *dir_ + "/*.nothing' --seconds 0.1", true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("*.nothing"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata
