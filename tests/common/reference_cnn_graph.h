// The reference CNN built directly as a graph, below Keras: a fixture for the backend tests
// (cpu against the f64 reference backend, allocation counting, fusion and scheduling) and the
// step micro-benchmark (bench/step_bench.cc), which exercise graph/ and backend/ without the
// keras layer. The model users train is models/reference-cnn.json (`strata train`,
// `strata bench-step`); this is the same architecture, not a second way to train it.
//
//   Conv(32,3,same)-BN-ReLU, Conv(32,3,same)-BN-ReLU, MaxPool 2,
//   Conv(64,3,same)-BN-ReLU, Conv(64,3,same)-BN-ReLU, MaxPool 2,
//   Flatten, Dense(128)-ReLU, Dropout(0.3), Dense(10); sparse softmax cross-entropy.
// Layers follow Keras defaults (conv and dense with bias, Glorot-uniform kernels, batch norm
// momentum 0.99 and epsilon 1e-3). bench/torch_reference_cnn.py builds the same model.
//
// A training graph holds the forward pass, the loss and the gradients of the trainable
// variables; like every Strata graph it has no optimizer ops. The optimizer (SGD with Nesterov
// momentum 0.9) is applied after each Program::Run() by ApplyReferenceSgd, outside the program,
// as keras::OptimizerState does.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/backend/compile.h"
#include "strata/graph/graph.h"

namespace strata::testing {

struct ReferenceCnn {
  graph::Value images;  // f32 [B, 28, 28, 1]
  graph::Value labels;  // i32 [B]
  graph::Value logits;  // f32 [B, 10]
  graph::Value loss;    // f32 []
  std::vector<graph::Value> grads;  // training: one per trainable variable, in creation order
};

struct ReferenceCnnOptions {
  int64_t batch = 128;
  int height = 28, width = 28, channels = 1, classes = 10;
  bool training = true;  // false: inference graph (moving statistics, no dropout, no gradients)
  float dropout = 0.3f;
  uint64_t seed = 1;
};

Result<ReferenceCnn> BuildReferenceCnn(graph::Graph& g, const ReferenceCnnOptions& o = {});

// One SGD step (Nesterov momentum `momentum`) on the trainable block of `vars`:
// params[0, num_trainable) -= ... grads, through `backend`'s ApplyUpdate. `velocity` is the
// momentum slot, zero-filled to num_trainable on first use.
void ApplyReferenceSgd(const backend::Backend& backend, backend::VariableStore& vars, float lr,
                       std::vector<float>* velocity, float momentum = 0.9f);

}  // namespace strata::testing
