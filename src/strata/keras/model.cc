#include "strata/keras/model.h"

#include <cstdio>
#include <cstring>

#include "strata/backend/backend.h"
#include "strata/graph/autodiff.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/fit_state.h"
#include "strata/keras/h5_weights.h"
#include "strata/keras/model_internal.h"
#include "strata/keras/optimizer_state.h"
#include "strata/keras/train_step.h"

namespace strata::keras {

using graph::Value;

double LogValue(const Logs& logs, const std::string& key, double fallback) {
  for (const auto& [k, v] : logs)
    if (k == key) return v;
  return fallback;
}

Model::Model(std::string name, std::vector<KTensor> inputs, std::vector<KTensor> outputs)
    : name_(std::move(name)), inputs_(std::move(inputs)), outputs_(std::move(outputs)), fit_(std::make_unique<FitState>()) {}

Model::~Model() = default;

// ---- compile --------------------------------------------------------------------------------

Status Model::compile(CompileOptions options) {
  compile_ = std::move(options);
  if (compile_.precision != "float32" && compile_.precision != "mixed_bfloat16")
    return InvalidArgument("compile: precision must be \"float32\" or \"mixed_bfloat16\", got \"" + compile_.precision + "\"");
  if (compile_.precision == "mixed_bfloat16")
    STRATA_RETURN_IF_ERROR(backend::PrecisionSupported(backend::Precision::kBF16).WithContext("compile"));
  const Optimizer& opt = compile_.optimizer;
  if (!(opt.clipnorm >= 0) || !(opt.global_clipnorm >= 0))
    return InvalidArgument("compile: " + opt.name() + " clipnorm and global_clipnorm must be >= 0 (0: off)");
  if (opt.clipnorm > 0 && opt.global_clipnorm > 0)
    return InvalidArgument("compile: " + opt.name() + " takes clipnorm or global_clipnorm, not both (as Keras)");
  for (const auto& m : compile_.metrics) {
    auto metric = MakeMetric(m, compile_.loss);
    if (!metric.ok()) return metric.status().WithContext("compile");
  }
  strategy_ = compile_.strategy ? compile_.strategy : distribute::Strategy::Current();
  if (!strategy_) {
    owned_strategy_ = distribute::OneDeviceStrategy();
    strategy_ = owned_strategy_.get();
  }
  train_step_.reset();
  eval_step_.reset();
  // The variables come from the training graph and do not depend on the batch size: build
  // it at batch 1 now so weights can be loaded (and counted) before the first fit.
  CompiledProgram probe;
  probe.graph = std::make_unique<graph::Graph>();
  STRATA_RETURN_IF_ERROR(BuildTrainGraph(probe, 1, 0));
  std::shared_ptr<backend::VariableStore> previous = std::move(store_);
  STRATA_ASSIGN_OR_RETURN(store_, backend::VariableStore::Create(*probe.graph));
  // A recompile (after freezing or unfreezing layers) keeps the weights, as Keras's does: the
  // layout changes with what is trainable, so each variable is carried over by name.
  if (previous) {
    for (const auto& e : store_->entries()) {
      const backend::VariableStore::Entry* old = previous->Find(e.name);
      if (old == nullptr || old->shape != e.shape) continue;
      std::memcpy(store_->params().data<float>() + e.offset, previous->params().data<float>() + old->offset,
                  static_cast<size_t>(e.size) * sizeof(float));
    }
  }
  compiled_trainable_ = TrainableFlags();
  const std::string backend_name = BackendOptions({}, nullptr).backend;
  backend::Backend* backend = backend::FindBackend(backend_name);
  if (backend == nullptr) return InvalidArgument("compile: no backend \"" + backend_name + "\"");
  optimizer_ = std::make_unique<OptimizerState>(opt, *store_, backend, num_replicas());
  gradients_ready_ = false;
  global_step_ = 0;
  compiled_ = true;
  return Status::OK();
}

// Forward (training mode), loss and gradients of one replica; the update is not in the
// graph: it runs after the gradients of all replicas are reduced (UpdatePhase).
Status Model::BuildTrainGraph(CompiledProgram& c, int64_t batch, uint64_t replica_seed) {
  graph::Graph& g = *c.graph;
  BuildContext ctx;
  ctx.replica = static_cast<int>(replica_seed);
  STRATA_RETURN_IF_ERROR(BuildForward(g, /*training=*/true, batch, &c.inputs, &c.outputs, &ctx));
  if (c.outputs.size() != 1)
    return Unimplemented("model " + name_ + ": training supports one output (this model has " +
                         std::to_string(c.outputs.size()) + ")");
  STRATA_ASSIGN_OR_RETURN(Loss::InGraph loss, compile_.loss.Build(g, c.outputs[0], batch));
  c.labels = loss.labels;
  Value loss_value = loss.value;
  // L2 regularizers: loss += l2 * sum(w^2).
  for (const auto& v : ctx.variables) {
    if (v.l2 <= 0) continue;
    STRATA_ASSIGN_OR_RETURN(Value sq, g.Multiply(v.value, v.value, v.layer + "/l2/square"));
    STRATA_ASSIGN_OR_RETURN(Value sum, g.ReduceSum(sq, {}, v.layer + "/l2/sum"));
    STRATA_ASSIGN_OR_RETURN(Value pen, g.Scale(sum, v.l2, v.layer + "/l2"));
    STRATA_ASSIGN_OR_RETURN(loss_value, g.Add(loss_value, pen, v.layer + "/l2/add"));
  }
  c.loss = loss_value;
  STRATA_RETURN_IF_ERROR(graph::Gradients(g, loss_value, graph::TrainableVariables(g)).status());
  c.batch = batch;
  return Status::OK();
}

backend::CompileOptions Model::BackendOptions(std::vector<Value> fetches, std::shared_ptr<backend::VariableStore> store) const {
  backend::CompileOptions o;
  o.fetches = std::move(fetches);
  o.threads = compile_.threads;
  o.precision = compile_.precision == "mixed_bfloat16" ? backend::Precision::kBF16 : backend::Precision::kF32;
  o.variables = std::move(store);
  return o;
}

Status Model::EnsureTrainPrograms(int64_t per_replica) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before fit()");
  if (train_step_) {
    if (per_replica != train_step_->batch())
      return InvalidArgument("model " + name_ + ": a batch of " + std::to_string(per_replica * num_replicas()) +
                             " rows, but the step was compiled for " + std::to_string(train_step_->batch() * num_replicas()) +
                             " (static shapes: batch the training data with drop_remainder=true)");
    return Status::OK();
  }
  const int r_count = num_replicas();
  std::vector<CompiledProgram> built(static_cast<size_t>(r_count));
  for (int r = 0; r < r_count; ++r) {
    CompiledProgram& c = built[static_cast<size_t>(r)];
    c.graph = std::make_unique<graph::Graph>();
    STRATA_RETURN_IF_ERROR(BuildTrainGraph(c, per_replica, static_cast<uint64_t>(strategy_->worker_index() * r_count + r)));
    // Replica 0 trains the model's own variables; the others get copies, refreshed from
    // replica 0 after every update.
    if (r == 0) {
      c.store = store_;
    } else {
      STRATA_ASSIGN_OR_RETURN(c.store, backend::VariableStore::Create(*c.graph));
      std::memcpy(c.store->params().raw_data(), store_->params().raw_data(), store_->params().nbytes());
    }
    auto program = backend::Compile(*c.graph, BackendOptions({c.loss, c.outputs[0]}, c.store));
    if (!program.ok()) return program.status().WithContext("model " + name_ + " replica " + std::to_string(r));
    c.program = std::move(program).value();
  }
  train_step_ = std::make_unique<TrainStep>(*strategy_, std::move(built), store_, *optimizer_, compile_.loss, name_);
  return Status::OK();
}

