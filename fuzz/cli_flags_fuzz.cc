// Fuzzes the command line's flag parsing (tools/strata/command.h FlagParser), which every
// `strata` subcommand uses. Input: the arguments, separated by NUL bytes. Any arguments must
// give "go on" (-1), 0 (--help) or kExitUsage with a one-line error, never a crash or
// undefined behaviour; a value that is accepted must be exactly what was written: an integer
// that fits int64 (no silent saturation), a finite number, a string as given.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../tools/strata/command.h"

static void Check(bool ok) {
  if (!ok) std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (size > 0) args.push_back(cur);

  bool verbose = false;
  std::string out = "unset";
  int64_t steps = -7;
  double lr = -7;
  strata::cli::FlagParser flags("fuzz", "[flags] FILE...", "the fuzz target's flags");
  flags.Bool("verbose", &verbose, "a bool");
  flags.String("out", &out, "a string");
  flags.Int("steps", &steps, "an integer");
  flags.Double("lr", &lr, "a number");
  std::vector<std::string> positional;
  const int rc = flags.Parse(args, &positional);
  Check(rc == -1 || rc == strata::cli::kExitOk || rc == strata::cli::kExitUsage);
  if (rc != -1) return 0;
  // Accepted: walk the arguments again (the documented grammar) and check that every flag
  // holds what its last occurrence said, read independently, and the rest are positional.
  bool want_verbose = false;
  std::string want_out = "unset", steps_text, lr_text;
  std::vector<std::string> want_positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    Check(a != "--help" && a != "-h");
    if (a.rfind("--", 0) != 0 || a == "--") {
      want_positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (name == "verbose") {
      want_verbose = eq == std::string::npos || value == "true";
      continue;
    }
    if (eq == std::string::npos) value = args.at(++i);
    if (name == "out") want_out = value;
    else if (name == "steps") steps_text = value;
    else if (name == "lr") lr_text = value;
    else Check(false);  // an unknown flag was accepted
  }
  Check(verbose == want_verbose && out == want_out && positional == want_positional);
  if (!steps_text.empty()) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(steps_text.c_str(), &end, 10);
    Check(*end == 0 && errno != ERANGE && steps == v);
  }
  if (!lr_text.empty()) {
    char* end = nullptr;
    const double v = std::strtod(lr_text.c_str(), &end);
    Check(*end == 0 && std::isfinite(lr) && lr == v);
  }
  return 0;
}
