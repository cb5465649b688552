// keras::Model: Sequential and functional models with compile / fit / evaluate / predict.
//
//   using namespace strata::keras;
//   auto model = Sequential({layers::InputLayer({28, 28, 1}),
//                            layers::Conv2D(32, 3, {.padding = "same"}), ...,
//                            layers::Dense(10)});
//   model->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9, .nesterov = true}),
//                   .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
//                   .metrics = {"accuracy"}});
//   auto history = model->fit(train, {.epochs = 10, .validation_data = &test});
//
// The training step's forward, loss and gradients are traced once into a graph with the static
// per-replica batch shape and compiled into one program per replica (backend::Compile); each
// step feeds the batch, runs the programs, reduces the gradients (distribute::Reducer) and
// applies the optimizer's sharded update (keras/optimizer_state.h). The evaluation/predict
// graph is a second program over the same variables, one per replica: predict and evaluate
// split each batch over the replicas' cores as fit does (MirroredStrategy's predict).
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/core/status.h"
#include "strata/core/tensor.h"
#include "strata/data/dataset.h"
#include "strata/distribute/cross_replica_sum.h"
#include "strata/distribute/reducer.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/layers.h"
#include "strata/keras/losses.h"
#include "strata/keras/metrics.h"
#include "strata/keras/optimizers.h"
#include "strata/keras/step_observer.h"

namespace strata::keras {

class Callback;
class Model;
class OptimizerState;
class TrainStep;          // keras/train_step.h
class EvalStep;
struct FitState;         // keras/fit_state.h
struct CompiledProgram;  // keras/model_internal.h

// ---- functional API ---------------------------------------------------------------------
namespace internal {
struct KNode;
}
// A symbolic Keras tensor: a model input, or a layer applied to symbolic tensors.
class KTensor {
 public:
  KTensor() = default;
  explicit KTensor(std::shared_ptr<internal::KNode> n) : node_(std::move(n)) {}
  const std::shared_ptr<internal::KNode>& node() const { return node_; }

 private:
  std::shared_ptr<internal::KNode> node_;
};
// A model input of per-example shape `shape` (no batch dimension), like keras.Input.
KTensor Input(Shape shape, DType dtype = DType::kF32, std::string name = "");
// Applies a layer: `x = Call(layers::Dense(10), x)`. Shape errors surface when the Model is
// created, naming the layer.
KTensor Call(const LayerPtr& layer, const KTensor& x);
KTensor Call(const LayerPtr& layer, const std::vector<KTensor>& xs);
// The model inputs that `t` is computed from, in the order a depth-first walk first meets them
// (Keras's get_source_inputs): a model built on top of `t` takes these as its inputs.
std::vector<KTensor> SourceInputs(const KTensor& t);
// The per-example shape of `t` (no batch dimension), inferred through the layers that make it
// (Keras's KerasTensor.shape); a shape error names the layer. Layers it meets without a name keep
// none (their names are given when a model is built).
Result<Shape> ShapeOf(const KTensor& t);

namespace layers {
// The first entry of a Sequential: the per-example input shape.
LayerPtr InputLayer(Shape shape, DType dtype = DType::kF32, std::string name = "");
}  // namespace layers

// ---- compile / fit options ----------------------------------------------------------------
using Logs = std::vector<std::pair<std::string, double>>;  // in Keras's display order
double LogValue(const Logs& logs, const std::string& key, double fallback = 0);

struct CompileOptions {
  Optimizer optimizer = optimizers::SGD();
  Loss loss = losses::SparseCategoricalCrossentropy();
  std::vector<std::string> metrics;  // "accuracy", "sparse_top_k_categorical_accuracy", "f1_macro"
  int steps_per_execution = 1;       // accepted for Keras compatibility: every step is native already
  std::string precision = "float32"; // or "mixed_bfloat16" (TPU policy: bf16 matmul/conv, f32 variables)
  int threads = 1;                   // oneDNN threads per replica program (a replica is a core)
  uint64_t seed = 42;                // initializers and dropout
  // Where the replicas run. Null: the strategy of the enclosing Strategy::Scope, else one
  // replica (OneDeviceStrategy). The global batch is split evenly across its replicas.
  distribute::Strategy* strategy = nullptr;
  // predict / evaluate: a BatchNormalization right after a convolution folds into it
  // (BuildContext::fold_batch_norm); the outputs equal the unfolded ones to float rounding.
  bool fold_batch_norm = true;
};

struct FitOptions {
  int epochs = 1;
  int64_t steps_per_epoch = -1;      // -1: until the dataset ends (a repeated dataset needs it)
  const data::Dataset* validation_data = nullptr;
  int64_t validation_steps = -1;
  std::vector<std::shared_ptr<Callback>> callbacks;
  int verbose = 1;                   // 0 silent, 1 progress bar, 2 one line per epoch
  int initial_epoch = 0;
  // Told of every step once compiled: the utilization / idle monitor (monitor/fit_monitor.h)
  // or any StepObserver. Null: nobody.
  StepObserver* observer = nullptr;
};

struct EvaluateOptions {
  int64_t steps = -1;
  int verbose = 0;
};

// Model::save_weights: a checkpoint records the optimizer its slots belong to, and what the
// weights belong to when told.
struct SaveWeightsOptions {
  // A JSON object describing the model, kept as the checkpoint header's "model" (what
  // `strata train` records: train::ModelInfoJson); empty: none. A .h5 file holds weights only.
  std::string model_json;
};
struct LoadWeightsOptions {
  // Parameters and moving statistics only, for inference (evaluate, predict, export): the
  // optimizer slots, the step and the epoch stay as they are, so the model may be compiled
  // with any optimizer.
  bool weights_only = false;
};

struct History {
  std::vector<int> epoch;
  std::map<std::string, std::vector<double>> history;  // "loss", "accuracy", "val_loss", "lr"
};

// ---- the model ---------------------------------------------------------------------------
class Model {
 public:
  // Functional: outputs computed from inputs through called layers.
  static Result<std::unique_ptr<Model>> Functional(std::vector<KTensor> inputs, std::vector<KTensor> outputs,
                                                   std::string name = "model");
  ~Model();

