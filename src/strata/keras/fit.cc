// Model::fit: the training loop, top to bottom.
//
// Per step: take the next global batch from the input pipeline (the time blocked there is the
// observer's input wait: the monitor's idle time), then the training step (train_step.h,
// TrainStep::Run): every replica copies its shard into its compiled program and runs forward +
// backward, the gradients are reduce-scattered and each replica updates its slice of the
// weights; finally the logs go to the callbacks.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "strata/core/clock.h"
#include "strata/core/file.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/fault_point.h"
#include "strata/keras/fit_state.h"
#include "strata/keras/model.h"
#include "strata/keras/optimizer_state.h"
#include "strata/keras/train_step.h"
#include "strata/keras/step_observer.h"
#include "strata/record/crc32c.h"

namespace strata::keras {


void Model::set_learning_rate_scale(double s) { fit_->lr_scale = s; }
double Model::learning_rate_scale() const { return fit_->lr_scale; }
void Model::set_learning_rate_override(double lr) { fit_->lr_override = lr; }
int64_t Model::resumed_step_in_epoch() const { return fit_->resume_step_in_epoch; }

Result<History> Model::fit(const data::Dataset& train, FitOptions options) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before fit()");
  if (options.epochs <= options.initial_epoch) return History{};

  // Callbacks: the progress bar first, then the user's, in order.
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (options.verbose > 0) callbacks.push_back(std::make_shared<ProgbarLogger>());
  callbacks.insert(callbacks.end(), options.callbacks.begin(), options.callbacks.end());
  for (auto& cb : callbacks) cb->set_model(this);

