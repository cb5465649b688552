// strata train: the main job. With no arguments: Fashion-MNIST (made from Debian's
// dataset-fashion-mnist on first run), the reference CNN, every core, ~93 % test accuracy.
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "command.h"
#include "cross_host_report.h"
#include "model_io.h"
#include "strata/backend/compile.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/file.h"
#include "strata/core/peak_flops.h"
#include "strata/datasets/batch_size.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/image_example.h"
#include "strata/datasets/make_records.h"
#include "strata/distribute/collective.h"
#include "strata/distribute/strategy.h"
#include "strata/record/record_reader.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/h5_weights.h"
#include "strata/keras/model.h"
#include "strata/keras/spec.h"
#include "strata/monitor/fit_monitor.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

struct TrainFlags {
  std::string data, val, model = "reference-cnn", image_key = "image", label_key = "label";
  std::string lr_scaling = "linear", schedule = "cosine", precision = "f32", preset;
  std::string checkpoint_dir, tensorboard, summary_json, out, trace, monitor_bind = "127.0.0.1", report_json;
  double monitor_interval = 10;
  int64_t monitor_port = -1;
  bool no_monitor = false;
  int64_t image_size = 28, classes = 0, epochs = 10, batch_per_replica = 128, replicas = 0, seed = 42;
  int64_t channels = 0;  // 0: as the first record of --data stores its image (1 without --data)
  int64_t steps_per_epoch = 0;
  int64_t validation_steps = -1;  // Keras's validation_steps: -1, the whole --val
  double lr = 0.05, weight_decay = 5e-4, warmup_epochs = 0.5;
  bool deterministic = false, resume = false;
  // Transfer learning (docs/flowers.md, "Fine-tuning"): weights loaded before training, the
  // layers up to --freeze-until frozen, and the two-phase recipe.
  std::string weights, freeze_until;
  int64_t freeze_backbone_epochs = 0;
};

// The fine-tuning phase of --freeze-backbone-epochs trains every layer at the schedule scaled by
// this, as Keras's transfer-learning guide lowers the rate for it (there 1e-3 -> 1e-5). 0.1 of
// the flowers preset's peak (5e-4 x replicas) is the notebooks' own for pretrained weights
// (5e-5 x replicas).
constexpr double kFineTuneLrScale = 0.1;

// --weights FILE into the compiled model: a Keras weight file (HDF5) by layer name, skipping the
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

// The default dataset: TFRecords in TFDS's layout, made once from Debian's package into
// the cache directory.
Result<std::pair<std::string, std::string>> DefaultFashionMnist() {
  const std::string data_dir = UserCacheDir() + "/datasets";
  const std::string dir = datasets::FashionMnistRecordDir(data_dir);
  const std::string train = dir + "/fashion_mnist-train.tfrecord-*", test = dir + "/fashion_mnist-test.tfrecord-*";
  if (!fs::exists(dir + "/dataset_info.json")) {
    std::printf("Making the Fashion-MNIST TFRecords in %s (first run only)\n", dir.c_str());
    datasets::FashionMnistRecordsOptions o;
    const bool tty = ::isatty(::fileno(stdout));
    Stopwatch clock;
    o.progress = [tty, clock](int64_t done, int64_t total) {
      if (!tty) return;
      std::printf("\r%s", keras::ProgbarLogger::Line(done, total, clock.ElapsedSeconds(), {}, done == total).c_str());
      std::fflush(stdout);
    };
    STRATA_ASSIGN_OR_RETURN(auto report, datasets::MakeFashionMnistRecords(data_dir, o));
    std::printf("%s%lld examples written\n", tty ? "\n" : "", static_cast<long long>(report.written));
  }
  return std::make_pair(train, test);
}

// Records in the files matching `pattern` (TFRecord has no index: one pass over the framing).
Result<int64_t> CountRecords(const std::string& pattern) {
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) != 0) {
    ::globfree(&g);
    return NotFound("no files match " + pattern);
  }
  int64_t n = 0;
  std::string_view rec;
  for (size_t i = 0; i < g.gl_pathc; ++i) {
    auto reader = record::RecordReader::Open(g.gl_pathv[i]);
    if (!reader.ok()) {
      ::globfree(&g);
      return reader.status();
    }
    for (;;) {
      Status s = (*reader)->ReadRecord(&rec);
      if (s.IsOutOfRange()) break;
      if (!s.ok()) {
        ::globfree(&g);
        return s;
      }
      ++n;
    }
  }
  ::globfree(&g);
  return n;
}