  const std::string& name() const { return name_; }
  // Keras's summary(): layer (type), output shape, param #, connected to (functional), totals.
  std::string Summary(int line_length = 65) const;
  void summary() const;
  int64_t count_params() const;

  // Whether the (first) output comes out of a softmax: then a cross-entropy takes its
  // probabilities (from_logits = false), else the output is logits (from_logits = true).
  bool ends_in_softmax() const;
  // The per-example shape (no batch dimension) of input i, and of output i.
  Result<Shape> input_shape(size_t i = 0) const;
  Result<Shape> output_shape(size_t i = 0) const;

  Status compile(CompileOptions options);
  Result<History> fit(const data::Dataset& train, FitOptions options = {});
  // Returns {"loss": ..., metric: ...}.
  Result<Logs> evaluate(const data::Dataset& data, EvaluateOptions options = {});
  // The model's (first) output for every element of `data` ([N, ...] f32). Elements are
  // batches (x) or (x, y); a last short batch is padded internally and cut off.
  Result<Tensor> predict(const data::Dataset& data, int64_t steps = -1);

  // One training step on a batch already in memory (the custom-loop building block).
  // x: one tensor per input [B, ...]; y: labels. Returns {"loss", metrics...} of this batch.
  Result<Logs> train_on_batch(const std::vector<Tensor>& x, const Tensor& y);

  // ---- custom training loops: the pieces of Keras's `@tf.function train_step` ----------------
  //   auto tape = model->compute_gradients(batch);  // GradientTape: loss and tape.gradient(...)
  //   model->apply_gradients();                     // optimizer.apply_gradients(zip(grads, vars))
  //   for (const MetricBatch& b : tape->replicas) accuracy->Update(b);  // metric.update_state
  // compute_gradients + apply_gradients is exactly the step fit() takes (examples/custom_loop.cpp).
  struct GradientTape {
    double loss = 0;                    // the batch's mean loss (the mean of the replicas' losses)
    std::vector<MetricBatch> replicas;  // each replica's outputs and labels (valid until the next step)
  };
  // Forward and backward of a global batch (x..., y) on every replica (traced and compiled on
  // the first call); the gradients are averaged into gradients(). Nothing is updated yet.
  Result<GradientTape> compute_gradients(const data::Element& batch);
  // The averaged gradients of the trainable variables, f32 [num_trainable] in the layout of
  // variables()->entries() (per variable: variables()->Gradient(name)). May be edited in place
  // before apply_gradients. Only after compile().
  Tensor& gradients() { return store_->grads(); }
  // The optimizer step on gradients(): clipping, weight decay, the sharded update, the replicas'
  // moving statistics averaged, global_step() + 1.
  Status apply_gradients();

