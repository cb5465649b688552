// Every flag of `strata monitor` does what its help says (issue 21, part 0): the matmul program's
// pipeline and counting flags (--batch-size, --map-parallelism, --prefetch, --peak-gflops) show
// in its report and JSON lines, --per-replica in the console, --monitor-bind and --linger in the
// page's address and lifetime. (The other flags: monitor_cli_test.cc.) docs/cli.md lists them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace strata::testing {
namespace {

TEST(FlagsMonitor, MatmulPipelineCountingAndPageFlagsHaveTheirEffect) {
  const std::string dir = ::testing::TempDir() + "/strata_flags_monitor_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string matmul = Strata() + " monitor matmul --replicas 1 --seconds 0.4 --n 32 --matmuls-per-step 1" +
                             " --monitor-interval 0.1 --map-cost-ms 0.05 --report " + dir + "/r.json --jsonl " + dir + "/w.jsonl";
  auto r = RunCommand(matmul + " --batch-size 7 --map-parallelism 3 --prefetch 5 --peak-gflops 1000 --per-replica" +
                          " --monitor-port 0 --monitor-bind 127.0.0.2 --linger 1",
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir + "/r.json");
  const auto report = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.output;
  EXPECT_EQ(report["examples"].get<int64_t>(), 7 * report["steps"].get<int64_t>()) << "--batch-size 7 per step";
  int64_t map_parallelism = -1, prefetch_capacity = -1;
  std::ifstream lines(dir + "/w.jsonl");
  std::string line;
  double peak = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.value("type", "") == "start") peak = j["run"]["peak_gflops_per_core"].get<double>();
    if (j.value("type", "") != "window") continue;
    for (const auto& s : j["window"]["stages"]) {
      if (s["name"] == "slow_map") map_parallelism = s["parallelism"].get<int64_t>();
      if (s["name"] == "prefetch") prefetch_capacity = s["buffer_capacity"].get<int64_t>();
    }
  }
  EXPECT_EQ(map_parallelism, 3) << "--map-parallelism";
  EXPECT_EQ(prefetch_capacity, 5) << "--prefetch";
  EXPECT_EQ(peak, 1000.0) << "--peak-gflops replaces the calibrated peak";
  EXPECT_NE(r.output.find("peak 1000.0 GFLOP/s per core"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  replica 0: matrix "), std::string::npos) << "--per-replica:\n" << r.output;
  EXPECT_NE(r.output.find("monitor: serving http://127.0.0.2:"), std::string::npos) << "--monitor-bind:\n" << r.output;
  EXPECT_NE(r.output.find("the page stays up for 1 s more"), std::string::npos) << "--linger:\n" << r.output;

  auto plain = RunCommand(matmul, true);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("  replica 0: matrix "), std::string::npos) << "no --per-replica:\n" << plain.output;
  EXPECT_EQ(plain.output.find("monitor: serving"), std::string::npos) << "no page without --monitor-port";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
