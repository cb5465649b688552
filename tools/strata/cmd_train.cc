// strata train: the main job. With no arguments: Fashion-MNIST (made from Debian's
// dataset-fashion-mnist on first run), the reference CNN, every core, ~93 % test accuracy.
// The command is flags -> recipe -> run -> report: the recipe and its run live in the library
// (strata/train/), shared with C++ and Python (`strata.train(...)`).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "strata/core/file.h"
#include "strata/keras/applications/applications.h"
#include "strata/train/recipe.h"
#include "strata/train/reporter.h"
#include "strata/train/trainer.h"

namespace strata::cli {
namespace {

// The run's lines as the library's console prints them, and then what to run next: command-line
// hints belong to the command (under Python the same run gives none). A recipe whose `val` is a
// validation split leaves its test split to predict.
class CommandReporter final : public train::ConsoleReporter {
 public:
  void Finished(const train::Recipe& r, const train::TrainReport& report) override {
    if (r.val.empty() || r.val_split != "val") return;
    std::printf("next: strata evaluate --model %s --data '%s'; strata predict --model %s --data 'DIR/test/*.tfrec' "
                "--out submission.csv\n",
                report.model_path.c_str(), r.val.c_str(), report.model_path.c_str());
  }
};

// The preset the arguments name (its values become the flags' defaults; flags given on the
// command line still override them, wherever they stand).
std::string PresetArg(const std::vector<std::string>& args) {
  std::string preset;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--preset" && i + 1 < args.size()) preset = args[i + 1];
    if (args[i].rfind("--preset=", 0) == 0) preset = args[i].substr(9);
  }
  return preset;
}

int RunTrain(const std::vector<std::string>& args) {
  auto preset = train::Preset(PresetArg(args));
  if (!preset.ok()) return Fail("train", preset.status().message(), kExitUsage);
  train::Recipe f = *preset;
  std::string summary_json;
  bool no_monitor = false;
  FlagParser flags("train", "[flags]",
                   "Trains an image classifier on TFRecords across every core, as model.fit does on a TPU.\n"
                   "With no flags: the reference CNN on Fashion-MNIST (made from Debian's dataset-fashion-mnist on\n"
                   "first run), 15 epochs, SGD with Nesterov momentum, linear warm-up and cosine decay, label smoothing\n"
                   "0.1, random mirroring, bf16 where the CPU runs it natively (docs/fashion_mnist.md).");
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
  flags.String("preset", &f.preset, "fashion_mnist (the default job) or flowers (the Kaggle flowers recipe, docs/flowers.md): its values, which the other flags override");
  flags.String("model", &f.model,
               "a built-in name (reference-cnn, flowers-cnn, flowers-squeezenet, flowers-xception) or a Keras application "
               "(" + keras::applications::NameList() + "), built for the input's size, channels and "
               "--classes; or a spec JSON file, kept as written");
  flags.Int("epochs", &f.epochs, "epochs (default 15; --preset flowers 12)");
  flags.Int("steps-per-epoch", &f.steps_per_epoch, "steps per epoch (default: one pass over the training files)");
  flags.Int("validation-steps", &f.validation_steps,
            "batches of --val to validate on after each epoch and to evaluate at the end (Keras's validation_steps; "
            "default: all of it)");
  flags.String("optimizer", &f.optimizer, "sgd (Nesterov momentum 0.9; the default) or adam (--preset flowers)");
  flags.Int("batch-per-replica", &f.batch_per_replica, "batch per replica (default 128); global = this x replicas");
  flags.Double("lr", &f.lr, "learning rate for a global batch of 128 (default 0.05; --preset flowers: the peak per replica, 5e-4)");
  flags.String("lr-scaling", &f.lr_scaling, "linear: scale the learning rate with the global batch / 128; none");
  flags.String("schedule", &f.schedule, "cosine (warm-up then cosine decay to 0), constant, or rampup (--preset flowers)");
  flags.Double("warmup-epochs", &f.warmup_epochs, "linear warm-up length in epochs (default 0.5; rampup: whole epochs, 3)");
  flags.Double("weight-decay", &f.weight_decay, "weight decay: SGD's L2 term on the gradient (default 5e-4); with --preset flowers, Adam's decoupled decay as Keras's (default 0)");
  flags.Double("label-smoothing", &f.label_smoothing,
               "the cross-entropy's label smoothing e: targets (1 - e) one-hot + e / classes (default 0.1; --preset flowers 0)");
  flags.Double("ema", &f.ema,
               "Keras's use_ema: keep a moving average of the weights at this momentum (e.g. 0.99); the trained model is "
               "the average (default 0: off)");
  flags.String("tta", &f.tta,
               "flip: also report the test accuracy with test-time augmentation, each image's prediction the mean of "
               "the model's outputs for it and its mirror image (default: none)");
  flags.Int("pad-crop", &f.pad_crop,
            "Fashion-MNIST augmentation: a random 28x28 window of the image padded by N zero pixels a side (default 0)");
  flags.Double("flip", &f.flip, "Fashion-MNIST augmentation: mirror each training image left-right with this probability (default 0.5)");
  flags.String("precision", &f.precision,
               "f32 or bf16 (mixed_bfloat16: bf16 matmul/conv, f32 variables; needs AVX-512); default: bf16 where the CPU runs it natively (AVX512_BF16 or AMX), else f32");
  flags.Int("seed", &f.seed, "seed for weights, shuffling and dropout (default 42)");
  flags.Bool("deterministic", &f.deterministic, "fixed input order: the same seed gives the same weights");
  flags.String("checkpoint-dir", &f.checkpoint_dir, "back up weights, optimizer and input position here");
  flags.Bool("resume", &f.resume, "continue from the backup in --checkpoint-dir");
  flags.String("tensorboard", &f.tensorboard, "write TensorBoard event files here (train/, validation/)");
  flags.Double("monitor-interval", &f.monitor_interval, "seconds per monitor window: utilization and idle % (default 10)");
  flags.Int("monitor-port", &f.monitor_port, "serve the live monitor page on this port (0: any free port)");
  flags.String("monitor-bind", &f.monitor_bind, "address of the monitor page (default 127.0.0.1)");
  flags.String("trace", &f.trace,
               "write a Chrome trace (replicas and pipeline stages) to this file; under mpirun every worker writes one "
               "(worker w: FILE with .worker<w> before the extension) with its all-reduce buckets, which "
               "bench/merge_traces.py aligns into one");
  flags.String("report-json", &f.report_json, "write the post-run input-pipeline report as JSON here");
  flags.Bool("no-monitor", &no_monitor, "do not run the utilization / idle monitor");
  flags.Int("replicas", &f.replicas, "replicas (default: one per usable core)");
  flags.String("summary-json", &summary_json, "write final metrics, wall time and images/s here");
  flags.String("out", &f.out,
               "where to save the trained model (default: in the cache directory); F.h5: a Keras weight file (weights only)");
  flags.String("weights", &f.weights,
               "load these weights before training: a Keras .h5 (by layer name; layers whose shapes differ, e.g. a new "
               "head, are skipped), a Strata checkpoint, or `imagenet` (an application's Keras ImageNet backbone, "
               "downloaded once into ~/.cache/strata/models or $STRATA_HOME/models and checked against Keras's hash)");
  flags.String("freeze-until", &f.freeze_until,
               "freeze the model's layers up to and including LAYER (Keras's model.layers order): they keep their weights");
  flags.Int("freeze-backbone-epochs", &f.freeze_backbone_epochs,
            "with --freeze-until: N epochs with those layers frozen (the head trains), then every layer at the "
            "learning rate x 0.1 for the remaining --epochs");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  f.monitor = !no_monitor;
  // A recipe that cannot run is a usage error (exit 2, the flag named); anything else failed
  // while working (exit 1).
  auto fail = [](const Status& s) {
    return s.code() == StatusCode::kInvalidArgument ? Fail("train", s.message(), kExitUsage) : Fail("train", s.ToString());
  };
  auto trainer = train::Trainer::Create(f, std::make_shared<CommandReporter>());
  if (!trainer.ok()) return fail(trainer.status());
  auto report = (*trainer)->Run();
  if (!report.ok()) return Fail("train", report.status().ToString());
  if (report->chief && !summary_json.empty())
    if (Status s = WriteFileAtomic(summary_json, train::ReportJson((*trainer)->recipe(), *report)); !s.ok())
      return Fail("train", s.ToString());
  return kExitOk;
}

const Registrar kTrain({"train", "train an image classifier (default: the reference CNN on Fashion-MNIST)", RunTrain});

}  // namespace
}  // namespace strata::cli
