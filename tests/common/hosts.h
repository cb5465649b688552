// Hosts on one machine for a test: network namespaces joined by a bridge, each link shaped,
// mpirun across them. tests/common/hosts.sh does the work (its header says how); this class
// makes a cluster in its constructor and removes it, with every process still running on it,
// in its destructor, so a failed assertion leaves nothing behind. A test killed by its ctest
// timeout leaves its cluster to the next `hosts.sh up`, which removes clusters whose creator
// died.
//
//   STRATA_SKIP_WITHOUT_HOSTS();                 // GTEST_SKIP with the reason, where none can be made
//   Hosts hosts(2, "1gbit");                      // h1, h2 at 10.200.0.1-2, one core each
//   ASSERT_TRUE(hosts.ok()) << hosts.error();
//   RunCommand(hosts.Mpirun(1, strata + " train ..."));
//   hosts.Link(2, false);                         // pull host 2's cable
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "../e2e/cli_support.h"

namespace strata::testing {

class Hosts {
 public:
  static std::string Script() { return std::string(STRATA_SOURCE_DIR) + "/tests/common/hosts.sh"; }

  // Why namespaced hosts cannot be made on this machine; empty when they can.
  static std::string Unavailable() {
    CommandResult r = RunCommand(Script() + " check", true);
    if (r.exit_code == 0) return "";
    return r.output.empty() ? "hosts.sh check failed with status " + std::to_string(r.exit_code) : r.output;
  }

  // `n` hosts whose links run at `rate` (tc's syntax: 10mbit, 1gbit; "none": unshaped).
  // `cores` lists each host's core ("0 1 0 1"); empty: host k on core (k - 1) mod the cores.
  Hosts(int n, const std::string& rate, const std::string& cores = "") : n_(n) {
    static std::atomic<int> made{0};
    name_ = "s" + std::to_string(::getpid() % 100000) + "x" + std::to_string(made++);
    CommandResult r = RunCommand("HOSTS_OWNER=" + std::to_string(::getpid()) + (cores.empty() ? "" : " HOSTS_CORES='" + cores + "'") +
                                     " " + Script() + " up " + name_ + " " + std::to_string(n) + " " + rate,
                                 true);
    ok_ = r.exit_code == 0;
    if (!ok_) error_ = "hosts.sh up " + name_ + " failed:\n" + r.output;
  }
  ~Hosts() { RunCommand(Script() + " down " + name_, true); }
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  int size() const { return n_; }

  // The command line that runs `args` (an mpirun program and its arguments) with `slots` ranks
  // on every host, mpirun itself on h1. The caller's environment reaches every rank.
  std::string Mpirun(int slots, const std::string& args) const {
    return Script() + " mpirun " + name_ + " " + std::to_string(slots) + " " + args;
  }
  // Host k's link at `rate`, both directions.
  bool Rate(int k, const std::string& rate) const { return Verb("rate " + name_ + " " + std::to_string(k) + " " + rate); }
  // Host k's network interface up or down.
  bool Link(int k, bool up) const { return Verb("link " + name_ + " " + std::to_string(k) + (up ? " up" : " down")); }
  // SIGSTOP / SIGCONT / SIGKILL to every process on host k.
  bool Freeze(int k) const { return Verb("freeze " + name_ + " " + std::to_string(k)); }
  bool Thaw(int k) const { return Verb("thaw " + name_ + " " + std::to_string(k)); }
  bool Kill(int k) const { return Verb("kill " + name_ + " " + std::to_string(k)); }
  // The processes running on host k.
  std::vector<long> Pids(int k) const {
    std::istringstream in(RunCommand(Script() + " pids " + name_ + " " + std::to_string(k)).output);
    std::vector<long> pids;
    for (long p; in >> p;) pids.push_back(p);
    return pids;
  }

 private:
  bool Verb(const std::string& args) const {
    CommandResult r = RunCommand(Script() + " " + args, true);
    if (r.exit_code != 0) std::fprintf(stderr, "hosts.sh %s: %s\n", args.c_str(), r.output.c_str());
    return r.exit_code == 0;
  }

  int n_;
  std::string name_, error_;
  bool ok_ = false;
};

// Skips the test, saying why, where namespaced hosts cannot be made (not root, no iproute2,
// a kernel without network namespaces); ctest shows it as skipped, never as passed.
#define STRATA_SKIP_WITHOUT_HOSTS()                                                 \
  do {                                                                              \
    if (const std::string why = ::strata::testing::Hosts::Unavailable(); !why.empty()) \
      GTEST_SKIP() << why;                                                          \
  } while (0)

}  // namespace strata::testing
