// The reference evaluator: every op as the plainest loop over row-major [N, H, W, C] data,
// in f64. It is the oracle: gradient rules are checked against its central finite differences,
// and the oneDNN backend against its results. Slow by design; never used for training.
//
// bf16 values are f64 rounded to bf16 at the op that produces them (Cast, or a bf16 op), so
// the evaluator also models mixed precision's rounding.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "strata/graph/graph.h"
#include "strata/graph/schedule.h"

namespace strata::backend::reference {

// Whether the evaluator computes `kind`: a leaf, or an op some family registered a kernel for
// (ops.h). The op registry's test walks every kind through every layer with it.
bool HasReferenceKernel(graph::OpKind kind);

class Evaluator {
 public:
  Evaluator(const graph::Graph& g, std::vector<graph::Value> fetches);

  // leaves: node id -> values of every Input and Variable the step reads (training batch
  // norm updates its moving statistics in place). Labels are stored as doubles.
  // `step` seeds dropout masks (backend/dropout_mask.h).
  Status Run(std::map<int, std::vector<double>>& leaves, uint64_t step);

  // A computed value (after Run); empty when the value was not needed.
  const std::vector<double>& value(graph::Value v) const;

 private:
  Status RunNode(int i, std::map<int, std::vector<double>>& leaves, uint64_t step);
  std::vector<double>& out(int node, int k) { return values_[{node, k}]; }
  const std::vector<double>& in(const graph::Value& v, std::map<int, std::vector<double>>& leaves);

  const graph::Graph& g_;
  graph::Schedule schedule_;
  std::map<std::pair<int, int>, std::vector<double>> values_;
};

}  // namespace strata::backend::reference