// Seconds since the start of fit at each epoch end (validation included): time-to-accuracy.
class EpochClock final : public keras::Callback {
 public:
  Status OnTrainBegin(const keras::TrainInfo&) override {
    if (seconds_.empty()) clock_.Reset();  // the second fit of --freeze-backbone-epochs continues the count
    return Status::OK();
  }
  Status OnEpochEnd(int, keras::Logs&) override {
    seconds_.push_back(clock_.ElapsedSeconds());
    return Status::OK();
  }
  const std::vector<double>& seconds() const { return seconds_; }

 private:
  Stopwatch clock_;
  std::vector<double> seconds_;
};

// --preset flowers: Kaggle's "Flower Classification with TPUs" recipe (docs/flowers.md). Its
// values become the defaults; flags given on the command line still override them.
//   flowers-xception at 192 px (the codelab's small flowers-cnn leaves 2 cores waiting on JPEG
//   decode half the time: see docs/flowers.md, "What an epoch costs"), `class` labels, 104 classes, 16 images per replica (the seed's
//   16 x replicas), Adam, 12 epochs, accuracy and macro F1 on --val after each epoch, bf16
//   where the CPU has AVX512_BF16. The learning rate is the notebooks' ramp-up / sustain /
//   exponential decay, with max scaled by the replicas, but 10x higher: their 1e-5 .. 5e-5
//   protect pretrained weights; a model trained from scratch needs Adam's usual 1e-3 range.
constexpr keras::schedules::RampUpDecayOptions kFlowersFromScratch{
    .start = 1e-4, .max = 5e-4, .min = 1e-5, .rampup_epochs = 3, .sustain_epochs = 2, .decay = 0.8};

void ApplyPreset(const std::vector<std::string>& args, TrainFlags* f) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--preset" && i + 1 < args.size()) f->preset = args[i + 1];
    if (args[i].rfind("--preset=", 0) == 0) f->preset = args[i].substr(9);
  }
  if (f->preset != "flowers") return;
  f->model = "flowers-xception";
  f->label_key = "class";
  f->image_size = 192;
  f->classes = datasets::kFlowersNumClasses;
  f->batch_per_replica = 16;
  f->epochs = 12;
  f->lr = kFlowersFromScratch.max;
  f->warmup_epochs = kFlowersFromScratch.rampup_epochs;
  f->weight_decay = 0;
  f->schedule = "rampup";
  // bf16 where it runs at its full rate (AVX512_BF16 instructions, not oneDNN's emulation).
  f->precision = HostIsa().avx512_bf16 && backend::PrecisionSupported(backend::Precision::kBF16).ok() ? "bf16" : "f32";
}

// The training or evaluation pipeline for the files: Fashion-MNIST's recipe for grayscale
// `label`led images at 28 px, otherwise the flowers recipe (JPEG or PNG, resized to
// --image-size, grayscale or RGB as --channels); both read the features --image-key and
// --label-key name.
bool FashionMnistLayout(const TrainFlags& f) { return f.image_size == 28 && f.label_key == "label" && f.channels == 1; }
Shape ImageShape(const TrainFlags& f) { return Shape{f.image_size, f.image_size, f.channels}; }

// --channels when given, else the channels of the first record's image (gray + alpha reads
// as gray, RGBA as RGB); the default Fashion-MNIST job is grayscale. Also says where it came from.
Result<std::string> ResolveChannels(TrainFlags* f, bool default_data) {
  if (f->channels != 0) return std::string("--channels");
  if (default_data) {
    f->channels = 1;
    return std::string("Fashion-MNIST");
  }
  STRATA_ASSIGN_OR_RETURN(image::ImageInfo first, datasets::FirstImageInfo(f->data, f->image_key, f->label_key));
  f->channels = first.channels <= 2 ? 1 : 3;
  return "the first record of --data (" + std::string(image::FormatName(first.format)) + " " +
         std::to_string(first.width) + "x" + std::to_string(first.height) + ", " + std::to_string(first.channels) +
         (first.channels == 1 ? " channel)" : " channels)");
}

// The smallest square image size >= 1 a built-in spec can be built for, or 0 when none up to
// 256 (larger tries would allocate big Dense layers for nothing): the number `--image-size` must reach.
int64_t SmallestImageSize(const std::string& spec, int64_t channels) {
  auto builds = [&](int64_t size) {
    auto sized = SpecWithInputShape(spec, size, channels);
    return sized.ok() && keras::ModelFromJson(*sized).ok();
  };
  int64_t hi = 1;
  while (hi <= 256 && !builds(hi)) hi *= 2;
  if (hi > 256) return 0;
  int64_t lo = hi / 2;  // does not build (or 0)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (builds(mid) ? hi : lo) = mid;
  }
  return hi;
}