Status Model::EnsureEvalPrograms(int64_t batch) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before evaluate() or predict()");
  if (eval_step_ && eval_step_->global_batch() == batch) return Status::OK();
  eval_step_.reset();
  // Replica r runs rows [r P, (r + 1) P) of a global batch: no more programs than rows.
  const int64_t r_count = std::min<int64_t>(num_replicas(), batch);
  const int64_t per_replica = (batch + r_count - 1) / r_count;
  std::vector<CompiledProgram> built(static_cast<size_t>(r_count));
  for (CompiledProgram& c : built) {
    c.graph = std::make_unique<graph::Graph>();
    BuildContext ctx;
    ctx.fold_batch_norm = compile_.fold_batch_norm;
    STRATA_RETURN_IF_ERROR(BuildForward(*c.graph, /*training=*/false, per_replica, &c.inputs, &c.outputs, &ctx));
    // Every replica reads the model's own variables: evaluation writes none.
    auto program = backend::Compile(*c.graph, BackendOptions(c.outputs, store_));
    if (!program.ok()) return program.status().WithContext("model " + name_ + " evaluation program");
    c.program = std::move(program).value();
    c.batch = per_replica;
  }
  eval_step_ = std::make_unique<EvalStep>(*strategy_, std::move(built), batch, compile_.loss, name_);
  return Status::OK();
}

