// What runs a model's training step on the replicas: one compiled program per local replica
// (replica 0 trains the model's own variables, the others copies that take the new weights after
// every update), the reducer that averages their gradient blocks over every replica of every
// worker (starting buckets from the programs' kernel hooks during the backward pass), the
// cross-replica sum synchronized batch norm meets inside the programs, and the sharded optimizer
// update. Model::TrainStep (model.cc) calls the phases in order, so the step reads top to bottom
// there; Model keeps the graph, the layers and the Keras-facing API. Internal to keras/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/distribute/cross_replica_sum.h"
#include "strata/distribute/reducer.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/model_internal.h"
#include "strata/keras/optimizer_state.h"

namespace strata::keras {

class TrainingReplicas {
 public:
  // `programs`: one compiled training program per local replica, programs[0] on `variables`
  // (the model's), the others on copies of them. Sets up the reducer and, where the programs
  // have synchronized batch norm kernels, their cross-replica sum.
  TrainingReplicas(distribute::Strategy& strategy, std::vector<CompiledProgram> programs,
                   std::shared_ptr<backend::VariableStore> variables, OptimizerState& optimizer, const std::string& model_name);

  int count() const { return static_cast<int>(programs_.size()); }
  CompiledProgram& replica(int r) { return programs_[static_cast<size_t>(r)]; }
  const CompiledProgram& replica(int r) const { return programs_[static_cast<size_t>(r)]; }
  int64_t batch() const { return programs_[0].batch; }  // rows per replica

  // Replica r's forward and backward pass at global step `step` (its inputs fed, `fed` saying
  // whether that worked), then its part of the gradient reduction. Every replica calls it,
  // also after an error (`sync` carries the failure), so none waits forever.
  Status GradientPhase(int r, const Status& fed, int64_t step, distribute::StepSync& sync);
  // Replica r clips and updates its slice of the weights at `lr`, the replicas' moving
  // statistics are averaged, and every replica takes the new weights. Skipped where `sync`
  // failed.
  void UpdatePhase(int r, float lr, int64_t step, distribute::StepSync& sync);
  // Every replica takes replica 0's (the model's) weights: after a load or a restore.
  void TakeModelWeights();

  distribute::ReducerStats reducer_stats() const { return reducer_->stats(); }

 private:
  void SetUpReducer();

  distribute::Strategy& strategy_;
  std::vector<CompiledProgram> programs_;
  std::shared_ptr<backend::VariableStore> variables_;  // the model's: replica 0's
  OptimizerState& optimizer_;
  std::unique_ptr<distribute::Reducer> reducer_;               // the gradient blocks' mean
  std::vector<const float*> replica_states_;                   // each replica's state block (moving statistics)
  std::unique_ptr<distribute::CrossReplicaSum> batch_norm_sum_;  // null: no synchronized batch norm to serve
};

}  // namespace strata::keras