Result<data::Dataset> MakeDataset(const TrainFlags& f, const std::string& pattern, int replicas, bool training) {
  if (FashionMnistLayout(f)) {
    datasets::FashionMnistOptions o;
    o.batch_size = f.batch_per_replica;
    o.replicas = replicas;
    o.drop_remainder = training;
    o.shuffle = training ? 60000 : 0;
    o.seed = static_cast<uint64_t>(f.seed);
    o.repeat = training;
    o.deterministic = true;
    o.image_key = f.image_key;
    o.label_key = f.label_key;
    return datasets::FashionMnistDataset(pattern, o);
  }
  datasets::FlowersOptions o;
  o.image_size = static_cast<int>(f.image_size);
  o.channels = static_cast<int>(f.channels);
  o.batch_size = f.batch_per_replica;
  o.replicas = replicas;
  o.deterministic = f.deterministic || !training;
  o.augment = training;
  o.repeat = training;
  o.drop_remainder = training;  // validation sees every record (a short last batch is padded)
  o.shuffle_buffer = training ? 2048 : 0;
  o.seed = static_cast<uint64_t>(f.seed);
  o.image_key = f.image_key;
  o.label_key = f.label_key;
  o.autotune.training_replicas = replicas;
  return datasets::FlowersDataset(pattern, o);
}

