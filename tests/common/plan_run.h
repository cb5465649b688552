// The harness of the cpu backend's plan tests (tests/backend/*_plan_test.cc): a small graph with
// its inputs and fetches, compiled with the caller's options, its inputs filled from a seeded
// uniform(-1, 1), run once; the kernels the plan chose and the fetched values. And the check
// that two runs' values agree within a tolerance relative to each fetch's largest magnitude.
// Header-only: it uses gtest's ASSERT, so only gtest binaries include it.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/graph/graph.h"

namespace strata::backend::test_plans {

struct PlanStep {
  graph::Graph g;
  std::vector<graph::Value> inputs, fetches;
  std::vector<graph::Value> positive;  // inputs filled from [0.5, 2.5) instead (variances)
};

struct PlanRun {
  std::vector<KernelInfo> kernels;
  std::vector<std::vector<float>> values;  // one per fetch
};

// Compiles s with `o` (its fetches: the step's), fills and runs it once.
inline void CompileAndRun(const PlanStep& s, CompileOptions o, uint64_t seed, PlanRun& out) {
  o.fetches = s.fetches;
  auto program = Compile(s.g, o);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const graph::Value& v : s.inputs) {
    Tensor& t = (*program)->input(v);
    const bool positive = std::find(s.positive.begin(), s.positive.end(), v) != s.positive.end();
    for (int64_t e = 0; e < t.num_elements(); ++e) t.data<float>()[e] = positive ? 1.5f + u(rng) : u(rng);
  }
  ASSERT_TRUE((*program)->Run().ok());
  out.kernels = (*program)->kernels();
  for (const graph::Value& f : s.fetches) {
    const Tensor& t = (*program)->fetch(f);
    out.values.emplace_back(t.data<float>(), t.data<float>() + t.num_elements());
  }
}

// How many of the run's kernels are of op `op` with `name_part` in their name.
inline int CountKernels(const PlanRun& run, const std::string& op, const std::string& name_part = "") {
  return static_cast<int>(std::count_if(run.kernels.begin(), run.kernels.end(), [&](const KernelInfo& k) {
    return k.op == op && k.name.find(name_part) != std::string::npos;
  }));
}

// Every fetched element within `relative` x (the fetch's largest magnitude in `ref`, at least 1e-3).
inline void ExpectSameValues(const PlanRun& ours, const PlanRun& ref, double relative) {
  ASSERT_EQ(ours.values.size(), ref.values.size());
  for (size_t f = 0; f < ours.values.size(); ++f) {
    ASSERT_EQ(ours.values[f].size(), ref.values[f].size());
    double scale = 1e-3;
    for (float v : ref.values[f]) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (size_t e = 0; e < ours.values[f].size(); ++e) {
      ASSERT_NEAR(ours.values[f][e], ref.values[f][e], relative * scale) << "fetch " << f << " element " << e;
    }
  }
}

}  // namespace strata::backend::test_plans
