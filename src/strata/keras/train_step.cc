#include "strata/keras/train_step.h"

#include <algorithm>
#include <cstring>

#include "strata/keras/feed.h"

namespace strata::keras {

TrainStep::TrainStep(distribute::Strategy& strategy, std::vector<CompiledProgram> programs,
                     std::shared_ptr<backend::VariableStore> variables, OptimizerState& optimizer, const Loss& loss,
                     std::string model_name)
    : strategy_(strategy),
      programs_(std::move(programs)),
      variables_(std::move(variables)),
      optimizer_(optimizer),
      loss_(loss),
      model_name_(std::move(model_name)) {
  // The state after each replica's trainable block, averaged after every update.
  for (const CompiledProgram& c : programs_)
    replica_states_.push_back(c.store->params().data<float>() + variables_->num_trainable());
  // Synchronized batch norm: every replica's program sums its statistics with the others'.
  int64_t sync_kernels = 0;
  for (const backend::KernelInfo& k : programs_[0].program->kernels())
    sync_kernels += k.op == "bn_fwd_sync" || k.op == "bn_bwd_sync";
  if (sync_kernels > 0 && (count() > 1 || strategy_.collective() != nullptr)) {
    batch_norm_sum_ = std::make_unique<distribute::CrossReplicaSum>(strategy_, sync_kernels,
                                                                    "model " + model_name_ + ": synchronized batch norm");
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
void TrainStep::SetUpReducer() {
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

// ---- the training step --------------------------------------------------------------------
//
// One step on a global batch, every replica r on its own thread (strategy_.run):
//   1. feed:     replica r's rows [r P, (r + 1) P) of the batch, P = the per-replica batch;
//   2. forward and backward: the compiled program (synchronized batch norm meets the other
//      replicas inside it);
//   3. reduce:   the gradient blocks averaged over every replica of every worker (reducer_);
//   4. update:   replica r updates its slice of the weights (optimizer_), the replicas' moving
//      statistics are averaged, and every replica takes the new weights.
// Every replica makes the same barrier and collective calls even after an error (StepSync),
// so none waits forever; a failure anywhere skips the update everywhere.
Status TrainStep::Run(const data::Element& b, float lr, int64_t step, StepObserver* observer) {
  STRATA_RETURN_IF_ERROR(Prepare(b));
  distribute::StepSync sync;
  Status st = strategy_.run([&](int r) -> Status {
    if (observer) observer->StepBegin(r);
    Status s = GradientPhase(r, b, step, sync);  // feed, forward and backward, reduce
    UpdatePhase(r, lr, step, sync);              // the sharded update
    if (observer) {
      const backend::Program& p = *replica(r).program;
      observer->StepEnd(r, static_cast<double>(p.matrix_flops_per_step()), batch(),
                        static_cast<double>(p.executed_matrix_flops_per_step()));
    }
    return s;
  });
  STRATA_RETURN_IF_ERROR(sync.cross_host.WithContext("worker " + std::to_string(strategy_.worker_index())));
  if (observer && st.ok() && !sync.failed)
    if (const distribute::StepTiming* timing = reducer_->last_step()) observer->AllReduceStep(*timing);
  return st;
}

Status TrainStep::Prepare(const data::Element& b) {
  const CompiledProgram& c0 = replica(0);
  const int64_t k = c0.outputs[0].shape().num_elements() / c0.batch;  // outputs per example
  return ClassIndicesOf(loss_, b, b[0].shape()[0], k, c0.inputs.size(), model_name_, &labels_);
}

Status TrainStep::GradientPhase(int r, const data::Element& b, int64_t step, distribute::StepSync& sync) {
  CompiledProgram& c = replica(r);
  Status s = FeedInputs(c, b, r * batch(), batch(), &labels_, model_name_);
  c.program->set_step(static_cast<uint64_t>(step));  // dropout masks follow the global step
  if (batch_norm_sum_) batch_norm_sum_->BeginStep(r);
  if (s.ok()) s = c.program->Run();
  if (!s.ok()) sync.failed = true;
  if (batch_norm_sum_) batch_norm_sum_->FinishStep(r);
  Status reduced = reducer_->Reduce(r, sync);
  return s.ok() ? reduced : s;
}

void TrainStep::UpdatePhase(int r, float lr, int64_t step, distribute::StepSync& sync) {
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

Model::GradientTape TrainStep::Outputs() const {
  Model::GradientTape tape;
  const int R = count();
  const int64_t per_replica = batch();
  double loss_sum = 0;
  for (int r = 0; r < R; ++r) {
    const CompiledProgram& c = replica(r);
    loss_sum += *c.program->fetch(c.loss).data<float>();
    const Tensor& out = c.program->fetch(c.outputs[0]);
    const int64_t k = out.num_elements() / per_replica;
    // This replica's class indices: [P] from row r P (binary_crossentropy: [P K]).
    const int64_t per_row = static_cast<int64_t>(labels_.size()) / (per_replica * R);
    const int64_t* labels = labels_.empty() ? nullptr : labels_.data() + r * per_replica * per_row;
    tape.replicas.push_back(loss_.ForMetrics(out.data<float>(), per_replica, k, labels));
  }
  tape.loss = loss_sum / R;
  return tape;
}

void TrainStep::TakeModelWeights() {
  for (int r = 1; r < count(); ++r)
    std::memcpy(replica(r).store->params().raw_data(), variables_->params().raw_data(), variables_->params().nbytes());
}

// ---- the evaluation twin --------------------------------------------------------------------

EvalStep::EvalStep(distribute::Strategy& strategy, std::vector<CompiledProgram> programs, int64_t global_batch,
                   const Loss& loss, std::string model_name)
    : strategy_(strategy),
      programs_(std::move(programs)),
      global_batch_(global_batch),
      loss_(loss),
      model_name_(std::move(model_name)) {}

Status EvalStep::Run(const data::Element& batch, int64_t rows, std::vector<float>* out, int64_t* k) {
  const CompiledProgram& c0 = programs_[0];
  *k = c0.outputs[0].shape().num_elements() / c0.batch;
  out->resize(static_cast<size_t>(rows * *k));
  auto run_replica = [&](int r) -> Status {
    if (r >= static_cast<int>(programs_.size())) return Status::OK();
    CompiledProgram& c = programs_[static_cast<size_t>(r)];
    const int64_t row0 = std::min<int64_t>(rows, r * c.batch), n = std::min<int64_t>(rows - row0, c.batch);
    if (n == 0) return Status::OK();  // a short last batch may leave the later replicas nothing
    STRATA_RETURN_IF_ERROR(FeedInputs(c, batch, row0, n, /*labels=*/nullptr, model_name_));
    STRATA_RETURN_IF_ERROR(c.program->Run());
    const Tensor& y = c.program->fetch(c.outputs[0]);
    std::memcpy(out->data() + row0 * *k, y.data<float>(), static_cast<size_t>(n * *k) * sizeof(float));
    return Status::OK();
  };
  if (programs_.size() == 1) return run_replica(0);  // on the calling thread
  return strategy_.run(run_replica);
}

Result<const std::vector<int64_t>*> EvalStep::Labels(const data::Element& batch, int64_t rows, int64_t k) {
  STRATA_RETURN_IF_ERROR(ClassIndicesOf(loss_, batch, rows, k, programs_[0].inputs.size(), model_name_, &labels_));
  return &labels_;
}

}  // namespace strata::keras