std::vector<std::unique_ptr<Metric>> Model::MakeMetrics() const {
  std::vector<std::unique_ptr<Metric>> m;
  for (const auto& name : compile_.metrics) m.push_back(std::move(MakeMetric(name, compile_.loss).value()));
  return m;
}

backend::Program* Model::train_program() { return train_step_ ? train_step_->replica(0).program.get() : nullptr; }
backend::Program* Model::eval_program() { return eval_step_ ? eval_step_->program() : nullptr; }
distribute::ReducerStats Model::reducer_stats() const {
  return train_step_ ? train_step_->reducer_stats() : distribute::ReducerStats{};
}

double Model::learning_rate() const {
  if (fit_->lr_override >= 0) return fit_->lr_override * fit_->lr_scale;
  return compile_.optimizer.learning_rate(global_step_) * fit_->lr_scale;
}

// ---- the training step (train_step.h: TrainStep::Run reads it top to bottom) -------------------

Status Model::PrepareStep(const data::Element& batch) {
  if (batch.size() == 0 || batch[0].rank() == 0)
    return InvalidArgument("model " + name_ + ": a training batch is (x..., y) with a batch dimension; got " +
                           batch.DebugString());
  const int64_t global_batch = batch[0].shape()[0];
  const int R = num_replicas();
  if (global_batch % R != 0)
    return InvalidArgument("model " + name_ + ": a global batch of " + std::to_string(global_batch) +
                           " rows does not split over " + std::to_string(R) +
                           " replicas (use a multiple of the replica count)");
  STRATA_RETURN_IF_ERROR(CheckTrainableUnchanged());
  return EnsureTrainPrograms(global_batch / R);
}

Status Model::Step(const data::Element& batch, Logs* logs, std::vector<std::unique_ptr<Metric>>& metrics,
                   Mean& loss_mean) {
  STRATA_RETURN_IF_ERROR(PrepareStep(batch));
  STRATA_RETURN_IF_ERROR(train_step_->Run(batch, static_cast<float>(learning_rate()), global_step_, fit_->observer));
  ++global_step_;
  // Loss and metrics from every replica's outputs.
  GradientTape out = train_step_->Outputs();
  for (const MetricBatch& b : out.replicas)
    for (auto& m : metrics) m->Update(b);
  loss_mean.Update(out.loss);
  *logs = {{"loss", loss_mean.Result()}};
  for (auto& m : metrics) logs->emplace_back(m->name(), m->Result());
  return Status::OK();
}