  // ---- freezing (Keras's layer.trainable / model.trainable) -----------------------------------
  // A frozen layer (Layer::trainable false) keeps its weights, has no optimizer slots, gets no
  // gradient (the compiled step spends no FLOPs on its weights, nor on anything below the
  // lowest trainable layer) and a frozen BatchNormalization runs in inference mode. Changes
  // take effect at the next compile(), which keeps the weights (as Keras's recompile does) and
  // starts a new optimizer; fit() before it fails with InvalidArgument.
  // Keras's model.trainable = value: sets every layer's flag.
  void set_trainable(bool trainable);
  // Whether any layer is trainable.
  bool trainable() const;
  // Freezes layers()[0..k], where layers()[k] is named `layer_name`, and makes every later
  // layer trainable (Keras: for l in model.layers[:k + 1]: l.trainable = False). NotFound when
  // no layer has that name.
  Status freeze_until(const std::string& layer_name);

  // ---- Keras's view of the layers, for Keras weight files (keras/h5_weights.h) ----------------
  // Keras's model.layers without the inputs, in Keras's order: by depth from the outputs,
  // deepest first, ties in the order a depth-first walk from the outputs meets them (Keras's
  // map_graph). Keras loads .h5 weights by position in this order and numbers Keras 3
  // .weights.h5 entries by it, so Strata follows it too (summary() lists its rows so as well).
  std::vector<LayerPtr> layers() const;
  const backend::VariableStore* variables() const { return store_.get(); }
  // The inference graph (training = false: batch norm on its moving statistics, no dropout) at
  // batch `batch` into `g`, its variables named as in variables(): what predict() runs, for
  // exporters (keras/onnx_export.h).
  Status BuildInferenceGraph(graph::Graph& g, int64_t batch, std::vector<graph::Value>* inputs,
                             std::vector<graph::Value>* outputs) const;

  // Weights and optimizer state (see docs/formats/checkpoint.md). A path ending in ".h5" is
  // written as a Keras legacy weight file (SaveKerasWeights: weights only), and load_weights
  // reads any HDF5 file (IsHdf5File) as a Keras weight file (LoadKerasWeights, default options);
  // other paths are Strata checkpoints. A checkpoint saved with other layers frozen loads: its
  // weights by name, the optimizer slots of the variables trainable in both, zero slots for
  // the rest (SaveWeightsOptions, LoadWeightsOptions above).
  Status save_weights(const std::string& path, const SaveWeightsOptions& options = {}) const;
  Status load_weights(const std::string& path, const LoadWeightsOptions& options = {});
  // A copy of every variable's values (parameters + state + optimizer slots), and back.
  Result<std::vector<float>> get_state() const;
  Status set_state(const std::vector<float>& values);

  // For callbacks.
  bool stop_training = false;
  double learning_rate() const;               // the value fed at the current step
  void set_learning_rate_scale(double s);  // ReduceLROnPlateau multiplies
  double learning_rate_scale() const;
  // Overrides the schedule with a constant (LearningRateScheduler); NaN: back to the schedule.
  void set_learning_rate_override(double lr);
  int64_t global_step() const { return global_step_; }
  void set_global_step(int64_t s) { global_step_ = s; }
  int current_epoch() const { return epoch_; }
  const CompileOptions& compile_options() const { return compile_; }
  // Replica 0's compiled training program (null before the first batch), for the monitor.
  backend::Program* train_program();
  // Replica 0's compiled predict/evaluate program (null before the first predict or evaluate).
  backend::Program* eval_program();
  backend::VariableStore* variables() { return store_.get(); }
  // Replicas in this process (the local batch is split over them); the global count is
  // strategy()->num_replicas_in_sync().
  int num_replicas() const { return strategy_ ? strategy_->num_local_replicas() : 1; }
  distribute::Strategy* strategy() const { return strategy_; }
  // How the gradient all-reduce ran against the backward pass (several workers; zeros else).
  distribute::ReducerStats reducer_stats() const;

