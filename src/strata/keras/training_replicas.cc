#include "strata/keras/training_replicas.h"

#include <cstring>

namespace strata::keras {

TrainingReplicas::TrainingReplicas(distribute::Strategy& strategy, std::vector<CompiledProgram> programs,
                                   std::shared_ptr<backend::VariableStore> variables, OptimizerState& optimizer,
                                   const std::string& model_name)
    : strategy_(strategy), programs_(std::move(programs)), variables_(std::move(variables)), optimizer_(optimizer) {
  // The state after each replica's trainable block, averaged after every update.
  for (const CompiledProgram& c : programs_)
    replica_states_.push_back(c.store->params().data<float>() + variables_->num_trainable());
  // Synchronized batch norm: every replica's program sums its statistics with the others'.
  int64_t sync_kernels = 0;
  for (const backend::KernelInfo& k : programs_[0].program->kernels())
    sync_kernels += k.op == "bn_fwd_sync" || k.op == "bn_bwd_sync";
  if (sync_kernels > 0 && (count() > 1 || strategy_.collective() != nullptr)) {
    batch_norm_sum_ = std::make_unique<distribute::CrossReplicaSum>(strategy_, sync_kernels,
                                                                    "model " + model_name + ": synchronized batch norm");
    for (int r = 0; r < count(); ++r)
      replica(r).program->set_cross_replica_sum(
          [this, r](double* data, int64_t n) { return batch_norm_sum_->Sum(r, data, n); });
  }
  SetUpReducer();
}

// The gradient reduction: the replicas' gradient blocks averaged into replica 0's. Where the
// backend says when each gradient is final (and every replica's program has the same kernels),
// the reducer may start the cross-host all-reduce during the backward pass from the programs'
// kernel hooks.
void TrainingReplicas::SetUpReducer() {
  distribute::ReducerOptions o;
  for (CompiledProgram& c : programs_) o.grads.push_back(c.store->grads().data<float>());
  o.n = variables_->num_trainable();
  const backend::Program& p0 = *programs_[0].program;
  o.kernels = static_cast<int>(p0.kernels().size());
  bool same_kernels = true;
  for (const CompiledProgram& c : programs_)
    same_kernels = same_kernels && c.program->kernels().size() == p0.kernels().size();
  if (same_kernels)
    for (const backend::GradientReady& g : p0.gradient_ready()) o.ready.push_back({g.begin, g.end, g.kernel});
  reducer_ = distribute::MakeReducer(strategy_, std::move(o));
  for (int r = 0; r < count(); ++r) {
    std::vector<uint8_t> after = reducer_->HookPoints(r);
    if (after.empty()) continue;
    replica(r).program->set_kernel_hook(std::move(after), [this, r](int k) { return reducer_->AfterKernel(r, k); });
  }
}

Status TrainingReplicas::GradientPhase(int r, const Status& fed, int64_t step, distribute::StepSync& sync) {
  CompiledProgram& c = replica(r);
  Status s = fed;
  c.program->set_step(static_cast<uint64_t>(step));  // dropout masks follow the global step
  if (batch_norm_sum_) batch_norm_sum_->BeginStep(r);
  if (s.ok()) s = c.program->Run();
  if (!s.ok()) sync.failed = true;
  if (batch_norm_sum_) batch_norm_sum_->FinishStep(r);
  Status reduced = reducer_->Reduce(r, sync);
  return s.ok() ? reduced : s;
}

void TrainingReplicas::UpdatePhase(int r, float lr, int64_t step, distribute::StepSync& sync) {
  const int R = count();
  const int64_t num_trainable = variables_->num_trainable();
  const auto [begin, end] = strategy_.Slice(num_trainable, r);
  float* w = variables_->params().data<float>();
  float* g = variables_->grads().data<float>();
  // Clipping by norm needs every slice's sum of squares before any replica scales its own.
  if (optimizer_.clips()) {
    if (!sync.failed) optimizer_.ClipPartialSums(r, g, begin, end);
    if (R > 1) strategy_.barrier();
  }
  if (!sync.failed) optimizer_.ApplySlice(w, g, begin, end, lr, step);
  if (R == 1 && !strategy_.collective()) return;
  strategy_.barrier();
  // Moving statistics (state after the trainable block): the mean over all replicas.
  const int64_t num_params = variables_->params().num_elements();
  if (!sync.failed && r == 0 && num_params > num_trainable) {
    Status hs = distribute::MeanOverReplicas(strategy_, replica_states_, w + num_trainable, num_params - num_trainable);
    if (!hs.ok()) {
      sync.cross_host = hs;
      sync.failed = true;
    }
  }
  strategy_.barrier();
  // Every other replica takes the new weights.
  if (!sync.failed && r > 0)
    std::memcpy(replica(r).store->params().raw_data(), variables_->params().raw_data(), variables_->params().nbytes());
}

void TrainingReplicas::TakeModelWeights() {
  for (int r = 1; r < count(); ++r)
    std::memcpy(replica(r).store->params().raw_data(), variables_->params().raw_data(), variables_->params().nbytes());
}

}  // namespace strata::keras
