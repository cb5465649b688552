// CrossReplicaSum: the sum of a few f64 values over every replica of every worker, called
// from inside a compiled program (synchronized batch norm's statistics). A distribute
// service: it knows nothing of batch norm.
//
// Each replica writes its partial sums into its slot and meets the others at the strategy
// barrier; then every replica adds the slots in replica order (the same bits everywhere).
// Across hosts replica 0 (the only thread that talks to MPI) all-reduces that sum and a second
// barrier hands it to the others. Slots alternate by call parity: a replica may write call
// k+1's partial while another still reads call k's, but never call k+2's (call k+1's barrier
// lies between).
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

class CrossReplicaSum {
 public:
  // `calls_per_step`: how many sums one step of every replica asks for; `what` names the
  // caller in errors ("model m: synchronized batch norm").
  CrossReplicaSum(Strategy& strategy, int64_t calls_per_step, std::string what);

  // Replica r: data[0, n) = the sum over all replicas' data[0, n). n < 0: r has failed this
  // step and only keeps the others company at the barriers.
  Status Sum(int replica, double* data, int64_t n);
  // Before replica r's step, and after it: a replica that stopped early still meets the
  // others at every remaining call of the step.
  void BeginStep(int replica) { calls_[static_cast<size_t>(replica)] = 0; }
  void FinishStep(int replica);

 private:
  Strategy& strategy_;
  int64_t calls_per_step_;
  std::string what_;
  std::vector<std::vector<double>> slots_[2];  // [parity][replica]: f64 [n] partial sums
  std::vector<double> total_[2];               // [parity]: across hosts, the all-reduced sum
  Status status_[2];                           // [parity]: the all-reduce's outcome (replica 0 writes)
  std::vector<int64_t> calls_;                 // [replica]: calls made in the current step
};

}  // namespace strata::distribute

#pragma GCC visibility pop