  TrainInfo info;
  info.epochs = options.epochs;
  info.initial_epoch = options.initial_epoch;
  info.steps_per_epoch = options.steps_per_epoch;
  info.verbose = options.verbose;
  info.replicas = strategy_->num_replicas_in_sync();
  stop_training = false;
  epoch_ = options.initial_epoch;
  for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnTrainBegin(info));  // may restore a backup
  int first_epoch = epoch_;
  // Several workers must train the same model from the same step (checked before any
  // collective of the step, so a mismatch is an error rather than a hang or garbage).
  // The gradient buckets too: workers cutting or encoding them differently would exchange
  // mismatched messages.
  std::string all_reduce;
  if (const distribute::Collective* hosts = strategy_->collective())
    all_reduce = ", gradient all-reduce in " + std::to_string(hosts->bucket_bytes()) + "-byte buckets, " +
                 (hosts->stats().bf16_wire ? "bf16" : "f32") + " on the wire";
  STRATA_RETURN_IF_ERROR(strategy_->CheckWorkersAgree(
      "the model and schedule",
      "model '" + name_ + "' (" + std::to_string(layers_.size()) + " layers, " + std::to_string(count_params()) +
          " params, optimizer " + compile_.optimizer.name() + ", precision " + compile_.precision + "), epochs " +
          std::to_string(first_epoch) + ".." + std::to_string(options.epochs) + ", " +
          std::to_string(options.steps_per_epoch) + " steps per epoch, at step " + std::to_string(global_step_) + all_reduce));
  bool batch_checked = false;

  STRATA_ASSIGN_OR_RETURN(auto iterator, train.make_iterator());
  fit_->iterator = iterator.get();
  int64_t skip_steps = 0;
  if (fit_->resume_pending) {
    if (!fit_->resume_iterator_state.empty())
      STRATA_RETURN_IF_ERROR(iterator->Restore(fit_->resume_iterator_state).WithContext("restoring the input position"));
    skip_steps = fit_->resume_step_in_epoch;
    fit_->resume_pending = false;
  }

  // The observer (the monitor) hears of the steps once they are compiled (fit_->observer set).
  struct ObserverScope {  // fit may return early with an error: end the observer, drop the pointers
    Model* m;
    ~ObserverScope() {
      if (m->fit_->observer != nullptr) (void)m->fit_->observer->OnTrainEnd();  // an error ended fit: that one counts
      m->fit_->observer = nullptr;
      std::lock_guard<std::mutex> lock(m->fit_->iterator_mu);
      m->fit_->iterator = nullptr;
    }
  } observer_scope{this};

  auto metrics = MakeMetrics();
  History history;
  Logs logs;
  for (int epoch = first_epoch; epoch < options.epochs && !stop_training; ++epoch) {
    epoch_ = epoch;
    for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnEpochBegin(epoch));
    Mean loss_mean;
    for (auto& m : metrics) m->Reset();
    int64_t step = skip_steps;  // > 0 only in the epoch a backup resumed inside
    skip_steps = 0;

    for (; options.steps_per_epoch < 0 || step < options.steps_per_epoch; ++step) {
      // 1. The next global batch [B, ...] (x..., y).
      data::Element batch;
      bool end = false;
      if (fit_->observer)  // every replica waits while the next batch is produced
        for (int r = 0; r < num_replicas(); ++r) fit_->observer->InputWaitBegin(r);
      Status got = iterator->GetNext(&batch, &end);
      if (fit_->observer)
        for (int r = 0; r < num_replicas(); ++r) fit_->observer->InputWaitEnd(r);
      STRATA_RETURN_IF_ERROR(got.WithContext("input pipeline, epoch " + std::to_string(epoch + 1)));
      if (end) {
        if (options.steps_per_epoch > 0)
          return OutOfRange("fit: the training data ran out after " + std::to_string(step) + " of " +
                            std::to_string(options.steps_per_epoch) + " steps in epoch " + std::to_string(epoch + 1) +
                            " (use repeat() on the dataset, or fewer steps_per_epoch)");
        // No steps_per_epoch: an epoch is one pass; start the next pass.
        STRATA_ASSIGN_OR_RETURN(auto next, train.make_iterator());
        std::lock_guard<std::mutex> lock(fit_->iterator_mu);  // the observer may be reading its statistics
        iterator = std::move(next);
        fit_->iterator = iterator.get();
        break;
      }
      if (batch.size() < 2 || batch[0].rank() == 0)
        return InvalidArgument("fit: elements must be batches (x, y); got " + batch.DebugString());

      // 2. Forward, backward, all-reduce and update on every replica (compiled on the first
      //    batch: static shapes; the observer's first step comes after compilation).
      if (options.observer && !fit_->observer) {
        STRATA_RETURN_IF_ERROR(EnsureTrainPrograms(batch[0].shape()[0] / std::max(1, num_replicas())));
        // The pipeline through fit_->iterator: a new pass replaces the iterator.
        STRATA_RETURN_IF_ERROR(options.observer->OnTrainBegin(
            {.replicas = num_replicas(), .bf16 = compile_.precision == "mixed_bfloat16", .initial_step = global_step_,
             .pipeline = [this] {
               std::lock_guard<std::mutex> lock(fit_->iterator_mu);
               return fit_->iterator ? fit_->iterator->Stats() : std::vector<data::StageStatsSnapshot>{};
             }}));
        fit_->observer = options.observer;
      }
      if (!batch_checked) {
        STRATA_RETURN_IF_ERROR(strategy_->CheckWorkersAgree(
            "the batch", "per-worker batch " + batch.DebugString() + " over " + std::to_string(num_replicas()) + " replicas"));
        batch_checked = true;
      }
      STRATA_RETURN_IF_ERROR(Step(batch, &logs, metrics, loss_mean)
                                 .WithContext("training step " + std::to_string(global_step_)));

      // 3. Progress bar, checkpoints and the rest.
      for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnTrainBatchEnd(step, logs));
      if (stop_training) break;
    }

    // 4. Validation, then the epoch's logs go to the callbacks and the History.
    if (options.validation_data) {
      if (fit_->observer) fit_->observer->Pause();  // no training steps while validating
      for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnTestBegin());
      auto validated = RunEvaluation(*options.validation_data, options.validation_steps, nullptr);
      if (fit_->observer) fit_->observer->Resume();
      STRATA_ASSIGN_OR_RETURN(Logs val, std::move(validated));
      for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnTestEnd(val));
      for (const auto& [k, v] : val) logs.emplace_back("val_" + k, v);
    }
    for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnEpochEnd(epoch, logs));
    history.epoch.push_back(epoch);
    for (const auto& [k, v] : logs) history.history[k].push_back(v);
  }
  epoch_ = options.epochs;
  // Keras's finalize_variable_values: with use_ema the model fit leaves (to save, evaluate and
  // predict) is the moving average of its weights; the backup callbacks wrote the weights and
  // the average both, so a resumed fit goes on from the same state.
  if (global_step_ > 0 && optimizer_->FinalizeWeights(store_->params().data<float>()) && train_step_)
    train_step_->TakeModelWeights();
  if (fit_->observer) {
    StepObserver* observer = fit_->observer;
    fit_->observer = nullptr;
    STRATA_RETURN_IF_ERROR(observer->OnTrainEnd());
  }
  for (auto& cb : callbacks) STRATA_RETURN_IF_ERROR(cb->OnTrainEnd(logs));
  fit_->iterator = nullptr;
  return history;
}

