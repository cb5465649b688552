#include "strata/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "strata/backend/compile.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_flops.h"
#include "strata/datasets/batch_size.h"
#include "strata/distribute/strategy.h"
#include "strata/io/file_system.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/h5_weights.h"
#include "strata/keras/spec.h"
#include "strata/monitor/fit_monitor.h"
#include "strata/record/record_reader.h"
#include "strata/train/cross_host_report.h"
#include "strata/train/model_source.h"
#include "strata/train/tta.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

// The fine-tuning phase of freeze_backbone_epochs trains every layer at the schedule scaled by
// this, as Keras's transfer-learning guide lowers the rate for it (there 1e-3 -> 1e-5). 0.1 of
// the flowers preset's peak (5e-4 x replicas) is the notebooks' own for pretrained weights
// (5e-5 x replicas).
constexpr double kFineTuneLrScale = 0.1;

// printf into a string: the run's lines keep the command's formats.
__attribute__((format(printf, 1, 2))) std::string Format(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), format, again);
  va_end(again);
  out.pop_back();
  return out;
}

// Records in the files matching `pattern` (TFRecord has no index: one pass over the framing).
Result<int64_t> CountRecords(const std::string& pattern) {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> paths, io::Glob(pattern));
  if (paths.empty()) return NotFound("no files match " + pattern);
  int64_t n = 0;
  std::string_view rec;
  for (const std::string& path : paths) {
    STRATA_ASSIGN_OR_RETURN(auto reader, record::RecordReader::Open(path));
    for (;;) {
      Status s = reader->ReadRecord(&rec);
      if (s.IsOutOfRange()) break;
      STRATA_RETURN_IF_ERROR(s);
      ++n;
    }
  }
  return n;
}

// Seconds since the start of fit at each epoch end (validation included): time-to-accuracy;
// and the seconds spent validating after each epoch, which the training time leaves out.
class EpochClock final : public keras::Callback {
 public:
  Status OnTrainBegin(const keras::TrainInfo&) override {
    if (seconds_.empty()) clock_.Reset();  // the second fit of freeze_backbone_epochs continues the count
    return Status::OK();
  }
  Status OnTestBegin() override {
    test_began_ = clock_.ElapsedSeconds();
    return Status::OK();
  }
  Status OnTestEnd(const keras::Logs&) override {
    validating_ += clock_.ElapsedSeconds() - test_began_;
    return Status::OK();
  }
  Status OnEpochEnd(int, keras::Logs&) override {
    seconds_.push_back(clock_.ElapsedSeconds());
    return Status::OK();
  }
  const std::vector<double>& seconds() const { return seconds_; }
  double validating_seconds() const { return validating_; }

 private:
  Stopwatch clock_;
  std::vector<double> seconds_;
  double test_began_ = 0, validating_ = 0;
};

// The run's first line: the precision, and why (the presets take bf16 where it is native).
std::string PrecisionLine(const Recipe& r) {
  const CpuIsa& isa = HostIsa();
  const std::string unit = isa.amx_bf16 ? "AMX-BF16" : "AVX512_BF16";
  const bool native = NativeBf16();
  if (r.precision == "bf16")
    return "precision: mixed_bfloat16 (bf16 matmul and conv, f32 weights)" +
           (native ? " · native on this CPU (" + unit + "); --precision f32 for float32" : std::string());
  if (native) return "precision: float32 · --precision bf16 runs bf16 natively on this CPU (" + unit + ")";
  if (!backend::PrecisionSupported(backend::Precision::kBF16).ok()) return "precision: float32 · bf16 needs AVX-512";
  return "precision: float32 · this CPU runs bf16 only through emulation (no AVX512_BF16 or AMX), so f32 is the default";
}

