// Runs the strata binary the way a user would and captures what it prints.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace strata::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout (and stderr when merged)
};

// Runs `command` through /bin/sh. With `merge_stderr`, stderr is captured too.
inline CommandResult RunCommand(const std::string& command, bool merge_stderr = false) {
  CommandResult r;
  std::string full = command + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string Strata() { return STRATA_BINARY; }

}  // namespace strata::testing
