// OptimizerState: a compiled model's optimizer, applied as a sharded update. It owns the
// optimizer slots (Keras's optimizer variables), each parallel to the flat block of trainable
// parameters, and updates one replica's slice of that block at a time: clipping by norm, the
// weight decay, then the backend's update rule (backend::Backend::ApplyUpdate).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/backend/compile.h"
#include "strata/core/tensor.h"
#include "strata/keras/optimizers.h"

namespace strata::keras {

class OptimizerState {
 public:
  OptimizerState() = default;
  // For `variables`' trainable block, updated on `backend`, by `replicas` local replicas.
  OptimizerState(const Optimizer& optimizer, const backend::VariableStore& variables, backend::Backend* backend,
                 int replicas);

  // The slots, f32 [blocks, num_trainable]: SGD with momentum: 1; Adam(W): m, v; RMSprop: rms, momentum;
  // with use_ema the moving average last.
  Tensor& slots() { return slots_; }
  const Tensor& slots() const { return slots_; }
  // Clipping needs every slice's sum of squares before any slice is scaled.
  bool clips() const { return !clip_groups_.empty(); }

  // Replica r's share of clipping: its slice [begin, end) of `grads`' sum of squares per group.
  void ClipPartialSums(int replica, const float* grads, int64_t begin, int64_t end);
  // The update of slice [begin, end) of the parameters `w` from the averaged gradients `g` at
  // learning rate lr; `step` is the number of updates made before this one.
  void ApplySlice(float* w, float* g, int64_t begin, int64_t end, float lr, int64_t step);
  // Keras's finalize_variable_values: with use_ema, the trainable block `w` takes the moving
  // average (true); otherwise nothing changes (false).
  bool FinalizeWeights(float* w) const;

 private:
  Optimizer optimizer_;
  backend::Backend* backend_ = nullptr;
  int64_t num_trainable_ = 0;
  int replicas_ = 1;
  Tensor slots_;
  int num_slot_blocks_ = 0;
  // Clipping by norm: [begin, end) of each group in the gradient block (one per trainable
  // variable for clipnorm, the whole block for global_clipnorm; empty: no clipping), and each
  // replica's partial sums of squares, f64 [replicas, groups], added up after a barrier.
  std::vector<std::pair<int64_t, int64_t>> clip_groups_;
  std::vector<double> clip_partials_;
};

}  // namespace strata::keras
