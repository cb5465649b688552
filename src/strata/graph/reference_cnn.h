// The reference CNN of the benchmarks (Fashion-MNIST, 28x28x1), built as a training graph:
//   Conv(32,3,same)-BN-ReLU, Conv(32,3,same)-BN-ReLU, MaxPool 2,
//   Conv(64,3,same)-BN-ReLU, Conv(64,3,same)-BN-ReLU, MaxPool 2,
//   Flatten, Dense(128)-ReLU, Dropout(0.3), Dense(10);
//   sparse softmax cross-entropy; SGD with Nesterov momentum 0.9.
// Layers follow Keras defaults (conv and dense with bias, Glorot-uniform kernels, batch norm
// momentum 0.99 and epsilon 1e-3). bench/torch_reference_cnn.py builds the same model.
#pragma once

#include <string>

#include "strata/graph/graph.h"

namespace strata::graph {

struct ReferenceCnn {
  Value images;  // f32 [B, 28, 28, 1]
  Value labels;  // i32 [B]
  Value lr;      // f32 [] learning rate, fed each step
  Value logits;  // f32 [B, 10]
  Value loss;    // f32 []
};

struct ReferenceCnnOptions {
  int64_t batch = 128;
  int height = 28, width = 28, channels = 1, classes = 10;
  bool training = true;     // false: inference graph (moving statistics, no dropout, no updates)
  float dropout = 0.3f;
  float momentum = 0.9f;    // SGD Nesterov
  uint64_t seed = 1;
};

Result<ReferenceCnn> BuildReferenceCnn(Graph& g, const ReferenceCnnOptions& o = {});

}  // namespace strata::graph
