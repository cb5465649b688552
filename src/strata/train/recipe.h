// A training recipe: everything `strata train`'s flags describe, as one plain struct, and the
// presets that fill it. `train::Trainer` (trainer.h) runs one. The command, C++ and Python
// (`strata.train(...)`) share it, so one recipe gives the same weights from each.
//
//   train::Recipe r = *train::Preset("flowers");
//   r.data = "/data/flowers/train/*.tfrec";
//   r.model = "efficientnet_b0";
//   auto report = train::Run(r);
//
// A field left at its default takes the preset's value; the flag `--name-with-dashes` and the
// Python keyword `name_with_underscores` set the field `name_with_underscores`.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/data/dataset.h"
#include "strata/keras/model.h"
#include "strata/keras/optimizers.h"
#include "strata/keras/schedules.h"

namespace strata::train {

struct Recipe {
  // ---- what it is: "" (the default job: the reference CNN on Fashion-MNIST) or "flowers"
  // (Kaggle's "Flower Classification with TPUs"); recorded in the saved model. The name changes
  // nothing by itself: what a preset means is the values Preset() sets.
  std::string preset;

  // ---- data
  std::string data;  // training TFRecords (glob); empty: Fashion-MNIST, made in the cache on first use
  std::string val;   // validation TFRecords; empty: Fashion-MNIST's test split without `data`, none with it
  std::string image_key = "image", label_key = "label";
  int64_t image_size = 0;  // 0: the model's own (a Keras application's default size, else 28)
  int64_t channels = 0;    // 1 or 3; 0: as the first record of `data` stores its image
  int64_t classes = 0;     // 0: the model's own
  // Fashion-MNIST's training augmentation (datasets/fashion_mnist.h): a random 28 x 28 window of
  // the image padded by `pad_crop` zero pixels a side, mirrored with probability `flip`. The
  // default job mirrors only (docs/fashion_mnist.md: random crops cost this small model more than
  // they give at its length); the flowers preset sets 0, its pipeline augmenting on its own.
  int64_t pad_crop = 0;
  double flip = 0.5;

  // ---- model: a built-in spec name, a Keras application, or a spec JSON file
  std::string model = "reference-cnn";
  std::string weights;       // loaded before training: Keras .h5 (by layer name) or a Strata checkpoint
  std::string freeze_until;  // layers up to and including this one are frozen
  int64_t freeze_backbone_epochs = 0;  // > 0: that many epochs frozen, then every layer at lr x 0.1

  // ---- schedule and optimizer
  int64_t epochs = 15;
  int64_t steps_per_epoch = 0;    // 0: one pass over `data`
  int64_t validation_steps = -1;  // -1: all of `val`
  int64_t batch_per_replica = 128;
  int64_t replicas = 0;           // 0: one per usable core
  std::string optimizer = "sgd";  // sgd (Nesterov momentum 0.9) or adam
  double lr = 0.05;               // for a global batch of 128 (rampup: the peak per replica)
  std::string lr_scaling = "linear";  // linear (x global batch / 128) or none
  std::string schedule = "cosine";    // cosine (warm-up, then to 0), constant, or rampup (the flowers notebooks')
  double warmup_epochs = 0.5;
  double weight_decay = 5e-4;     // SGD: L2 on the gradient; Adam: decoupled, as Keras 3
  double label_smoothing = 0.1;   // the cross-entropy's: targets (1 - e) one-hot + e / classes
  double ema = 0;                 // Keras's use_ema at this ema_momentum: the model ends as the weights' average (0: off)
  // The final evaluation's test-time augmentation (tta.h): "" none, "flip" the mean of the
  // outputs for each image and its mirror image, reported beside the plain accuracy.
  std::string tta;
  std::vector<std::string> metrics = {"accuracy"};
  std::string precision = "f32";  // f32 or bf16 (mixed_bfloat16); the presets: bf16 where NativeBf16()
  int64_t seed = 42;
  bool deterministic = false;     // a fixed input order: the same seed gives the same weights

  // ---- checkpoints and output
  std::string checkpoint_dir;  // backups every 20 steps (weights, optimizer, input position)
  bool resume = false;         // continue the backup in checkpoint_dir
  std::string out;             // the trained model: a checkpoint, or F.h5 (Keras weights); "": the cache directory

  // ---- what it reports
  std::string tensorboard;     // event files here (train/, validation/)
  bool monitor = true;         // the utilization / idle monitor
  double monitor_interval = 10;
  int64_t monitor_port = -1;   // the live page's port (0: any free one; -1: none)
  std::string monitor_bind = "127.0.0.1";
  std::string trace;           // a Chrome trace
  std::string report_json;     // the post-run input-pipeline report
  int verbose = -1;            // 0 silent, 1 progress bar, 2 a line per epoch; -1: 1 on a terminal, else 2

