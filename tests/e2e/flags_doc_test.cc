// docs/cli.md lists every flag of every command with the test that shows its effect (issue 21,
// part 0). This keeps the page true: a flag `strata <command> --help` shows and the page does
// not list fails, and so does a test the page names that does not exist in tests/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cli_support.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The flags a help text lists: lines that start, after spaces, with --name.
std::set<std::string> HelpFlags(const std::string& help) {
  std::set<std::string> flags;
  static const std::regex flag(R"(^\s+--([a-z0-9-]+))");
  std::istringstream in(help);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, flag) && m[1] != "help") flags.insert(m[1]);
  return flags;
}

// The part of the page under "## `strata COMMAND`", up to the next "## ".
std::string Section(const std::string& page, const std::string& command) {
  const std::string head = "## `strata " + command + "`";
  const size_t at = page.find(head);
  if (at == std::string::npos) return "";
  const size_t end = page.find("\n## ", at + head.size());
  return page.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(FlagsDoc, EveryFlagOfEveryCommandIsListedWithATestThatExists) {
  const std::string page = Slurp(fs::path(STRATA_SOURCE_DIR) / "docs" / "cli.md");
  ASSERT_FALSE(page.empty());
  int flags_seen = 0;
  for (const char* command : {"train", "evaluate", "predict", "make-records", "bench-input", "bench-step", "devices",
                              "monitor", "export"}) {
    auto help = RunCommand(Strata() + " " + command + " --help");
    ASSERT_EQ(help.exit_code, 0) << command;
    const std::string section = Section(page, command);
    ASSERT_FALSE(section.empty()) << "docs/cli.md has no section for strata " << command;
    for (const std::string& flag : HelpFlags(help.output)) {
      ++flags_seen;
      EXPECT_NE(section.find("| `--" + flag), std::string::npos) << "strata " << command << " --" << flag;
    }
  }
  for (const char* sub : {"count", "inspect", "verify", "write"}) {
    auto help = RunCommand(Strata() + " records " + sub + " --help");
    ASSERT_EQ(help.exit_code, 0) << sub;
    for (const std::string& flag : HelpFlags(help.output)) {
      ++flags_seen;
      EXPECT_NE(Section(page, "records").find("| `" + std::string(sub) + " --" + flag), std::string::npos)
          << "strata records " << sub << " --" << flag;
    }
  }
  EXPECT_GT(flags_seen, 100) << "the help texts were read";

  // Every Suite.Name in the tables is a TEST or TEST_F of tests/.
  std::string sources;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(STRATA_SOURCE_DIR) / "tests"))
    if (e.is_regular_file() && e.path().extension() == ".cc") sources += Slurp(e.path());
  static const std::regex name(R"(\b([A-Z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9]*)\b)");
  std::istringstream rows(page);
  std::string row;
  int named = 0;
  while (std::getline(rows, row)) {
    if (row.rfind("| `", 0) != 0) continue;
    const std::string tests = row.substr(row.rfind(" | ") + 3);
    for (std::sregex_iterator it(tests.begin(), tests.end(), name), end; it != end; ++it) {
      ++named;
      const std::string defined = "(" + (*it)[1].str() + ", " + (*it)[2].str() + ")";  // TEST(Suite, Name)
      EXPECT_NE(sources.find(defined), std::string::npos) << "docs/cli.md names " << it->str() << ", which is no test";
    }
  }
  EXPECT_GT(named, 100);
}

}  // namespace
}  // namespace strata::testing