int RunTrain(const std::vector<std::string>& args) {
  TrainFlags f;
  FlagParser flags("train", "[flags]",
                   "Trains an image classifier on TFRecords across every core, as model.fit does on a TPU.\n"
                   "With no flags: the reference CNN on Fashion-MNIST (made from Debian's dataset-fashion-mnist on\n"
                   "first run), 10 epochs, SGD with Nesterov momentum, linear warm-up and cosine decay.");
  flags.String("data", &f.data, "training TFRecord files (glob); default: Fashion-MNIST train");
  flags.String("val", &f.val, "validation/test TFRecord files (glob); default: Fashion-MNIST test without --data, none with it");
  flags.String("image-key", &f.image_key, "feature holding the encoded image (default image)");
  flags.String("label-key", &f.label_key, "feature holding the int64 class (default label)");
  flags.Int("image-size", &f.image_size,
            "images are decoded and resized to SxS (default 28; a Keras application's own, 224 or 299 for xception); "
            "built-in models are built for it");
  flags.Int("channels", &f.channels,
            "1 (grayscale) or 3 (RGB): images are decoded to it and built-in models built for it (default: as the first "
            "record of --data stores it)");
  flags.Int("classes", &f.classes,
            "number of classes: a built-in model's last layer is built for it (default: the model's own, 10 for "
            "reference-cnn, 104 for the flowers models)");
  flags.String("preset", &f.preset, "flowers: the Kaggle flowers recipe (see docs/flowers.md); flags after it override it");
  flags.String("model", &f.model,
               "a built-in name (reference-cnn, flowers-cnn, flowers-squeezenet, flowers-xception) or a Keras application "
               "(resnet50, mobilenet_v2, efficientnet_b0, xception, densenet121), built for the input's size, channels and "
               "--classes; or a spec JSON file, kept as written");
  flags.Int("epochs", &f.epochs, "epochs (default 10)");
  flags.Int("steps-per-epoch", &f.steps_per_epoch, "steps per epoch (default: one pass over the training files)");
  flags.Int("validation-steps", &f.validation_steps,
            "batches of --val to validate on after each epoch and to evaluate at the end (Keras's validation_steps; "
            "default: all of it)");
  flags.Int("batch-per-replica", &f.batch_per_replica, "batch per replica (default 128); global = this x replicas");
  flags.Double("lr", &f.lr, "learning rate for a global batch of 128 (default 0.05; --preset flowers: the peak per replica, 5e-4)");
  flags.String("lr-scaling", &f.lr_scaling, "linear: scale the learning rate with the global batch / 128; none");
  flags.String("schedule", &f.schedule, "cosine (warm-up then cosine decay to 0), constant, or rampup (--preset flowers)");
  flags.Double("warmup-epochs", &f.warmup_epochs, "linear warm-up length in epochs (default 0.5; rampup: whole epochs, 3)");
  flags.Double("weight-decay", &f.weight_decay, "weight decay: SGD's L2 term on the gradient (default 5e-4); with --preset flowers, Adam's decoupled decay as Keras's (default 0)");
  flags.String("precision", &f.precision,
               "f32 or bf16 (mixed_bfloat16: bf16 matmul/conv, f32 variables; needs AVX-512); --preset flowers: bf16 where the CPU has AVX512_BF16");
  flags.Int("seed", &f.seed, "seed for weights, shuffling and dropout (default 42)");
  flags.Bool("deterministic", &f.deterministic, "fixed input order: the same seed gives the same weights");
  flags.String("checkpoint-dir", &f.checkpoint_dir, "back up weights, optimizer and input position here");
  flags.Bool("resume", &f.resume, "continue from the backup in --checkpoint-dir");
  flags.String("tensorboard", &f.tensorboard, "write TensorBoard event files here (train/, validation/)");
  flags.Double("monitor-interval", &f.monitor_interval, "seconds per monitor window: utilization and idle % (default 10)");
  flags.Int("monitor-port", &f.monitor_port, "serve the live monitor page on this port (0: any free port)");
  flags.String("monitor-bind", &f.monitor_bind, "address of the monitor page (default 127.0.0.1)");
  flags.String("trace", &f.trace, "write a Chrome trace (replicas and pipeline stages) to this file");
  flags.String("report-json", &f.report_json, "write the post-run input-pipeline report as JSON here");
  flags.Bool("no-monitor", &f.no_monitor, "do not run the utilization / idle monitor");
  flags.Int("replicas", &f.replicas, "replicas (default: one per usable core)");
  flags.String("summary-json", &f.summary_json, "write final metrics, wall time and images/s here");
  flags.String("out", &f.out,
               "where to save the trained model (default: in the cache directory); F.h5: a Keras weight file (weights only)");
  flags.String("weights", &f.weights,
               "load these weights before training: a Keras .h5 (by layer name; layers whose shapes differ, e.g. a new "
               "head, are skipped) or a Strata checkpoint");
  flags.String("freeze-until", &f.freeze_until,
               "freeze the model's layers up to and including LAYER (Keras's model.layers order): they keep their weights");
  flags.Int("freeze-backbone-epochs", &f.freeze_backbone_epochs,
            "with --freeze-until: N epochs with those layers frozen (the head trains), then every layer at the "
            "learning rate x 0.1 for the remaining --epochs");
  ApplyPreset(args, &f);
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (!f.preset.empty() && f.preset != "flowers") return Fail("train", "--preset must be flowers", kExitUsage);
  if (f.preset == "flowers" && f.data.empty())
    return Fail("train", "--preset flowers needs --data 'DIR/train/*.tfrec' (and --val 'DIR/val/*.tfrec')", kExitUsage);
  if (f.precision != "f32" && f.precision != "bf16") return Fail("train", "--precision must be f32 or bf16", kExitUsage);
  if (f.precision == "bf16")
    if (Status s = backend::PrecisionSupported(backend::Precision::kBF16); !s.ok())
      return Fail("train", "--precision bf16: " + s.message(), kExitUsage);
  if (f.lr_scaling != "linear" && f.lr_scaling != "none") return Fail("train", "--lr-scaling must be linear or none", kExitUsage);
  if (f.schedule != "cosine" && f.schedule != "constant" && f.schedule != "rampup")
    return Fail("train", "--schedule must be cosine, constant or rampup", kExitUsage);
  if (f.channels != 0 && f.channels != 1 && f.channels != 3) return Fail("train", "--channels must be 1 or 3", kExitUsage);
  if (f.resume && f.checkpoint_dir.empty()) return Fail("train", "--resume needs --checkpoint-dir", kExitUsage);
  if (f.epochs < 1 || f.batch_per_replica < 1) return Fail("train", "--epochs and --batch-per-replica must be positive", kExitUsage);
  if (f.validation_steps == 0 || f.validation_steps < -1)
    return Fail("train", "--validation-steps must be positive (or left out: all of --val)", kExitUsage);
  if (f.freeze_backbone_epochs < 0) return Fail("train", "--freeze-backbone-epochs must be 0 or more", kExitUsage);
  if (f.freeze_backbone_epochs > 0 && f.freeze_until.empty())
    return Fail("train", "--freeze-backbone-epochs needs --freeze-until LAYER (the backbone's last layer)", kExitUsage);
  if (f.freeze_backbone_epochs >= f.epochs && f.freeze_backbone_epochs > 0)
    return Fail("train",
                "--freeze-backbone-epochs " + std::to_string(f.freeze_backbone_epochs) + " leaves no epoch of --epochs " +
                    std::to_string(f.epochs) + " to fine-tune: pass fewer, or --freeze-until alone to train the head only",
                kExitUsage);
  // A backup holds one phase's optimizer; which phase it was is not recorded, so a two-phase run
  // cannot be continued (--freeze-until alone resumes: the flag freezes the same layers again).
  if (f.freeze_backbone_epochs > 0 && f.resume)
    return Fail("train",
                "--resume cannot continue a --freeze-backbone-epochs run: rerun it without --resume, or continue the "
                "fine-tuning from a saved model with --weights",
                kExitUsage);
  // A Keras application is built at Keras's default size unless --image-size (or the preset) says
  // otherwise, and refused below its minimum before any work.
  const bool application = keras::applications::IsApplication(f.model);
  if (application) {
    const bool size_given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
      return a == "--image-size" || a.rfind("--image-size=", 0) == 0;
    });
    if (!size_given && f.preset.empty()) f.image_size = keras::applications::DefaultSize(f.model);
    if (auto o = ApplicationOptionsFor(f.model, f.image_size, 3, f.classes); !o.ok())
      return Fail("train", o.status().message(), kExitUsage);
  }

  Stopwatch wall;
  // ---- data
  const bool default_data = f.data.empty();
  if (f.data.empty()) {
    auto paths = DefaultFashionMnist();
    if (!paths.ok()) return Fail("train", paths.status().ToString());
    f.data = paths->first;
    if (f.val.empty()) f.val = paths->second;
  }
  // One replica per core in this process; under mpirun/srun, every worker's replicas train
  // together (MultiWorkerMirroredStrategy).
  auto strategy = distribute::MultiWorkerMirroredStrategy(static_cast<int>(f.replicas));
  if (!strategy.ok()) return Fail("train", strategy.status().ToString(), kExitUsage);
  const int replicas = (*strategy)->num_replicas_in_sync();
  const int local_replicas = (*strategy)->num_local_replicas();
  const int workers = (*strategy)->num_workers(), worker = (*strategy)->worker_index();
  const bool chief = worker == 0;  // prints, evaluates and saves
  const int64_t global_batch = datasets::GlobalBatch(f.batch_per_replica, replicas);
  auto channels_from = ResolveChannels(&f, default_data);
  if (!channels_from.ok())
    return Fail("train", channels_from.status().ToString());
  auto examples = CountRecords(f.data);
  if (!examples.ok()) return Fail("train", examples.status().ToString());
  const int64_t steps_per_epoch = f.steps_per_epoch > 0 ? f.steps_per_epoch : *examples / global_batch;
  if (steps_per_epoch < 1)
    return Fail("train", std::to_string(*examples) + " training examples do not fill one global batch of " + std::to_string(global_batch));
  // Each worker reads the global stream of local batches and keeps every workers-th one:
  // the same examples, in the same global steps, as one process with all the replicas.
  auto train = MakeDataset(f, f.data, local_replicas, /*training=*/true);
  if (!train.ok()) return Fail("train", train.status().ToString());
  if (workers > 1) *train = train->shard(workers, worker);
  std::optional<data::Dataset> val;
  if (!f.val.empty() && chief) {
    auto v = MakeDataset(f, f.val, local_replicas, /*training=*/false);
    if (!v.ok()) return Fail("train", v.status().ToString());
    val = *v;
  }
  if (chief)
    std::printf("validation: %s\n", !f.val.empty() ? f.val.c_str() : "none (--data without --val; pass --val FILES to validate)");

  // ---- model, in the strategy's scope (as the seed's snippet)
  std::unique_ptr<keras::Model> model;
  std::optional<keras::CompileOptions> fine_tune_options;  // phase 2 of --freeze-backbone-epochs
  const bool flowers = f.preset == "flowers";
  // What the saved checkpoint records, so `strata evaluate|predict --model CKPT` rebuild it.
  ModelInfo info{.spec_json = "", .source = f.model, .preset = f.preset, .image_key = f.image_key, .label_key = f.label_key,
                 .image_size = f.image_size, .classes = f.classes, .channels = f.channels};
  {
    auto scope = (*strategy)->scope();
    if (application) {
      // Keras's structure and names, built for the input as a Keras user passes input_shape and classes.
      auto options = ApplicationOptionsFor(f.model, f.image_size, f.channels, f.classes);
      if (!options.ok()) return Fail("train", options.status().message(), kExitUsage);
      info.application = f.model;
      info.application_options = *options;
      auto m = BuildModel(info);
      if (!m.ok()) return Fail("train", m.status().ToString());
      model = std::move(m).value();
    }
    auto spec = application ? Result<std::string>(std::string()) : SpecText(f.model);
    // A built-in model is built for the input, as a Keras user passes input_shape; a spec file
    // keeps its own input (with --preset flowers, --image-size still sets its size).
    const bool builtin = application || keras::BuiltinSpec(f.model).ok();
    const std::string builtin_spec = builtin && spec.ok() ? *spec : "";
    if (spec.ok() && builtin && !application) spec = SpecWithInputShape(*spec, f.image_size, f.channels);
    if (spec.ok() && builtin && !application && f.classes > 0) spec = SpecWithClasses(*spec, f.classes);
    else if (spec.ok() && flowers && !application) spec = SpecWithImageSize(*spec, f.image_size);
    if (!spec.ok()) return Fail("train", spec.status().ToString());
    info.spec_json = *spec;
    auto m = application ? Result<std::unique_ptr<keras::Model>>(std::move(model)) : keras::ModelFromJson(*spec);
    if (!m.ok() && builtin) {
      const int64_t smallest = SmallestImageSize(builtin_spec, f.channels);
      return Fail("train",
                  "model " + f.model + " cannot be built for " + ImageShape(f).ToString() + " images (" + m.status().message() +
                      ")" + (smallest > f.image_size ? ": pass --image-size " + std::to_string(smallest) + " or more" : ""),
                  kExitUsage);
    }
    if (!m.ok()) return Fail("train", m.status().WithContext(f.model).ToString());
    model = std::move(m).value();
    // The pipeline's images against the model's input, before any work (a Keras user passes
    // input_shape; here the flags that set either side are named).
    if (auto input = model->input_shape(0); input.ok() && *input != ImageShape(f))
      return Fail("train",
                  "model " + f.model + " takes images of shape " + input->ToString() + " but --data gives " +
                      ImageShape(f).ToString() + " (--image-size " + std::to_string(f.image_size) + ", --channels " +
                      std::to_string(f.channels) + " from " + *channels_from +
                      "): pass --image-size and --channels to match the model, or --model a spec whose input is " +
                      ImageShape(f).ToString(),
                  kExitUsage);
    if (chief)
      std::printf("input: %lldx%lldx%lld images (size from --image-size, channels from %s); model %s %s\n",
                  static_cast<long long>(f.image_size), static_cast<long long>(f.image_size),
                  static_cast<long long>(f.channels), channels_from->c_str(), f.model.c_str(),
                  builtin ? ("built for input_shape " + ImageShape(f).ToString()).c_str() : "from its spec file");
    // --classes against the model's output (a spec file's own last layer is not rewritten).
    if (auto output = model->output_shape(0); output.ok() && output->rank() >= 1) {
      const int64_t units = (*output)[output->rank() - 1];
      if (f.classes > 0 && units != f.classes)
        return Fail("train",
                    "model " + f.model + " has " + std::to_string(units) + " outputs but --classes is " +
                        std::to_string(f.classes) + ": drop --classes, or --model a spec whose last layer has " +
                        std::to_string(f.classes) + " units",
                    kExitUsage);
      f.classes = info.classes = units;
    }
    if (!f.freeze_until.empty()) {
      if (Status s = model->freeze_until(f.freeze_until); !s.ok())
        return Fail("train", "--freeze-until " + f.freeze_until + ": model " + f.model + " has no layer named " + f.freeze_until,
                    kExitUsage);
    }
    // The seed's rule: learning rate scaled linearly with the global batch.
    const double lr = f.lr * (f.lr_scaling == "linear" ? static_cast<double>(global_batch) / 128.0 : 1.0);
    const int64_t total = steps_per_epoch * f.epochs;
    const int64_t warmup = static_cast<int64_t>(std::llround(f.warmup_epochs * static_cast<double>(steps_per_epoch)));
    keras::schedules::RampUpDecayOptions ramp = kFlowersFromScratch;
    ramp.max = f.lr;  // per replica: the notebooks' LR_MAX x strategy.num_replicas_in_sync
    ramp.rampup_epochs = static_cast<int>(std::llround(f.warmup_epochs));
    ramp.replicas = replicas;
    keras::Schedule schedule = f.schedule == "constant" ? keras::schedules::Constant(lr)
                               : f.schedule == "rampup"
                                   ? keras::schedules::RampUpSustainDecay(ramp, steps_per_epoch)
                                   : keras::schedules::CosineDecay(0.0, std::max<int64_t>(1, total - warmup),
                                                                   {.alpha = 0, .warmup_target = lr, .warmup_steps = warmup});
    // The flowers recipe: Adam, as the codelab and the seed's notebook; the default job:
    // SGD with Nesterov momentum and weight decay.
    auto optimizer = [&](const keras::Schedule& s) {
      return flowers ? keras::optimizers::Adam(s, {.weight_decay = f.weight_decay})
                     : keras::optimizers::SGD(s, {.momentum = 0.9, .nesterov = true, .weight_decay = f.weight_decay});
    };
    std::vector<std::string> metrics = {"accuracy"};
    if (flowers) metrics.push_back("f1_macro");  // the competition's metric, on --val after each epoch
    // A spec's last layer either ends in softmax (probabilities) or gives logits.
    auto compile_options = [&](keras::Optimizer opt) -> keras::CompileOptions {
      return {.optimizer = std::move(opt),
              .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = !model->ends_in_softmax()}),
              .metrics = metrics,
              .precision = f.precision == "bf16" ? "mixed_bfloat16" : "float32",
              .seed = static_cast<uint64_t>(f.seed)};
    };
    Status st = model->compile(compile_options(optimizer(schedule)));
    if (!st.ok()) return Fail("train", st.ToString());
    if (!f.weights.empty()) {
      auto loaded = LoadInitialWeights(*model, f.weights);
      if (!loaded.ok()) return Fail("train", loaded.status().ToString());
      if (chief) std::printf("%s\n", loaded->c_str());
    }
    // Phase 2 of --freeze-backbone-epochs: every layer trainable, a new optimizer (as Keras's
    // recompile) whose schedule continues the first's where phase 1 left it, scaled down.
    if (f.freeze_backbone_epochs > 0) {
      const int64_t phase1_steps = steps_per_epoch * f.freeze_backbone_epochs;
      keras::Schedule fine = schedule;
      fine.fn = [schedule, phase1_steps](int64_t step) { return kFineTuneLrScale * schedule(step + phase1_steps); };
      fine_tune_options = compile_options(optimizer(fine));
    }
    if (chief)
      std::printf("%s replicas: %d (one per core) · global batch %lld = %lld per replica x %d · learning rate %.4g (%s)%s\n",
                (*strategy)->name().c_str(), replicas, static_cast<long long>(global_batch),
                static_cast<long long>(f.batch_per_replica), replicas, f.schedule == "rampup" ? f.lr * replicas : lr,
                schedule.description.c_str(), f.precision == "bf16" ? " · precision mixed_bfloat16" : "");
  }
  if (chief) model->summary();

  // ---- callbacks
  std::vector<std::shared_ptr<keras::Callback>> callbacks;
  if (!f.checkpoint_dir.empty()) {
    // With several workers the chief writes the backup and every worker restores from it (the
    // directory must be shared); each worker removes a stale one before any step, so none can
    // see a file the chief is about to replace.
    auto backup = std::make_shared<keras::BackupAndRestore>(f.checkpoint_dir, keras::BackupAndRestore::Options{.save_freq = 20});
    if (!f.resume && fs::exists(backup->path())) {
      if (chief)
        std::printf("Starting afresh: removing the old backup in %s (pass --resume to continue it)\n", f.checkpoint_dir.c_str());
      std::error_code ec;
      fs::remove(backup->path(), ec);
    }
    callbacks.push_back(backup);
  }
  callbacks.push_back(std::make_shared<keras::TerminateOnNaN>());
  auto epoch_clock = std::make_shared<EpochClock>();
  callbacks.push_back(epoch_clock);
  // What crossed between workers, counted for the report at the end.
  auto counters = std::make_shared<CrossHostSnapshot>((*strategy)->collective(), model.get());
  if ((*strategy)->collective()) callbacks.push_back(counters);
  if (!f.tensorboard.empty() && chief)
    callbacks.push_back(std::make_shared<keras::TensorBoard>(f.tensorboard, keras::TensorBoard::Options{.update_freq = 100}));
  // The utilization / idle monitor hears of fit's steps as its observer (the chief only).
  monitor::FitMonitor monitor({.interval_seconds = f.monitor_interval,
                               .tensorboard_dir = f.tensorboard.empty() ? "" : f.tensorboard + "/train",
                               .trace_path = f.trace,
                               .http_port = static_cast<int>(f.monitor_port),
                               .http_bind = f.monitor_bind,
                               .report_json = f.report_json});
  const bool monitored = !f.no_monitor && chief;
  if (monitored && !f.tensorboard.empty()) fs::create_directories(f.tensorboard + "/train");

  // ---- fit
  Stopwatch train_clock;
  auto fit = [&](int initial_epoch, int epochs) {
    return model->fit(*train, {.epochs = epochs, .steps_per_epoch = steps_per_epoch,
                               .validation_data = val ? &*val : nullptr, .validation_steps = f.validation_steps,
                               .callbacks = callbacks,
                               .verbose = !chief ? 0 : ::isatty(::fileno(stdout)) ? 1 : 2,
                               .initial_epoch = initial_epoch,
                               .observer = monitored ? &monitor : nullptr});
  };
  const int phase1_epochs = static_cast<int>(fine_tune_options ? f.freeze_backbone_epochs : f.epochs);
  if (chief && fine_tune_options)
    std::printf("phase 1 (head): epochs 1-%d with the layers up to %s frozen, %s, learning rate from %.4g\n",
                phase1_epochs, f.freeze_until.c_str(), TrainableParams(*model).c_str(), model->learning_rate());
  auto history = fit(0, phase1_epochs);
  if (!history.ok()) return Fail("train", history.status().ToString());
  if (fine_tune_options) {
    // The head-trained model, kept beside the backups: a fine-tuning that fails can start again
    // from it (--weights D/head_trained.h5).
    if (chief && !f.checkpoint_dir.empty()) {
      const std::string head = f.checkpoint_dir + "/head_trained.h5";
      if (Status s = model->save_weights(head); !s.ok()) return Fail("train", s.ToString());
      std::printf("phase 1 model saved to %s\n", head.c_str());
    }
    {
      auto scope = (*strategy)->scope();
      model->set_trainable(true);
      if (Status s = model->compile(*fine_tune_options); !s.ok()) return Fail("train", s.ToString());
    }
    if (chief)
      std::printf("phase 2 (fine-tuning): epochs %d-%lld with every layer trainable at the learning rate x %g, %s, "
                  "learning rate from %.4g\n",
                  phase1_epochs + 1, static_cast<long long>(f.epochs), kFineTuneLrScale, TrainableParams(*model).c_str(),
                  model->learning_rate());
    auto phase2 = fit(phase1_epochs, static_cast<int>(f.epochs));
    if (!phase2.ok()) return Fail("train", phase2.status().ToString());
    history->epoch.insert(history->epoch.end(), phase2->epoch.begin(), phase2->epoch.end());
    for (auto& [key, values] : phase2->history) {
      auto& all = history->history[key];
      all.insert(all.end(), values.begin(), values.end());
    }
  }
  const double train_seconds = train_clock.ElapsedSeconds();
  nlohmann::json worker_times;  // every worker's all-reduce wait: gathered before the chief goes on alone
  if (distribute::Collective* c = (*strategy)->collective()) {
    auto times = GatherWorkerTimes(*c, *model, *counters);
    if (!times.ok()) return Fail("train", times.status().ToString());
    worker_times = std::move(times).value();
  }

  if (!chief) return kExitOk;
  // ---- evaluate, save, report (the chief)
  double test_accuracy = 0, test_loss = 0, val_f1 = 0;
  if (val) {
    auto logs = model->evaluate(*val, {.steps = f.validation_steps});
    if (!logs.ok()) return Fail("train", logs.status().ToString());
    test_accuracy = keras::LogValue(*logs, "accuracy");
    test_loss = keras::LogValue(*logs, "loss");
    val_f1 = keras::LogValue(*logs, "f1_macro");
  }
  std::string out = f.out.empty() ? UserCacheDir() + "/models/" + model->name() + ".ckpt" : f.out;
  std::error_code ec;
  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path(), ec);
  if (Status s = model->save_weights(out); !s.ok()) return Fail("train", s.ToString());
  // A Keras weight file holds weights only; a checkpoint also records how to rebuild the model.
  if (!keras::IsHdf5File(out))
    if (Status s = RecordModelInfo(out, info); !s.ok()) return Fail("train", s.ToString());
  const int64_t trained = steps_per_epoch * f.epochs * global_batch;
  const double images_per_second = static_cast<double>(trained) / train_seconds;
  std::printf("trained %lld images in %.1f s (%.0f images/s)\n", static_cast<long long>(trained), train_seconds, images_per_second);
  std::printf("model saved to %s\n", out.c_str());
  // The MPI path's cost: what crossed between workers per step, and the time it took.
  nlohmann::json cross_host;
  if (const distribute::Collective* c = (*strategy)->collective()) {
    const std::vector<double>& at = epoch_clock->seconds();  // validation included, as in the epochs' own times
    cross_host = CrossHostReport(*c, *model, workers, train_seconds, *counters, at.size() >= 2 ? at.back() - at.front() : 0,
                                 worker_times);
  }
  if (val && flowers) {
    std::printf("val loss: %.4f\nval accuracy: %.4f\nval macro F1: %.4f\n", test_loss, test_accuracy, val_f1);
    std::printf("next: strata evaluate --model %s --data '%s'; strata predict --model %s --data 'DIR/test/*.tfrec' --out submission.csv\n",
                out.c_str(), f.val.c_str(), out.c_str());
  } else if (val) {
    std::printf("test loss: %.4f\ntest accuracy: %.4f\n", test_loss, test_accuracy);
  }
  if (!f.summary_json.empty()) {
    nlohmann::json j = {{"test_accuracy", test_accuracy}, {"test_loss", test_loss},
                        {"preset", f.preset}, {"val_f1_macro", val_f1},
                        {"wall_seconds", wall.ElapsedSeconds()}, {"train_seconds", train_seconds},
                        {"images_per_second", images_per_second}, {"replicas", replicas},
                        {"global_batch", global_batch}, {"epochs", f.epochs}, {"model_path", out},
                        {"history", history->history}, {"seconds_at_epoch_end", epoch_clock->seconds()}};
    if (!cross_host.is_null()) j["cross_host"] = cross_host;
    if (Status s = WriteFileAtomic(f.summary_json, j.dump(2) + "\n"); !s.ok()) return Fail("train", s.ToString());
  }
  return kExitOk;
}

const Registrar kTrain({"train", "train an image classifier (default: the reference CNN on Fashion-MNIST)", RunTrain});

}  // namespace
}  // namespace strata::cli