  // BackupAndRestore: write / read weights, optimizer state, position and input iterator.
  Status SaveBackup(const std::string& path, int64_t next_epoch, int64_t step_in_epoch);
  Status RestoreBackup(const std::string& path);
  // After RestoreBackup: the steps of current_epoch() the backup had already done.
  int64_t resumed_step_in_epoch() const;

  // Internals shared with Sequential().
  struct LayerEntry;
  Model(std::string name, std::vector<KTensor> inputs, std::vector<KTensor> outputs);
  Status Validate();
  void MarkSequential() { sequential_ = true; }

 private:
  // One training step on a global batch (train_step_, whose Run reads it top to bottom: feed,
  // forward and backward, reduce, update on every replica), then the step count, the loss and
  // the metrics.
  Status Step(const data::Element& batch, Logs* logs, std::vector<std::unique_ptr<Metric>>& metrics, Mean& loss_mean);
  // Checks a global training batch and makes the training step for its size (the first time).
  Status PrepareStep(const data::Element& batch);
  Status BuildTrainGraph(CompiledProgram& c, int64_t batch, uint64_t replica_seed);
  backend::CompileOptions BackendOptions(std::vector<graph::Value> fetches,
                                         std::shared_ptr<backend::VariableStore> store) const;
  Status BuildForward(graph::Graph& g, bool training, int64_t batch, std::vector<graph::Value>* inputs,
                      std::vector<graph::Value>* outputs, BuildContext* ctx) const;
  Status ProbeForward(graph::Graph& g, std::vector<graph::Value>* outputs) const;
  Status EnsureTrainPrograms(int64_t per_replica_batch);
  // The evaluation step for a global batch of `batch` rows: one program per local replica, each
  // at ceil(batch / replicas) rows, all reading the model's variables (store_).
  Status EnsureEvalPrograms(int64_t batch);
  // Every layer's trainable flag, and whether they are still those compile() saw.
  std::vector<std::pair<const Layer*, bool>> TrainableFlags() const;
  Status CheckTrainableUnchanged() const;
  Result<Logs> RunEvaluation(const data::Dataset& data, int64_t steps, Tensor* predictions);
  std::vector<std::unique_ptr<Metric>> MakeMetrics() const;

  std::string name_;
  bool sequential_ = false;  // built by Sequential(): its summary hides the InputLayer, as Keras's
  std::vector<KTensor> inputs_, outputs_;
  std::vector<std::shared_ptr<LayerEntry>> layers_;  // topological order
  bool compiled_ = false;
  std::vector<std::pair<const Layer*, bool>> compiled_trainable_;  // the flags compile() saw
  CompileOptions compile_;
  distribute::Strategy* strategy_ = nullptr;
  std::unique_ptr<distribute::Strategy> owned_strategy_;
  // Replica 0's variables are the model's: parameters (trainable, then state such as
  // moving statistics) and the gradient block the replicas' gradients are reduced into.
  std::shared_ptr<backend::VariableStore> store_;
  std::unique_ptr<OptimizerState> optimizer_;  // the slots and the sharded update
  bool gradients_ready_ = false;  // compute_gradients ran; apply_gradients not yet
  // The training step (the replicas' programs, the reducer, the update, the step's scratch):
  // made at the first training batch, whose size it is compiled for.
  std::unique_ptr<TrainStep> train_step_;
  // predict/evaluate: one program per local replica (a global batch is split over the cores as
  // in training), compiled for the first batch's rows.
  std::unique_ptr<EvalStep> eval_step_;
  int64_t global_step_ = 0;
  int epoch_ = 0;
  // fit()'s loop state (fit_state.h): the input iterator, the observer, the learning-rate
  // overrides the callbacks set, and what BackupAndRestore resumes.
  std::unique_ptr<FitState> fit_;
};

// Sequential: a functional model whose layers are chained. The first entry must be an
// InputLayer (its shape has no batch dimension).
Result<std::unique_ptr<Model>> Sequential(std::vector<LayerPtr> layers, std::string name = "sequential");

}  // namespace strata::keras

#pragma GCC visibility pop