  // ---- what else sets a preset apart: a preset is only its values, so what its name once decided
  // is a value too (no flags: the preset's, as `metrics`)
  // What an empty `data` stands for: "fashion_mnist" (its TFRecords, made in the cache on first
  // use) or "" (nothing: `data` must be given, as the flowers preset's).
  std::string default_data = "fashion_mnist";
  // A spec file's InputLayer is set to image_size x image_size (the flowers preset's: its
  // pipeline resizes every image); false keeps a spec file as written. Built-in specs and Keras
  // applications are always built for the input.
  bool resize_spec_file = false;
  // What the report calls `val`: "test" (the default job's, Fashion-MNIST's test split) or "val"
  // (the flowers preset's validation files; its test split is what `strata predict` is for).
  std::string val_split = "test";
};

// What the records are, decided here alone: Fashion-MNIST's TFDS layout (28 x 28 grayscale
// images labelled under `label`), read by its own pipeline (datasets/fashion_mnist.h: crops and
// flips), or any other image records, decoded and resized by the flowers pipeline
// (datasets/flowers.h). The recipe's pipeline and `strata evaluate|predict` take it from here.
enum class DataKind { kFashionMnist, kImageRecords };
DataKind DataKindOf(int64_t image_size, const std::string& label_key, int64_t channels);
// The recipe's, its image_size and channels resolved (ResolveInputs).
DataKind DataKindOf(const Recipe& r);

// The recipe a preset names: "" or "fashion_mnist" (the defaults above), or "flowers" (its
// model, image size, labels, batch, schedule, Adam, metrics and precision, no default data, spec
// files resized, `val` named val; `data` still to set).
Result<Recipe> Preset(const std::string& name);
// The names Preset() takes.
std::vector<std::string> PresetNames();
// Whether this CPU runs bf16 at its full rate (AVX512_BF16 or AMX-BF16, within the ISA cap):
// the presets' precision is bf16 where it does, f32 elsewhere.
bool NativeBf16();

// Checks the recipe's values and their combinations before any work: an InvalidArgument naming
// the field (as its flag, --like-this) and what it takes.
Status Check(const Recipe& r);

// Fills what the recipe leaves to the model and the data: `image_size` (0: a Keras application's
// default size, else 28), `data` and `val` when `data` is empty (the `default_data`,
// Fashion-MNIST's TFRecords, made from Debian's package in the cache directory on first use,
// saying so when `talk`; without a default_data, an InvalidArgument), and
// `channels` (0: as the first record of `data` stores its image). Returns where the channels
// came from ("--channels", "Fashion-MNIST", "the first record of --data (PNG 32x32, 3 channels)").
// A Keras application below its minimum size is an InvalidArgument, before any data is read.
// Without `make_data`, an empty `data` stays empty and only the channels are Fashion-MNIST's
// (for MakeModel alone).
Result<std::string> ResolveInputs(Recipe* r, bool talk = false, bool make_data = true);

// ---- the recipe's pieces, for a user who takes it apart ------------------------------------
// The input pipeline of the recipe over the files matching `pattern` for `replicas` replicas in
// this process: Fashion-MNIST's or the flowers pipeline, as DataKindOf(r) says (JPEG/PNG decoded
// and resized, augmented and shuffled when `training`). `r.channels` and
// `r.image_size` must be resolved (ResolveInputs).
Result<data::Dataset> MakeDataset(const Recipe& r, const std::string& pattern, int replicas, bool training);
// MakeDataset's twin for a saved model (strata evaluate, predict): the records in file order,
// unaugmented, the last short batch kept: (image f32 [B, S, S, C], label i64 [B] when `labels`,
// id u8 [B, L] with `id_key`: that feature). S, C and the features come from `info` (what the
// checkpoint records, model_source.h).
struct ModelInfo;
Result<data::Dataset> InferenceDataset(const ModelInfo& info, const std::string& glob, int64_t batch, bool labels,
                                       const std::string& id_key = "");
// The recipe's model, uncompiled: a Keras application or a built-in spec built for image_size x
// image_size x channels images and `classes` outputs, or a spec file as written. image_size and
// channels must be resolved (not 0).
Result<std::unique_ptr<keras::Model>> MakeModel(const Recipe& r);
// The peak learning rate for `replicas` replicas in sync: `lr` x the global batch / 128 (linear
// scaling), or `lr` x the replicas for rampup (the notebooks' LR_MAX x num_replicas_in_sync).
double PeakLearningRate(const Recipe& r, int replicas);
// The learning-rate schedule over `steps_per_epoch` steps an epoch with `replicas` replicas in
// sync (the rate scales with the global batch, or with the replicas for rampup).
keras::Schedule MakeSchedule(const Recipe& r, int64_t steps_per_epoch, int replicas);
// The recipe's optimizer at the schedule.
keras::Optimizer MakeOptimizer(const Recipe& r, keras::Schedule schedule);

}  // namespace strata::train

#pragma GCC visibility pop