// `weights` into the compiled model: a Keras weight file (HDF5) by layer name, skipping the
// layers whose shapes differ (a new head on an include_top=False file, or other classes), or a
// Strata checkpoint (its weights and optimizer slots; the step count restarts at 0). Returns the
// one line the run prints.
Result<std::string> LoadInitialWeights(keras::Model& model, const std::string& path) {
  if (!keras::IsHdf5File(path)) {
    if (!fs::is_regular_file(path)) return NotFound("--weights " + path + ": no such file");
    STRATA_RETURN_IF_ERROR(model.load_weights(path).WithContext("--weights " + path));
    model.set_global_step(0);
    return "weights: " + path + " (Strata checkpoint): every layer loaded";
  }
  // Keras 3's .weights.h5 names its layers by class and position, so it pairs by order (Keras
  // 3's rule); the legacy layout pairs by name.
  const bool keras3_name = path.size() >= 11 && path.compare(path.size() - 11, 11, ".weights.h5") == 0;
  auto report = keras::LoadKerasWeights(model, path, {.by_name = !keras3_name, .skip_mismatch = true});
  if (!report.ok()) return report.status().WithContext("--weights");  // the message names the file
  const keras::KerasWeightsReport& r = *report;
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? std::string("none") : out;
  };
  return "weights: " + path + (r.layout == keras::KerasWeightsLayout::kKeras3 ? " (Keras 3 .weights.h5)" : " (Keras H5, by name)") +
         ": " + std::to_string(r.loaded.size()) + " layers loaded; skipped (shapes differ): " + join(r.skipped) +
         "; not in the file: " + join(r.absent);
}

// "trainable params 1,234 of 5,678": what the compiled step updates.
std::string TrainableParams(const keras::Model& model) {
  int64_t total = 0;
  for (const auto& e : model.variables()->entries())
    if (e.role == graph::VariableRole::kParameter) total += e.size;
  return "trainable params " + std::to_string(model.variables()->num_trainable()) + " of " + std::to_string(total);
}

Shape ImageShape(const Recipe& r) { return Shape{r.image_size, r.image_size, r.channels}; }

// What fit needs across the phases: the callbacks (one list, so the epoch clock and the backups
// go on from the head to the fine-tuning) and the monitor.
struct FitContext {
  std::vector<std::shared_ptr<keras::Callback>> callbacks;
  std::shared_ptr<EpochClock> epoch_clock = std::make_shared<EpochClock>();
  std::shared_ptr<CrossHostSnapshot> counters;
  distribute::Collective* collective = nullptr;  // null with one worker
  std::unique_ptr<monitor::FitMonitor> monitor;  // null where this worker runs none
  int verbose = 0;                               // fit's own progress lines
};

}  // namespace

struct Trainer::State {
  Recipe r;
  std::shared_ptr<Reporter> reporter;  // the caller's on the chief with verbose != 0, else silent
  bool talk = true;                    // the chief reports, unless verbose is 0
  Stopwatch wall;
  std::unique_ptr<distribute::Strategy> strategy;
  int replicas = 1, local_replicas = 1, workers = 1, worker = 0;
  int64_t global_batch = 0, steps_per_epoch = 0;
  std::optional<data::Dataset> train, val;
  std::unique_ptr<keras::Model> model;
  ModelInfo info;  // what the saved checkpoint records, so `strata evaluate|predict --model CKPT` rebuild it
  std::optional<keras::CompileOptions> fine_tune;  // phase 2 of freeze_backbone_epochs
  bool ran = false;

  bool chief() const { return worker == 0; }
  void Say(const std::string& line) { reporter->Line(line); }
  // `body` as `phase`, told to the reporter (a phase that fails has no end: its error is the run's).
  Status InPhase(Phase phase, const std::function<Status()>& body);

  // ---- prepare (Create), in its order
  Status MakeStrategy(std::shared_ptr<Reporter> given);
  Status MakeData();
  Status BuildModel(const std::string& channels_from);
  Status Compile();
  // ---- run, in its order
  Result<FitContext> PrepareFit();
  Status FitFirst(FitContext& fit, int epochs, keras::History* history);
  Status FineTune(FitContext& fit, int initial_epoch, keras::History* history);
  Result<nlohmann::json> FitTimes(const FitContext& fit, double fit_seconds, TrainReport* report);
  Status Evaluate(TrainReport* report);
  Status Save(TrainReport* report);
  Status Report(const FitContext& fit, const nlohmann::json& worker_times, TrainReport* report);

  Result<keras::History> Fit(FitContext& fit, int initial_epoch, int epochs);
};

Status Trainer::State::InPhase(Phase phase, const std::function<Status()>& body) {
  reporter->PhaseBegin(phase);
  Stopwatch clock;
  STRATA_RETURN_IF_ERROR(body());
  reporter->PhaseEnd(phase, clock.ElapsedSeconds());
  return Status::OK();
}

