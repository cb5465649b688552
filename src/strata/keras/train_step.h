// The training step and its evaluation twin, each an object that holds what it runs and its
// per-step scratch.
//
// TrainStep runs one step on a global batch (Run reads top to bottom): one compiled program per
// local replica (replica 0 trains the model's own variables, the others copies that take the new
// weights after every update), the labels converted once for all replicas, the reducer that
// averages the gradient blocks over every replica of every worker (starting buckets from the
// programs' kernel hooks during the backward pass), the cross-replica sum synchronized batch
// norm meets inside the programs, and the sharded optimizer update. EvalStep runs predict's and
// evaluate's programs, a global batch split over the replicas' cores. Model keeps the graph, the
// layers, the variables and the Keras API, builds the programs and hands them over. Internal to
// keras/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/distribute/cross_replica_sum.h"
#include "strata/distribute/reducer.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/losses.h"
#include "strata/keras/model_internal.h"
#include "strata/keras/optimizer_state.h"
#include "strata/keras/step_observer.h"

namespace strata::keras {

class TrainStep {
 public:
  // `programs`: one compiled training program per local replica, programs[0] on `variables`
  // (the model's), the others on copies of them. Sets up the reducer and, where the programs
  // have synchronized batch norm kernels, their cross-replica sum.
  TrainStep(distribute::Strategy& strategy, std::vector<CompiledProgram> programs,
            std::shared_ptr<backend::VariableStore> variables, OptimizerState& optimizer, const Loss& loss,
            std::string model_name);

  int count() const { return static_cast<int>(programs_.size()); }
  CompiledProgram& replica(int r) { return programs_[static_cast<size_t>(r)]; }
  const CompiledProgram& replica(int r) const { return programs_[static_cast<size_t>(r)]; }
  int64_t batch() const { return programs_[0].batch; }  // rows per replica

  // The whole step at global step `step`: on every replica, feed its rows, forward and backward,
  // reduce, update at `lr`; the observer (if any) hears each replica's begin and end.
  Status Run(const data::Element& batch, float lr, int64_t step, StepObserver* observer);

  // The phases, for the custom loop (compute_gradients, then apply_gradients). Prepare checks
  // the global batch and converts its labels once for every replica.
  Status Prepare(const data::Element& batch);
  // Replica r: its rows of the batch fed, forward and backward at global step `step`, then its
  // part of the gradient reduction. Every replica calls it, also after an error (`sync` carries
  // the failure), so none waits forever.
  Status GradientPhase(int r, const data::Element& batch, int64_t step, distribute::StepSync& sync);
  // Replica r clips and updates its slice of the weights at `lr`, the replicas' moving
  // statistics are averaged, and every replica takes the new weights. Skipped where `sync`
  // failed.
  void UpdatePhase(int r, float lr, int64_t step, distribute::StepSync& sync);
  // The loss and each replica's metric batch of the step just run.
  Model::GradientTape Outputs() const;
  // Every replica takes replica 0's (the model's) weights: after a load or a restore.
  void TakeModelWeights();

  distribute::ReducerStats reducer_stats() const { return reducer_->stats(); }

 private:
  void SetUpReducer();

  distribute::Strategy& strategy_;
  std::vector<CompiledProgram> programs_;
  std::shared_ptr<backend::VariableStore> variables_;  // the model's: replica 0's
  OptimizerState& optimizer_;
  const Loss& loss_;
  std::string model_name_;
  std::vector<int64_t> labels_;                                // the global batch's class indices
  std::unique_ptr<distribute::Reducer> reducer_;               // the gradient blocks' mean
  std::vector<const float*> replica_states_;                   // each replica's state block (moving statistics)
  std::unique_ptr<distribute::CrossReplicaSum> batch_norm_sum_;  // null: no synchronized batch norm to serve
};

class EvalStep {
 public:
  // `programs`: one inference program per local replica used, each for `per_replica` rows of a
  // global batch of `global_batch`, all reading the model's variables.
  EvalStep(distribute::Strategy& strategy, std::vector<CompiledProgram> programs, int64_t global_batch,
           const Loss& loss, std::string model_name);

  int64_t global_batch() const { return global_batch_; }
  const CompiledProgram& replica(int r) const { return programs_[static_cast<size_t>(r)]; }
  backend::Program* program() const { return programs_[0].program.get(); }

  // Runs a batch of `rows` rows (<= global_batch()), replica r on its rows [r P, min((r + 1) P,
  // rows)) and on its own core, and gathers the (first) output's rows into `out` [rows * k];
  // k: the output's elements per row.
  Status Run(const data::Element& batch, int64_t rows, std::vector<float>* out, int64_t* k);
  // The class indices of the batch's labels, for the loss's host evaluation.
  Result<const std::vector<int64_t>*> Labels(const data::Element& batch, int64_t rows, int64_t k);

 private:
  distribute::Strategy& strategy_;
  std::vector<CompiledProgram> programs_;
  int64_t global_batch_;
  const Loss& loss_;
  std::string model_name_;
  std::vector<int64_t> labels_;
};

}  // namespace strata::keras
