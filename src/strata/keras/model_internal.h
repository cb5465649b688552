// What the parts of Model share and no user needs: the nodes of the functional graph that
// Input() and Call() build, a model's layer table, a compiled program with its graph values, and
// Keras's shape notation. Included only by keras/*.cc (functional.cc, summary.cc, feed.cc,
// model.cc, train_step.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/keras/model.h"

namespace strata::keras {

namespace internal {
struct KNode {
  LayerPtr layer;              // null: a model input
  std::vector<KTensor> inbound;
  Shape input_shape;           // inputs only: per-example shape
  DType dtype = DType::kF32;
  std::string input_name;
};
}  // namespace internal

struct Model::LayerEntry {
  LayerPtr layer;                               // null for an input
  const internal::KNode* input_node = nullptr;  // inputs only
  std::vector<const internal::KNode*> nodes;    // every call of the layer
  std::vector<std::string> output_shapes;       // per call, "(None, 28, 28, 32)"
  std::vector<std::string> connected_to;        // per call
  int64_t params = 0, trainable = 0;
};

// One replica's compiled program (training or evaluation) and the graph values it is fed and
// fetched by.
struct CompiledProgram {
  std::unique_ptr<graph::Graph> graph;
  std::unique_ptr<backend::Program> program;
  std::shared_ptr<backend::VariableStore> store;
  std::vector<graph::Value> inputs;   // model inputs [b, ...]
  graph::Value labels;                // training only
  graph::Value loss;                  // training only
  std::vector<graph::Value> outputs;  // model outputs
  int64_t batch = 0;                  // rows per run: the per-replica batch (training and evaluation)
};

// "(None, 28, 28, 32)": a per-batch shape as Keras prints it.
std::string KerasShape(const Shape& s);

}  // namespace strata::keras