// One replica per core in this process; under mpirun/srun, every worker's replicas train
// together (MultiWorkerMirroredStrategy). Only now is it known which worker reports.
Status Trainer::State::MakeStrategy(std::shared_ptr<Reporter> given) {
  STRATA_ASSIGN_OR_RETURN(strategy, distribute::MultiWorkerMirroredStrategy(static_cast<int>(r.replicas)));
  replicas = strategy->num_replicas_in_sync();
  local_replicas = strategy->num_local_replicas();
  workers = strategy->num_workers();
  worker = strategy->worker_index();
  talk = r.verbose != 0 && chief();  // the chief reports, evaluates and saves
  if (!talk) reporter = std::make_shared<SilentReporter>();
  else reporter = given ? std::move(given) : std::make_shared<ConsoleReporter>();
  return Status::OK();
}

// The steps of an epoch and the pipelines. Each worker reads the global stream of local batches
// and keeps every workers-th one: the same examples, in the same global steps, as one process
// with all the replicas.
Status Trainer::State::MakeData() {
  global_batch = datasets::GlobalBatch(r.batch_per_replica, replicas);
  STRATA_ASSIGN_OR_RETURN(int64_t examples, CountRecords(r.data));
  steps_per_epoch = r.steps_per_epoch > 0 ? r.steps_per_epoch : examples / global_batch;
  if (steps_per_epoch < 1)
    return InvalidArgument(std::to_string(examples) + " training examples do not fill one global batch of " +
                           std::to_string(global_batch));
  STRATA_ASSIGN_OR_RETURN(train, MakeDataset(r, r.data, local_replicas, /*training=*/true));
  if (workers > 1) train = train->shard(workers, worker);
  if (!r.val.empty() && chief()) {
    STRATA_ASSIGN_OR_RETURN(val, MakeDataset(r, r.val, local_replicas, /*training=*/false));
  }
  Say("validation: " + (!r.val.empty() ? r.val : "none (--data without --val; pass --val FILES to validate)"));
  return Status::OK();
}

// The recipe's model (BuildRecipeModel), checked against the pipeline's images and the classes.
Status Trainer::State::BuildModel(const std::string& channels_from) {
  STRATA_ASSIGN_OR_RETURN(model, BuildRecipeModel(r, &info));
  const bool application = keras::applications::IsApplication(r.model);
  // The pipeline's images against the model's input, before any work (a Keras user passes
  // input_shape; here the flags that set either side are named).
  if (auto input = model->input_shape(0); input.ok() && *input != ImageShape(r))
    return InvalidArgument("model " + r.model + " takes images of shape " + input->ToString() + " but --data gives " +
                           ImageShape(r).ToString() + " (--image-size " + std::to_string(r.image_size) +
                           ", --channels " + std::to_string(r.channels) + " from " + channels_from +
                           "): pass --image-size and --channels to match the model, or --model a spec whose input is " +
                           ImageShape(r).ToString());
  const std::string built = application || keras::BuiltinSpec(r.model).ok()
                                ? "built for input_shape " + ImageShape(r).ToString()
                                : "from its spec file";
  Say(Format("input: %lldx%lldx%lld images (size from --image-size, channels from %s); model %s %s",
             static_cast<long long>(r.image_size), static_cast<long long>(r.image_size),
             static_cast<long long>(r.channels), channels_from.c_str(), r.model.c_str(), built.c_str()));
  // The classes against the model's output (a spec file's own last layer is not rewritten).
  if (auto output = model->output_shape(0); output.ok() && output->rank() >= 1) {
    const int64_t units = (*output)[output->rank() - 1];
    if (r.classes > 0 && units != r.classes)
      return InvalidArgument("model " + r.model + " has " + std::to_string(units) + " outputs but --classes is " +
                             std::to_string(r.classes) + ": drop --classes, or --model a spec whose last layer has " +
                             std::to_string(r.classes) + " units");
    r.classes = info.classes = units;
  }
  if (!r.freeze_until.empty() && !model->freeze_until(r.freeze_until).ok())
    return InvalidArgument("--freeze-until " + r.freeze_until + ": model " + r.model + " has no layer named " +
                           r.freeze_until);
  return Status::OK();
}