// With several workers the backup's iterator record holds every worker's input position
// (each reads its own shard of the stream): "strata-workers W\n", then per worker, in rank
// order, its length in decimal, "\n" and its bytes.

Status Model::SaveBackup(const std::string& path, int64_t next_epoch, int64_t step_in_epoch) {
  if (!store_) return InvalidArgument("SaveBackup: model " + name_ + " is not compiled");
  CheckpointState st;
  st.global_step = global_step_;
  st.epoch = next_epoch;
  st.step_in_epoch = step_in_epoch;
  if (fit_->iterator) {
    STRATA_ASSIGN_OR_RETURN(st.iterator_state, fit_->iterator->Save());
  }
  // Several workers (MultiWorker BackupAndRestore): every worker hands its input position to
  // the chief, which alone writes the backup (atomically: temporary, fsync, rename).
  if (strategy_ && strategy_->num_workers() > 1) {
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> states, strategy_->collective()->AllGather(st.iterator_state));
    if (strategy_->worker_index() != 0) return Status::OK();
    st.iterator_state = PackWorkerStates(states);
  }
  // The recovery tests' kill -9 inside a backup write lands here (keras/fault_point.h).
  static std::atomic<int64_t> backup_writes{0};
  const int64_t nth = ++backup_writes;
  const int worker = strategy_ ? strategy_->worker_index() : 0;
  return WriteCheckpoint(path, *store_, compile_.optimizer, optimizer_->slots(), st, [&] {
    PauseAtFaultPoint(FaultPoint::kBackupWrite, nth, worker,
                      "backup of global step " + std::to_string(global_step_) + " in its temporary beside " + path +
                          ", not yet renamed onto it");
  });
}

Status Model::RestoreBackup(const std::string& path) {
  if (!store_) return InvalidArgument("RestoreBackup: compile model " + name_ + " first");
  CheckpointState st;
  STRATA_RETURN_IF_ERROR(ReadCheckpoint(path, store_.get(), &optimizer_->slots(), &st));
  if (strategy_ && strategy_->num_workers() > 1) {
    // Every worker reads the same file (a file system they share): check they got the same
    // weights and position, then take this worker's input position.
    const Tensor& p = store_->params();
    const uint32_t crc = crc32c::Extend(crc32c::Value(static_cast<const char*>(p.raw_data()), p.nbytes()),
                                        static_cast<const char*>(optimizer_->slots().raw_data()), optimizer_->slots().nbytes());
    char digest[16];
    std::snprintf(digest, sizeof(digest), "%08x", crc);
    STRATA_RETURN_IF_ERROR(strategy_->CheckWorkersAgree(
        "the backup " + path, "global step " + std::to_string(st.global_step) + ", epoch " + std::to_string(st.epoch) +
                                  ", step " + std::to_string(st.step_in_epoch) + ", weights crc32c " + digest));
    STRATA_ASSIGN_OR_RETURN(st.iterator_state,
                            WorkerIteratorState(path, st.iterator_state, strategy_->worker_index(), strategy_->num_workers()));
  } else if (IsPackedWorkerStates(st.iterator_state)) {
    // Several workers' positions, one worker now: refused with both counts.
    STRATA_RETURN_IF_ERROR(WorkerIteratorState(path, st.iterator_state, 0, 1).status());
  }
  if (train_step_) train_step_->TakeModelWeights();
  global_step_ = st.global_step;
  epoch_ = static_cast<int>(st.epoch);
  fit_->resume_pending = true;
  fit_->resume_step_in_epoch = st.step_in_epoch;
  fit_->resume_iterator_state = std::move(st.iterator_state);
  return Status::OK();
}

}  // namespace strata::keras
