// strata: the command-line front door. Subcommands live in cmd_*.cc.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "strata/core/cpu.h"
#include "strata/core/version.h"

namespace {

void PrintHelp() {
  std::printf(
      "strata %s: train neural networks at the speed of the hardware (the TPU/Keras workflow in C++)\n\n"
      "usage: strata <command> [flags]    strata <command> --help    strata --version\n\ncommands:\n",
      STRATA_VERSION);
  auto commands = strata::cli::Registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : commands) std::printf("  %-14s %s\n", c.name.c_str(), c.summary.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2 && args[0] == "help") {
      args = {args[1], "--help"};  // `strata help records` == `strata records --help`
    } else {
      PrintHelp();
      return 0;
    }
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::printf("strata %s\n", STRATA_VERSION);
    return 0;
  }
  if (auto cap = strata::MaxIsaSetting(); !cap.ok()) {
    std::fprintf(stderr, "strata: %s\n", cap.status().message().c_str());
    return strata::cli::kExitUsage;
  }
  for (const auto& c : strata::cli::Registry()) {
    if (c.name == args[0]) return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::fprintf(stderr, "strata: unknown command '%s' (see 'strata help')\n", args[0].c_str());
  return strata::cli::kExitUsage;
}
