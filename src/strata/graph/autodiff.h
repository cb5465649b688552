// Reverse-mode automatic differentiation on the symbolic graph.
//
// Gradients(g, loss, xs) appends to `g` the nodes that compute d loss / d x for each x (a
// variable, an input or any value) and returns those values in the order of `xs`. Only
// nodes on a path from some x to `loss` are differentiated (no gradient for the images of a
// first convolution is ever computed). `loss` must be a scalar f32. A value no path connects
// to the loss gets a zero gradient. Gradients of variables are marked with
// Graph::SetGradientOf so the compiler places them in the contiguous gradient block.
//
// Every op's rule is checked against central finite differences in f64 by
// tests/graph/op_gradient_test.cc (one table of op cases).
#pragma once

#include <vector>

#include "strata/graph/graph.h"

namespace strata::graph {

Result<std::vector<Value>> Gradients(Graph& g, Value loss, const std::vector<Value>& xs);

// All trainable variables of `g` in creation order (what Keras passes as `xs`).
std::vector<Value> TrainableVariables(const Graph& g);

}  // namespace strata::graph
