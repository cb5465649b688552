// `strata monitor`: the matmul check program with every reporter, reading recorded event
// files back, and the live numbers of a running job over HTTP.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "cli_support.h"
#include "monitor_support.h"
#include "strata/core/peak_flops.h"
#include "strata/monitor/http_server.h"

namespace strata::testing {
namespace {

using nlohmann::json;

std::string Dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/monitor_cli_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(MonitorCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCommand(Strata() + " monitor").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " monitor a b").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " monitor matmul --bogus").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " monitor matmul --seconds x").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " monitor matmul --seconds -1").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " monitor matmul --monitor-interval 0").exit_code, 2);
  auto help = RunCommand(Strata() + " monitor --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--monitor-port"), std::string::npos);
}

TEST(MonitorCliTest, MissingFilesAndDeadUrlsFailWithTheirName) {
  auto r = RunCommand(Strata() + " monitor /nonexistent/events.out.tfevents.1.x", true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/events.out.tfevents.1.x"), std::string::npos) << r.output;
  auto u = RunCommand(Strata() + " monitor http://127.0.0.1:1/ --timeout 2", true);
  EXPECT_EQ(u.exit_code, 1);
  EXPECT_NE(u.output.find("127.0.0.1:1"), std::string::npos) << u.output;
  const std::string empty = Dir("empty");
  auto e = RunCommand(Strata() + " monitor " + empty, true);
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_NE(e.output.find("no event files"), std::string::npos) << e.output;
}

// The starved pipeline through the CLI: idle > 50 %, the report names slow_map, and every
// output file is written and readable.
TEST(MonitorCliTest, StarvedMatmulRunWritesReportTraceJsonlAndEventFile) {
  const std::string d = Dir("starved");
  const std::string cmd = Strata() + " monitor matmul --replicas 2 --seconds 1.5 --n 64 --matmuls-per-step 1 "
                          "--map-cost-ms 20 --monitor-interval 0.25 --report " + d + "/report.json --trace " + d +
                          "/trace.json --jsonl " + d + "/windows.jsonl --logdir " + d;
  auto r = RunCommand(cmd, true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("highly input-bound"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("slowest    slow_map (stage 0.0)"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("matrix [0-9]+% · idle [0-9]+% · [0-9.,]+ examples/s · step [0-9]+ ms")))
      << r.output;

  json report = json::parse(Background::Slurp(d + "/report.json"));
  EXPECT_GT(report["idle_pct"].get<double>(), 50.0);
  EXPECT_EQ(report["slowest_stage"], "slow_map");
  EXPECT_EQ(report["verdict"], "highly input-bound");

  json trace = json::parse(Background::Slurp(d + "/trace.json"), nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  EXPECT_GT(trace["traceEvents"].size(), 10u);

  int windows = 0;
  std::istringstream lines(Background::Slurp(d + "/windows.jsonl"));
  for (std::string line; std::getline(lines, line);) windows += json::parse(line)["type"] == "window";
  EXPECT_GE(windows, 4);

  // Recorded numbers come back through `strata monitor LOGDIR`.
  auto rec = RunCommand(Strata() + " monitor " + d, true);
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  EXPECT_NE(rec.output.find("matrix%"), std::string::npos) << rec.output;
  int rows = 0;
  std::istringstream out(rec.output);
  std::regex row("^ +[0-9]+ +[0-9.]+ +([0-9.]+) +[0-9.,]+ +[0-9.]+$");
  for (std::string line; std::getline(out, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row)) {
      ++rows;
      EXPECT_GT(std::stod(m[1]), 20.0) << line;  // idle, starved
    }
  }
  EXPECT_GE(rows, 3) << rec.output;
  auto js = RunCommand(Strata() + " monitor " + d + " --json");
  ASSERT_EQ(js.exit_code, 0);
  json first = json::parse(js.output.substr(0, js.output.find('\n')));
  EXPECT_TRUE(first.contains("matrix_unit_utilization")) << first.dump();
  EXPECT_TRUE(first.contains("replica_1/idle_time")) << first.dump();
}

// Acceptance through the CLI: the monitor's utilization agrees with FLOPs / time / peak
// within 5 points (the program prints both).
TEST(MonitorCliTest, MatmulUtilizationAgreesWithTheIndependentFigure) {
  auto r = RunCommand(Strata() + " monitor matmul --replicas 2 --seconds 1.5 --n 192 --matmuls-per-step 4 "
                                 "--monitor-interval 0.5", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("peak = ([0-9.]+)% \\(monitor ([0-9.]+)%\\)"))) << r.output;
  EXPECT_NEAR(std::stod(m[1]), std::stod(m[2]), 5.0) << r.output;
  EXPECT_GT(std::stod(m[1]), 1.0);
}

// The peak corrects itself within the run (core/peak_flops.h): this machine's f32 peak, cached as
// a third of what it measures (as a busy first calibration can leave it), is beaten by the
// GEMMs' executed rate in the first window. The run measures the peak again, says so in one line,
// and from that window on the console lines, /metrics and the JSON report divide by the corrected
// peak (none above 100 % plus the window's 5 % noise); the cache holds it, provisional.
TEST(MonitorCliTest, APeakCachedAtAThirdIsCorrectedWithinTheRun) {
  const std::string d = Dir("peak");
  const std::string cache = d + "/cache";
  setenv("STRATA_CACHE_DIR", cache.c_str(), 1);
  auto devices = RunCommand(Strata() + " devices --json");
  ASSERT_EQ(devices.exit_code, 0) << devices.output;
  const double measured = json::parse(devices.output)["peak_gflops_f32_per_core"].get<double>();
  const std::string path = cache + "/peak-flops-" + MachineKey() + ".json";
  json cached = json::parse(Background::Slurp(path));
  cached["f32_gflops_per_core"] = measured / 3;
  cached["provisional"] = false;
  std::ofstream(path) << cached.dump();

  // One replica: a core left for whatever else runs, so the GEMMs beat a third of the peak at once.
  Background job({Strata(), "monitor", "matmul", "--replicas", "1", "--seconds", "3", "--n", "192", "--matmuls-per-step",
                  "4", "--monitor-interval", "0.25", "--monitor-port", "0", "--report", d + "/report.json", "--jsonl",
                  d + "/windows.jsonl"},
                 d + "/out", d + "/err");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(job.WaitForErr("monitor: serving http://", 60)) << job.Err();
  ASSERT_TRUE(job.WaitForErr("peak f32 corrected: the kernels executed", 60)) << job.Err();
  std::smatch m;
  std::string err = job.Err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("serving (http://127\\.0\\.0\\.1:[0-9]+/)"))) << err;
  // /metrics follows once the page's reporter has the corrected window.
  const std::string url = std::string(m[1]) + "metrics";
  double metrics_peak = 0;
  std::string body;
  for (int tries = 0; tries < 100 && metrics_peak < 1.5 * measured / 3; ++tries) {
    auto metrics = monitor::HttpGet(url);
    ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
    body = metrics->body;
    ASSERT_TRUE(std::regex_search(body, m, std::regex("strata_monitor_peak_flops_per_core\\{dtype=\"f32\"\\} ([0-9.e+]+)")))
        << body;
    metrics_peak = std::stod(m[1]) * 1e-9;
    if (metrics_peak < 1.5 * measured / 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(metrics_peak, 1.5 * measured / 3) << body;
  ASSERT_EQ(job.Wait(120), 0) << job.Err();
  unsetenv("STRATA_CACHE_DIR");

  // The console: the correction said once; every window line in range.
  err = job.Err();
  const size_t said = err.find("peak f32 corrected");
  EXPECT_EQ(err.find("peak f32 corrected", said + 1), std::string::npos) << err;
  int lines = 0;
  const std::regex window_line("matrix ([0-9]+)% · idle");
  for (std::sregex_iterator it(err.begin(), err.end(), window_line), end; it != end; ++it) {
    ++lines;
    EXPECT_LE(std::stod((*it)[1]), 105) << err;
  }
  EXPECT_GE(lines, 4) << err;
  // The report and the windows: the corrected peak, the correction recorded.
  json report = json::parse(Background::Slurp(d + "/report.json"));
  const double peak = report["peak_gflops_per_core"].get<double>();
  EXPECT_GT(peak, 1.5 * measured / 3) << report.dump();
  EXPECT_LE(report["utilization_pct"].get<double>(), 105) << report.dump();
  EXPECT_EQ(report["peak_corrections"].size(), 1u) << report.dump();
  std::istringstream jsonl(Background::Slurp(d + "/windows.jsonl"));
  int windows = 0, corrected = 0;
  for (std::string line; std::getline(jsonl, line);) {
    json l = json::parse(line);
    if (l["type"] != "window") continue;
    ++windows;
    corrected += l["window"]["peak_correction"] != "";
    // Before the correcting window the forced third; from it on, the corrected peak.
    if (corrected == 0)
      EXPECT_NEAR(l["window"]["peak_gflops_per_core"].get<double>(), measured / 3, 1e-6 * measured) << line;
    else
      EXPECT_NEAR(l["window"]["peak_gflops_per_core"].get<double>(), peak, 1e-6 * peak) << line;
  }
  EXPECT_GE(windows, 4);
  EXPECT_EQ(corrected, 1);
  // The cache: corrected, provisional (measured again at the next start).
  json after = json::parse(Background::Slurp(path));
  EXPECT_TRUE(after["provisional"].get<bool>()) << after.dump();
  EXPECT_NEAR(after["f32_gflops_per_core"].get<double>(), metrics_peak, 1e-6 * metrics_peak) << after.dump();
}

TEST(MonitorCliTest, LiveNumbersOfARunningJobOverHttp) {
  const std::string d = Dir("live");
  Background job({Strata(), "monitor", "matmul", "--replicas", "2", "--seconds", "30", "--n", "96",
                  "--matmuls-per-step", "2", "--map-cost-ms", "2", "--monitor-interval", "0.25", "--monitor-port", "0"},
                 d + "/out", d + "/err");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(job.WaitForErr("monitor: serving http://", 60)) << job.Err();
  std::smatch m;
  const std::string err = job.Err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("serving (http://127\\.0\\.0\\.1:[0-9]+/)"))) << err;
  const std::string url = m[1];
  ASSERT_TRUE(job.WaitForErr("matrix ", 60)) << job.Err();  // a window closed
  auto live = RunCommand(Strata() + " monitor " + url, true);
  ASSERT_EQ(live.exit_code, 0) << live.output;
  EXPECT_TRUE(std::regex_search(live.output, std::regex("^matrix [0-9]+% · idle [0-9]+% · ")) ) << live.output;
  EXPECT_NE(live.output.find("replica 1:"), std::string::npos) << live.output;
  EXPECT_NE(live.output.find("stage 0.0 slow_map"), std::string::npos) << live.output;
  auto follow = RunCommand(Strata() + " monitor " + url + " --follow --count 2 --poll 0.2 --json", true);
  ASSERT_EQ(follow.exit_code, 0) << follow.output;
  std::istringstream lines(follow.output);
  std::vector<int64_t> idx;
  for (std::string line; std::getline(lines, line);) idx.push_back(json::parse(line)["index"].get<int64_t>());
  ASSERT_EQ(idx.size(), 2u) << follow.output;
  EXPECT_GT(idx[1], idx[0]);
  job.Stop();
}

}  // namespace
}  // namespace strata::testing
