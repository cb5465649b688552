// Every row of the op table (tests/graph/op_cases.h) timed on the cpu backend: the op's
// forward and backward compiled as one program, per Run(). The rows' shapes are the test
// shapes (small: this measures per-kernel overhead as much as arithmetic); the `scale`
// argument multiplies the batch dimension of every input to see the arithmetic.
#include <benchmark/benchmark.h>

#include <random>

#include "../tests/graph/op_cases.h"
#include "strata/backend/compile.h"
#include "strata/graph/autodiff.h"

namespace strata {
namespace {

void BM_Op(benchmark::State& state, testing::OpCase c) {
  const int64_t scale = state.range(0);
  graph::Graph g;
  std::vector<graph::Value> xs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::vector<int64_t> d = c.inputs[i].dims();
    // Scale the batch of activations only (the first input, and same-shaped partners).
    if (!d.empty() && (i == 0 || c.inputs[i] == c.inputs[0])) d[0] *= scale;
    xs.push_back(g.Input("x" + std::to_string(i), DType::kF32, Shape(d)));
  }
  auto y = c.build(g, xs);
  if (!y.ok()) return state.SkipWithError(y.status().ToString().c_str());
  std::vector<graph::Value> fetches{*y};
  if (c.finite_differences) {
    graph::Value loss = *y;
    if (y->shape() != Shape{}) loss = *g.ReduceSum(*y);
    auto grads = graph::Gradients(g, loss, xs);
    if (!grads.ok()) return state.SkipWithError(grads.status().ToString().c_str());
    fetches.insert(fetches.end(), grads->begin(), grads->end());
  }
  auto p = backend::Compile(g, {.fetches = fetches});
  if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
  std::mt19937 rng(1);
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).kind != graph::OpKind::kInput) continue;
    Tensor& t = (*p)->input(g.output(i));
    for (int64_t e = 0; e < t.num_elements(); ++e) {
      if (t.dtype() == DType::kI32) t.data<int32_t>()[e] = static_cast<int32_t>(rng() % c.classes);
      else t.data<float>()[e] = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    }
  }
  for (auto _ : state) {
    Status st = (*p)->Run();
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
  }
  state.counters["kernels"] = static_cast<double>((*p)->kernels().size());
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>((*p)->flops_per_step()),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Rows whose inputs do not share a batch dimension (transposed operands, labels, rows of
// different lengths) run at scale 1 only.
bool Scales(const testing::OpCase& c) {
  graph::Graph g;
  std::vector<graph::Value> xs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::vector<int64_t> d = c.inputs[i].dims();
    if (!d.empty() && (i == 0 || c.inputs[i] == c.inputs[0])) d[0] *= 2;
    xs.push_back(g.Input("x" + std::to_string(i), DType::kF32, Shape(d)));
  }
  return c.build(g, xs).ok() && c.name.find("cross_entropy") == std::string::npos;
}

const bool kRegistered = [] {
  for (const testing::OpCase& c : testing::AllOpCases()) {
    auto* b = benchmark::RegisterBenchmark(("BM_Op/" + c.name).c_str(), BM_Op, c)->Arg(1)->Unit(benchmark::kMicrosecond);
    if (Scales(c)) b->Arg(64);
  }
  return true;
}();

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