// The optimizer and the loss, in the strategy's scope, then the initial weights (a compiled
// model has its variables to load into); for freeze_backbone_epochs, the second phase's options
// too, compiled when it starts.
Status Trainer::State::Compile() {
  auto scope = strategy->scope();
  const keras::Schedule schedule = MakeSchedule(r, steps_per_epoch, replicas);
  // A spec's last layer either ends in softmax (probabilities) or gives logits.
  auto compile_options = [&](keras::Optimizer opt) {
    keras::CompileOptions o = ClassifierCompileOptions(
        *model, {.optimizer = std::move(opt), .label_smoothing = static_cast<float>(r.label_smoothing), .precision = r.precision});
    o.metrics = r.metrics;
    o.seed = static_cast<uint64_t>(r.seed);
    return o;
  };
  STRATA_RETURN_IF_ERROR(model->compile(compile_options(MakeOptimizer(r, schedule))));
  if (!r.weights.empty()) {
    std::string path = r.weights;
    // Keras's ImageNet backbone for the recipe's model: the no-top file (the head is the
    // recipe's classes), loaded by name below.
    if (path == "imagenet") { STRATA_ASSIGN_OR_RETURN(path, FetchImagenetWeights(info, /*include_top=*/false)); }
    STRATA_ASSIGN_OR_RETURN(std::string loaded, LoadInitialWeights(*model, path));
    Say(loaded);
  }
  // Phase 2's optimizer is a new one (as Keras's recompile) whose schedule continues the first's
  // where phase 1 left it, scaled down.
  if (r.freeze_backbone_epochs > 0) {
    const int64_t phase1_steps = steps_per_epoch * r.freeze_backbone_epochs;
    keras::Schedule fine = schedule;
    fine.fn = [schedule, phase1_steps](int64_t step) { return kFineTuneLrScale * schedule(step + phase1_steps); };
    fine_tune = compile_options(MakeOptimizer(r, fine));
  }
  Say(Format("%s replicas: %d (one per core) · global batch %lld = %lld per replica x %d · learning rate %.4g (%s)%s",
             strategy->name().c_str(), replicas, static_cast<long long>(global_batch),
             static_cast<long long>(r.batch_per_replica), replicas, PeakLearningRate(r, replicas),
             schedule.description.c_str(), r.precision == "bf16" ? " · precision mixed_bfloat16" : ""));
  std::string summary = model->Summary();
  if (!summary.empty() && summary.back() == '\n') summary.pop_back();
  Say(summary);
  return Status::OK();
}

// The callbacks every fit phase shares, and the utilization / idle monitor.
Result<FitContext> Trainer::State::PrepareFit() {
  FitContext fit;
  if (!r.checkpoint_dir.empty()) {
    // With several workers the chief writes the backup and every worker restores from it (the
    // directory must be shared); each worker removes a stale one before any step, so none can
    // see a file the chief is about to replace.
    auto backup = std::make_shared<keras::BackupAndRestore>(r.checkpoint_dir,
                                                            keras::BackupAndRestore::Options{.save_freq = 20});
    if (!r.resume && fs::exists(backup->path())) {
      Say("Starting afresh: removing the old backup in " + r.checkpoint_dir + " (pass --resume to continue it)");
      std::error_code ec;
      fs::remove(backup->path(), ec);
    }
    fit.callbacks.push_back(backup);
  }
  fit.callbacks.push_back(std::make_shared<keras::TerminateOnNaN>());
  fit.callbacks.push_back(fit.epoch_clock);
  // What crossed between workers, counted for the report at the end.
  fit.collective = strategy->collective();
  fit.counters = std::make_shared<CrossHostSnapshot>(fit.collective, model.get());
  if (fit.collective) fit.callbacks.push_back(fit.counters);
  if (!r.tensorboard.empty() && chief())
    fit.callbacks.push_back(
        std::make_shared<keras::TensorBoard>(r.tensorboard, keras::TensorBoard::Options{.update_freq = 100}));
  // The monitor hears of fit's steps as its observer (the chief only), and with a trace every
  // worker writes its own (the communication timeline: each worker's all-reduce buckets),
  // anchored at a moment the workers shared so that bench/merge_traces.py can align them.
  int64_t sync_ns = 0, offset_ns = 0;
  if (r.monitor && !r.trace.empty() && workers > 1) {
    STRATA_RETURN_IF_ERROR(strategy->collective()->Barrier());
    sync_ns = NowNanos();
    if (const char* v = std::getenv("STRATA_TRACE_CLOCK_OFFSET_NS")) offset_ns = std::strtoll(v, nullptr, 10);
  }
  if (r.monitor && chief()) {
    fit.monitor = std::make_unique<monitor::FitMonitor>(monitor::FitMonitorOptions{
        .interval_seconds = r.monitor_interval,
        .tensorboard_dir = r.tensorboard.empty() ? "" : r.tensorboard + "/train",
        .trace_path = r.trace,
        .http_port = static_cast<int>(r.monitor_port),
        .http_bind = r.monitor_bind,
        .report_json = r.report_json,
        .worker = worker,
        .clock_sync_ns = sync_ns,
        .clock_offset_ns = offset_ns});
    if (!r.tensorboard.empty()) fs::create_directories(r.tensorboard + "/train");
  } else if (r.monitor && !r.trace.empty()) {
    fit.monitor = std::make_unique<monitor::FitMonitor>(monitor::FitMonitorOptions{
        .interval_seconds = r.monitor_interval,
        .console = false,
        .trace_path = WorkerTracePath(r.trace, worker),
        .worker = worker,
        .clock_sync_ns = sync_ns,
        .clock_offset_ns = offset_ns});
  }
  fit.verbose = !talk ? 0 : r.verbose >= 0 ? r.verbose : ::isatty(::fileno(stdout)) ? 1 : 2;
  return fit;
}