Result<Model::GradientTape> Model::compute_gradients(const data::Element& batch) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before compute_gradients()");
  if (batch.size() < 2 || batch[0].rank() == 0)
    return InvalidArgument("compute_gradients: a batch is (x..., y) with a batch dimension; got " + batch.DebugString());
  gradients_ready_ = false;
  STRATA_RETURN_IF_ERROR(PrepareStep(batch));
  STRATA_RETURN_IF_ERROR(train_step_->Prepare(batch));
  distribute::StepSync sync;
  Status st = strategy_->run([&](int r) { return train_step_->GradientPhase(r, batch, global_step_, sync); });
  STRATA_RETURN_IF_ERROR(sync.cross_host.WithContext("worker " + std::to_string(strategy_->worker_index())));
  STRATA_RETURN_IF_ERROR(st.WithContext("compute_gradients, step " + std::to_string(global_step_)));
  gradients_ready_ = true;
  return train_step_->Outputs();
}

Status Model::apply_gradients() {
  if (!gradients_ready_)
    return InvalidArgument("model " + name_ + ": apply_gradients() needs compute_gradients(batch) first (once per step)");
  gradients_ready_ = false;
  const float lr = static_cast<float>(learning_rate());
  distribute::StepSync sync;
  Status st = strategy_->run([&](int r) {
    train_step_->UpdatePhase(r, lr, global_step_, sync);
    return Status::OK();
  });
  STRATA_RETURN_IF_ERROR(sync.cross_host.WithContext("worker " + std::to_string(strategy_->worker_index())));
  STRATA_RETURN_IF_ERROR(st);
  ++global_step_;
  return Status::OK();
}

Result<Logs> Model::train_on_batch(const std::vector<Tensor>& x, const Tensor& y) {
  if (x.empty() || x[0].rank() == 0) return InvalidArgument("train_on_batch: x needs a batch dimension");
  data::Element e;
  e.tensors = x;
  e.tensors.push_back(y);
  auto metrics = MakeMetrics();
  Mean loss;
  Logs logs;
  STRATA_RETURN_IF_ERROR(Step(e, &logs, metrics, loss));
  return logs;
}

// ---- evaluate / predict -----------------------------------------------------------------------

Result<Logs> Model::RunEvaluation(const data::Dataset& ds, int64_t steps, Tensor* predictions) {
  STRATA_ASSIGN_OR_RETURN(auto it, ds.make_iterator());
  auto metrics = MakeMetrics();
  Mean loss_mean;
  std::vector<float> per_example, collected, outputs;
  Tensor dense;  // the labels as f32, where the loss needs them so
  std::vector<int64_t> row_shape;
  int64_t total_rows = 0;
  for (int64_t step = 0; steps < 0 || step < steps; ++step) {
    data::Element batch;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));
    if (end) break;
    if (batch.size() == 0 || batch[0].rank() == 0) return InvalidArgument("evaluate: elements must be batches");
    const int64_t rows = batch[0].shape()[0];
    // The first batch fixes the programs' batch; a shorter last batch is padded and cut.
    if (!eval_step_ || rows > eval_step_->global_batch()) STRATA_RETURN_IF_ERROR(EnsureEvalPrograms(rows));
    int64_t k = 0;
    STRATA_RETURN_IF_ERROR(eval_step_->Run(batch, rows, &outputs, &k));
    if (predictions) {
      collected.insert(collected.end(), outputs.begin(), outputs.end());
      const Shape& out_shape = eval_step_->replica(0).outputs[0].shape();
      row_shape.assign(out_shape.dims().begin() + 1, out_shape.dims().end());
      total_rows += rows;
      continue;
    }
    const size_t label_index = eval_step_->replica(0).inputs.size();
    STRATA_ASSIGN_OR_RETURN(const std::vector<int64_t>* labels, eval_step_->Labels(batch, rows, k));
    MetricBatch mb;
    STRATA_RETURN_IF_ERROR(
        compile_.loss.Evaluate(outputs.data(), rows, k, *labels, batch[label_index], &per_example, &dense, &mb));
    for (float l : per_example) loss_mean.Update(l);
    for (auto& m : metrics) m->Update(mb);
  }
  if (predictions) {
    std::vector<int64_t> dims = {total_rows};
    dims.insert(dims.end(), row_shape.begin(), row_shape.end());
    *predictions = Tensor(DType::kF32, Shape(dims));
    if (!collected.empty()) std::memcpy(predictions->raw_data(), collected.data(), collected.size() * sizeof(float));
    return Logs{};
  }
  Logs logs = {{"loss", loss_mean.Result()}};
  for (auto& m : metrics) logs.emplace_back(m->name(), m->Result());
  return logs;
}

