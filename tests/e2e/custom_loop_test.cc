// examples/custom_loop.cpp (compute_gradients / apply_gradients / metric updates) ends with
// the same weights, loss and accuracy as fit() for the reference CNN on Fashion-MNIST-layout
// TFRecords, to the bit.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_support.h"
#include "strata/datasets/synthetic.h"

namespace strata::testing {
namespace {

TEST(CustomLoop, ReproducesFitForTheReferenceCnn) {
  const std::string dir = ::testing::TempDir() + "/strata-custom-loop";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto files = datasets::WriteSyntheticFashionMnist(dir, 2, 256);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto r = RunCommand(std::string(STRATA_EXAMPLES_DIR) + "/example_custom_loop '" + dir + "/*' 24", true);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("EQUAL after 24 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weights identical, loss identical"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("custom loop: loss "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata::testing