Result<keras::History> Trainer::State::Fit(FitContext& fit, int initial_epoch, int epochs) {
  return model->fit(*train, {.epochs = epochs, .steps_per_epoch = steps_per_epoch,
                             .validation_data = val ? &*val : nullptr, .validation_steps = r.validation_steps,
                             .callbacks = fit.callbacks, .verbose = fit.verbose, .initial_epoch = initial_epoch,
                             .observer = fit.monitor.get()});
}

// The first `epochs` epochs: every one, or the head's of a fine-tune.
Status Trainer::State::FitFirst(FitContext& fit, int epochs, keras::History* history) {
  if (fine_tune)
    Say(Format("phase 1 (head): epochs 1-%d with the layers up to %s frozen, %s, learning rate from %.4g", epochs,
               r.freeze_until.c_str(), TrainableParams(*model).c_str(), model->learning_rate()));
  STRATA_ASSIGN_OR_RETURN(*history, Fit(fit, 0, epochs));
  // The head-trained model, kept beside the backups: a fine-tuning that fails can start again
  // from it (--weights D/head_trained.h5).
  if (fine_tune && chief() && !r.checkpoint_dir.empty()) {
    const std::string head = r.checkpoint_dir + "/head_trained.h5";
    STRATA_RETURN_IF_ERROR(model->save_weights(head));
    Say("phase 1 model saved to " + head);
  }
  return Status::OK();
}

// Phase 2 of freeze_backbone_epochs: the epochs from `initial_epoch` on, every layer trainable
// at the fine-tuning rate; their history follows the first phase's.
Status Trainer::State::FineTune(FitContext& fit, int initial_epoch, keras::History* history) {
  {
    auto scope = strategy->scope();
    model->set_trainable(true);
    STRATA_RETURN_IF_ERROR(model->compile(*fine_tune));
  }
  Say(Format("phase 2 (fine-tuning): epochs %d-%lld with every layer trainable at the learning rate x %g, %s, "
             "learning rate from %.4g",
             initial_epoch + 1, static_cast<long long>(r.epochs), kFineTuneLrScale, TrainableParams(*model).c_str(),
             model->learning_rate()));
  STRATA_ASSIGN_OR_RETURN(keras::History more, Fit(fit, initial_epoch, static_cast<int>(r.epochs)));
  history->epoch.insert(history->epoch.end(), more.epoch.begin(), more.epoch.end());
  for (auto& [key, values] : more.history) {
    auto& all = history->history[key];
    all.insert(all.end(), values.begin(), values.end());
  }
  return Status::OK();
}

// The fit's times in the report, and every worker's all-reduce wait (a collective: gathered
// before the chief goes on alone; null with one worker).
Result<nlohmann::json> Trainer::State::FitTimes(const FitContext& fit, double fit_seconds, TrainReport* report) {
  report->validation_seconds = fit.epoch_clock->validating_seconds();
  report->train_seconds = fit_seconds - report->validation_seconds;
  report->seconds_at_epoch_end = fit.epoch_clock->seconds();
  if (!fit.collective) return nlohmann::json();
  return GatherWorkerTimes(*fit.collective, *model, *fit.counters);
}

