// Compile pass 1: which nodes run, in what order, and who reads each value.
//
// Nodes are appended in dependency order, so graph order is a topological order. A step runs
// the nodes the fetches and the side-effecting nodes need, in graph order.
#pragma once

#include <vector>

#include "strata/graph/graph.h"

namespace strata::graph {

struct Schedule {
  std::vector<int> order;                       // nodes to execute (leaves excluded)
  std::vector<bool> live;                       // node i is needed (leaves included)
  std::vector<std::vector<std::vector<int>>> consumers;  // [node][output] -> positions in `order`
};

Schedule MakeSchedule(const Graph& g, const std::vector<Value>& fetches);

bool IsLeaf(OpKind k);  // Input, Variable, Constant

}  // namespace strata::graph
