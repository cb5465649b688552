// Prometheus's own checker on a /metrics body: `promtool check metrics` (Debian's prometheus
// package, scripts/deps.sh) parses the exposition text and lints it against Prometheus's naming
// rules (base units, HELP on every metric, counters ending in _total).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/temp_path.h"

namespace strata::test {

inline void ExpectPromtoolAccepts(const std::string& metrics) {
  ASSERT_EQ(std::system("command -v promtool >/dev/null"), 0) << "promtool is not installed (scripts/deps.sh installs prometheus)";
  const std::string path = TempPath("metrics.txt");
  std::ofstream(path) << metrics;
  FILE* p = ::popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string said;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) said.append(buf, n);
  const int status = ::pclose(p);
  std::remove(path.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "promtool check metrics refused it:\n" << said << "\n" << metrics;
  EXPECT_EQ(said, "") << metrics;
}

}  // namespace strata::test