// `val` once more after training (validation_steps of it).
Status Trainer::State::Evaluate(TrainReport* report) {
  STRATA_ASSIGN_OR_RETURN(keras::Logs logs, model->evaluate(*val, {.steps = r.validation_steps}));
  report->val_accuracy = keras::LogValue(logs, "accuracy");
  report->val_loss = keras::LogValue(logs, "loss");
  report->val_f1_macro = keras::LogValue(logs, "f1_macro");
  if (!r.tta.empty()) {
    STRATA_ASSIGN_OR_RETURN(report->val_accuracy_tta, TtaAccuracy(*model, *val, r.validation_steps, r.tta));
  }
  return Status::OK();
}

// The model to `out` (the cache directory by default). A checkpoint also records how to rebuild
// the model (a Keras weight file holds weights only).
Status Trainer::State::Save(TrainReport* report) {
  report->model_path = r.out.empty() ? UserCacheDir() + "/models/" + model->name() + ".ckpt" : r.out;
  std::error_code ec;
  if (fs::path(report->model_path).has_parent_path())
    fs::create_directories(fs::path(report->model_path).parent_path(), ec);
  keras::SaveWeightsOptions save;
  STRATA_ASSIGN_OR_RETURN(save.model_json, ModelInfoJson(info));
  return model->save_weights(report->model_path, save);
}

// The speed, where the model went, what crossed between workers (the MPI path's cost) and
// `val`'s metrics under the name the recipe gives `val`.
Status Trainer::State::Report(const FitContext& fit, const nlohmann::json& worker_times, TrainReport* report) {
  const int64_t trained = steps_per_epoch * r.epochs * global_batch;
  report->images_per_second = static_cast<double>(trained) / report->train_seconds;
  Say(Format("trained %lld images in %.1f s (%.0f images/s; validating after each epoch took %.1f s more)",
             static_cast<long long>(trained), report->train_seconds, report->images_per_second,
             report->validation_seconds));
  Say("model saved to " + report->model_path);
  if (fit.collective) {
    const std::vector<double>& at = report->seconds_at_epoch_end;  // validation included, as in the epochs' own times
    const nlohmann::json cross_host = CrossHostReport(*fit.collective, *model, workers, report->train_seconds,
                                                      *fit.counters, at.size() >= 2 ? at.back() - at.front() : 0,
                                                      worker_times);
    report->cross_host_json = cross_host.dump();
    for (const std::string& line : CrossHostLines(cross_host)) Say(line);
  }
  if (!val) return Status::OK();
  const char* split = r.val_split.c_str();
  Say(Format("%s loss: %.4f", split, report->val_loss));
  Say(Format("%s accuracy: %.4f", split, report->val_accuracy));
  if (!r.tta.empty()) Say(Format("%s accuracy with --tta %s: %.4f", split, r.tta.c_str(), report->val_accuracy_tta));
  if (std::find(r.metrics.begin(), r.metrics.end(), "f1_macro") != r.metrics.end())
    Say(Format("%s macro F1: %.4f", split, report->val_f1_macro));
  return Status::OK();
}

Trainer::Trainer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Trainer::~Trainer() = default;
const Recipe& Trainer::recipe() const { return state_->r; }
keras::Model& Trainer::model() { return *state_->model; }
bool Trainer::chief() const { return state_->chief(); }

Result<std::unique_ptr<Trainer>> Trainer::Create(Recipe recipe, std::shared_ptr<Reporter> reporter) {
  auto st = std::make_unique<State>();
  State& s = *st;
  s.r = std::move(recipe);
  STRATA_RETURN_IF_ERROR(Check(s.r));
  // Every worker makes the default dataset when it is missing, before MPI starts.
  STRATA_ASSIGN_OR_RETURN(std::string channels_from, ResolveInputs(&s.r, s.r.verbose != 0));
  STRATA_RETURN_IF_ERROR(s.MakeStrategy(std::move(reporter)));
  // Told once the reporting worker is known; the phase's time counts from Create's start.
  s.reporter->PhaseBegin(Phase::kPrepare);
  s.Say(PrecisionLine(s.r));
  STRATA_RETURN_IF_ERROR(s.MakeData());
  STRATA_RETURN_IF_ERROR(s.BuildModel(channels_from));
  STRATA_RETURN_IF_ERROR(s.Compile());
  s.reporter->PhaseEnd(Phase::kPrepare, s.wall.ElapsedSeconds());
  return std::unique_ptr<Trainer>(new Trainer(std::move(st)));
}