Result<Logs> Model::evaluate(const data::Dataset& ds, EvaluateOptions options) {
  STRATA_ASSIGN_OR_RETURN(Logs logs, RunEvaluation(ds, options.steps, nullptr));
  if (options.verbose) {
    std::string line;
    for (const auto& [k, v] : logs) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%s%s: %.4f", line.empty() ? "" : " - ", k.c_str(), v);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
  return logs;
}

Result<Tensor> Model::predict(const data::Dataset& ds, int64_t steps) {
  Tensor out;
  STRATA_RETURN_IF_ERROR(RunEvaluation(ds, steps, &out).status());
  return out;
}

// ---- state ----------------------------------------------------------------------------------

Result<std::vector<float>> Model::get_state() const {
  if (!store_) return InvalidArgument("model " + name_ + ": not compiled");
  const Tensor& p = store_->params();
  std::vector<float> v(p.data<float>(), p.data<float>() + p.num_elements());
  v.insert(v.end(), optimizer_->slots().data<float>(), optimizer_->slots().data<float>() + optimizer_->slots().num_elements());
  return v;
}

Status Model::set_state(const std::vector<float>& v) {
  if (!store_) return InvalidArgument("model " + name_ + ": not compiled");
  const size_t np = static_cast<size_t>(store_->params().num_elements()), ns = static_cast<size_t>(optimizer_->slots().num_elements());
  if (v.size() != np + ns)
    return InvalidArgument("set_state: " + std::to_string(v.size()) + " values for " + std::to_string(np + ns));
  std::memcpy(store_->params().raw_data(), v.data(), np * sizeof(float));
  if (ns) std::memcpy(optimizer_->slots().raw_data(), v.data() + np, ns * sizeof(float));
  if (train_step_) train_step_->TakeModelWeights();
  return Status::OK();
}

Status Model::save_weights(const std::string& path, const SaveWeightsOptions& options) const {
  if (!store_) return InvalidArgument("save_weights: model " + name_ + " is not compiled");
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0) return SaveKerasWeights(*this, path);
  CheckpointState st;
  st.global_step = global_step_;
  st.epoch = epoch_;
  st.model_json = options.model_json;
  return WriteCheckpoint(path, *store_, compile_.optimizer, optimizer_->slots(), st);
}

Status Model::load_weights(const std::string& path, const LoadWeightsOptions& options) {
  if (!store_) return InvalidArgument("load_weights: compile model " + name_ + " first");
  if (IsHdf5File(path)) return LoadKerasWeights(*this, path).status();  // copies to the replicas (set_state)
  CheckpointState st;
  STRATA_RETURN_IF_ERROR(ReadCheckpoint(path, store_.get(), &optimizer_->slots(), &st,
                                        {.remap_slots = true,
                                         .weights_only = options.weights_only,
                                         .average_block = compile_.optimizer.use_ema
                                                              ? compile_.optimizer.slot_blocks() - 1
                                                              : -1}));
  if (train_step_) train_step_->TakeModelWeights();
  if (options.weights_only) return Status::OK();
  global_step_ = st.global_step;
  epoch_ = static_cast<int>(st.epoch);
  return Status::OK();
}

}  // namespace strata::keras
