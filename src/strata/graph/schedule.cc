#include "strata/graph/schedule.h"

namespace strata::graph {

bool IsLeaf(OpKind k) { return k == OpKind::kInput || k == OpKind::kVariable || k == OpKind::kConstant; }

Schedule MakeSchedule(const Graph& g, const std::vector<Value>& fetches) {
  const int n = g.num_nodes();
  Schedule s;
  s.live.assign(n, false);
  for (const Value& f : fetches) s.live[f.node] = true;
  for (int i = 0; i < n; ++i)
    if (g.node(i).has_side_effects) s.live[i] = true;
  for (int i = n - 1; i >= 0; --i)
    if (s.live[i])
      for (const Value& in : g.node(i).inputs) s.live[in.node] = true;
  for (int i = 0; i < n; ++i)
    if (s.live[i] && !IsLeaf(g.node(i).kind)) s.order.push_back(i);
  s.consumers.resize(n);
  for (int i = 0; i < n; ++i) s.consumers[i].resize(g.node(i).out_shapes.size());
  for (size_t pos = 0; pos < s.order.size(); ++pos)
    for (const Value& in : g.node(s.order[pos]).inputs) s.consumers[in.node][in.output].push_back(static_cast<int>(pos));
  return s;
}

}  // namespace strata::graph