Result<TrainReport> Trainer::Run() {
  State& s = *state_;
  if (s.ran) return InvalidArgument("Trainer::Run: a trainer runs once; create another");
  s.ran = true;
  TrainReport report{.chief = s.chief(), .replicas = s.replicas, .global_batch = s.global_batch,
                     .steps_per_epoch = s.steps_per_epoch};
  STRATA_ASSIGN_OR_RETURN(FitContext fit, s.PrepareFit());
  // The head while layers are frozen, then (freeze_backbone_epochs) every layer.
  const int first_epochs = static_cast<int>(s.fine_tune ? s.r.freeze_backbone_epochs : s.r.epochs);
  const Phase first = s.r.freeze_until.empty() ? Phase::kFitAll : Phase::kFitHead;
  Stopwatch fit_clock;
  STRATA_RETURN_IF_ERROR(s.InPhase(first, [&] { return s.FitFirst(fit, first_epochs, &report.history); }));
  if (s.fine_tune)
    STRATA_RETURN_IF_ERROR(s.InPhase(Phase::kFitAll, [&] { return s.FineTune(fit, first_epochs, &report.history); }));
  STRATA_ASSIGN_OR_RETURN(nlohmann::json worker_times, s.FitTimes(fit, fit_clock.ElapsedSeconds(), &report));
  if (!s.chief()) return report;
  // The chief alone goes on.
  if (s.val) STRATA_RETURN_IF_ERROR(s.InPhase(Phase::kEvaluate, [&] { return s.Evaluate(&report); }));
  STRATA_RETURN_IF_ERROR(s.InPhase(Phase::kSave, [&] { return s.Save(&report); }));
  STRATA_RETURN_IF_ERROR(s.InPhase(Phase::kReport, [&] { return s.Report(fit, worker_times, &report); }));
  report.wall_seconds = s.wall.ElapsedSeconds();
  s.reporter->Finished(s.r, report);
  return report;
}

Result<TrainReport> Run(const Recipe& recipe, std::shared_ptr<Reporter> reporter) {
  STRATA_ASSIGN_OR_RETURN(auto trainer, Trainer::Create(recipe, std::move(reporter)));
  return trainer->Run();
}

std::string WorkerTracePath(const std::string& trace, int worker) {
  if (worker == 0) return trace;
  const fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + ".worker" + std::to_string(worker) + p.extension().string())).string();
}

std::string ReportJson(const Recipe& r, const TrainReport& report) {
  nlohmann::json j = {{"test_accuracy", report.val_accuracy}, {"test_loss", report.val_loss},
                      {"preset", r.preset}, {"val_f1_macro", report.val_f1_macro},
                      {"test_accuracy_tta", report.val_accuracy_tta},
                      {"wall_seconds", report.wall_seconds}, {"train_seconds", report.train_seconds},
                      {"validation_seconds", report.validation_seconds},
                      {"images_per_second", report.images_per_second}, {"replicas", report.replicas},
                      {"global_batch", report.global_batch}, {"epochs", r.epochs}, {"model_path", report.model_path},
                      {"history", report.history.history}, {"seconds_at_epoch_end", report.seconds_at_epoch_end}};
  // The recipe's values that decide the weights (the same names as its flags, with underscores):
  // what a peer needs to run the same recipe (bench/time_to_accuracy.sh).
  j["recipe"] = {{"model", r.model}, {"epochs", r.epochs}, {"batch_per_replica", r.batch_per_replica},
                 {"optimizer", r.optimizer}, {"lr", r.lr}, {"lr_scaling", r.lr_scaling}, {"schedule", r.schedule},
                 {"warmup_epochs", r.warmup_epochs}, {"weight_decay", r.weight_decay},
                 {"label_smoothing", r.label_smoothing}, {"ema", r.ema}, {"tta", r.tta}, {"pad_crop", r.pad_crop}, {"flip", r.flip},
                 {"precision", r.precision}, {"seed", r.seed}};
  if (!report.cross_host_json.empty()) j["cross_host"] = nlohmann::json::parse(report.cross_host_json);
  return j.dump(2) + "\n";
}

}  // namespace strata::train
