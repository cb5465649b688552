// examples/quickstart.cpp (the seed's snippet) runs and learns on Fashion-MNIST-layout TFRecords.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_support.h"
#include "strata/datasets/synthetic.h"

namespace strata::testing {
namespace {

TEST(Quickstart, RunsTheSeedSnippetOnTFRecords) {
  const std::string dir = ::testing::TempDir() + "/strata-quickstart";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto files = datasets::WriteSyntheticFashionMnist(dir, 2, 256);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto r = RunCommand(std::string(STRATA_EXAMPLES_DIR) + "/example_quickstart '" + dir + "/*' 2 4", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("REPLICAS: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch 2/2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("final accuracy: "), std::string::npos) << r.output;
}

// The example stays the ~30 lines of user code the seed's snippet is.
TEST(Quickstart, UserCodeIsAtMostThirtyLines) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/examples/quickstart.cpp");
  std::string line;
  int count = 0;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find("--- user code starts here") != std::string::npos) inside = true;
    else if (line.find("--- user code ends here") != std::string::npos) inside = false;
    else if (inside && !line.empty()) ++count;
  }
  EXPECT_GT(count, 10);
  EXPECT_LE(count, 30);
}

}  // namespace
}  // namespace strata::testing
