// The argument checks every graph op shares (graph.cc, graph/ops/*.cc): an op's label comes
// first in each message ("conv2d (Conv2D): "), then what is wrong. Internal.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "strata/graph/graph.h"

namespace strata::graph::checks {

inline std::string S(const Shape& s) { return s.ToString(); }

inline bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kBF16; }

inline Status CheckFloat(const std::string& label, const char* what, Value v) {
  if (!IsFloat(v.dtype()))
    return InvalidArgument(label + what + " must be f32 or bf16, found " + std::string(DTypeName(v.dtype())));
  return Status::OK();
}

inline Status CheckSameDType(const std::string& label, Value a, Value b) {
  if (a.dtype() != b.dtype())
    return InvalidArgument(label + "dtypes differ: " + std::string(DTypeName(a.dtype())) + " and " +
                           std::string(DTypeName(b.dtype())));
  return Status::OK();
}

inline Status CheckValid(const std::string& label, const std::vector<Value>& vs, const Graph* g) {
  for (const Value& v : vs)
    if (!v.valid() || v.graph != g || v.node >= g->num_nodes() ||
        v.output >= static_cast<int>(g->node(v.node).out_shapes.size()))
      return InvalidArgument(label + "an input is not a value of this graph");
  return Status::OK();
}

inline Result<std::vector<int>> NormalizeAxes(const std::string& label, std::vector<int> axes, int rank) {
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (int& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return InvalidArgument(label + "axis out of range for rank " + std::to_string(rank));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return InvalidArgument(label + "repeated axis");
  return axes;
}

}  // namespace strata::graph::checks
