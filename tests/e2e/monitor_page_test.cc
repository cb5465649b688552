// The live page in a real browser: headless Chromium loads it from a running `strata monitor
// matmul --monitor-port 0`, the gauges show numbers, and a later load shows a later window.
// A screenshot is kept in the test's working directory (monitor_page.png). Skips only when
// Chromium is not installed (scripts/deps.sh installs it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <thread>

#include "cli_support.h"
#include "monitor_support.h"

namespace strata::testing {
namespace {

const char* kChromium = "/usr/bin/chromium";

std::string Chromium(const std::string& profile, const std::string& what) {
  return std::string("timeout 120 ") + kChromium +
         " --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update"
         " --disable-sync --no-first-run --disable-dev-shm-usage --user-data-dir=" + profile + " " + what;
}

struct PageState {
  std::string matrix, idle;
  int window = -1, updates = 0;
};

PageState Parse(const std::string& dom) {
  PageState s;
  std::smatch m;
  if (std::regex_search(dom, m, std::regex("id=\"matrix-value\">([^<]*)<"))) s.matrix = m[1];
  if (std::regex_search(dom, m, std::regex("id=\"idle-value\">([^<]*)<"))) s.idle = m[1];
  if (std::regex_search(dom, m, std::regex("data-window=\"(-?[0-9]+)\""))) s.window = std::stoi(m[1]);
  if (std::regex_search(dom, m, std::regex("data-updates=\"([0-9]+)\""))) s.updates = std::stoi(m[1]);
  return s;
}

TEST(MonitorPageTest, GaugesShowNumbersAndUpdateInHeadlessChromium) {
  if (::access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " is not installed (scripts/deps.sh installs it)";
  const std::string d = ::testing::TempDir() + "/monitor_page_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  Background job({Strata(), "monitor", "matmul", "--replicas", "2", "--seconds", "120", "--n", "160",
                  "--matmuls-per-step", "4", "--map-cost-ms", "2", "--monitor-interval", "0.5", "--monitor-port", "0"},
                 d + "/out", d + "/err");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(job.WaitForErr("monitor: serving http://", 60)) << job.Err();
  std::smatch m;
  const std::string err = job.Err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("serving (http://127\\.0\\.0\\.1:[0-9]+/)"))) << err;
  const std::string url = m[1];
  ASSERT_TRUE(job.WaitForErr("matrix ", 60)) << job.Err();  // the first window closed

  // --virtual-time-budget lets the page's timers and fetches run before the DOM is dumped.
  auto first = RunCommand(Chromium(d + "/profile1", "--virtual-time-budget=3000 --dump-dom " + url));
  ASSERT_EQ(first.exit_code, 0) << first.output.substr(0, 500);
  const PageState a = Parse(first.output);
  EXPECT_TRUE(std::regex_match(a.matrix, std::regex("[0-9]+%"))) << "matrix gauge shows '" << a.matrix << "'";
  EXPECT_TRUE(std::regex_match(a.idle, std::regex("[0-9]+%"))) << "idle gauge shows '" << a.idle << "'";
  EXPECT_GE(a.updates, 1);
  EXPECT_GE(a.window, 0);
  EXPECT_NE(first.output.find("running · 2 replica(s)"), std::string::npos) << first.output.substr(0, 2000);
  EXPECT_NE(first.output.find("<td>slow_map</td>"), std::string::npos);

  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // at least two more windows
  const std::string shot = std::filesystem::current_path().string() + "/monitor_page.png";
  std::filesystem::remove(shot);
  auto second = RunCommand(Chromium(d + "/profile2", "--virtual-time-budget=3000 --window-size=1280,1100 --dump-dom " + url));
  ASSERT_EQ(second.exit_code, 0);
  const PageState b = Parse(second.output);
  EXPECT_TRUE(std::regex_match(b.matrix, std::regex("[0-9]+%"))) << b.matrix;
  EXPECT_GT(b.window, a.window) << "the page did not move on to a later window";

  auto png = RunCommand(Chromium(d + "/profile3", "--virtual-time-budget=3000 --window-size=1280,1100 --screenshot=" +
                                                      shot + " " + url),
                        true);
  EXPECT_EQ(png.exit_code, 0) << png.output.substr(0, 500);
  ASSERT_TRUE(std::filesystem::exists(shot)) << png.output.substr(0, 500);
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);  // a rendered page, not a blank image
  RecordProperty("screenshot", shot);
  std::printf("screenshot: %s\n", shot.c_str());
  job.Stop();
}

}  // namespace
}  // namespace strata::testing
