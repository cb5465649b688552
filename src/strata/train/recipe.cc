#include "strata/train/recipe.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "strata/backend/compile.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/core/peak_flops.h"
#include "strata/datasets/batch_size.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/image_example.h"
#include "strata/datasets/make_records.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/callbacks.h"
#include "strata/train/model_source.h"
#include "strata/train/tta.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

// The flowers recipe's learning rate: the notebooks' ramp-up / sustain / exponential decay,
// with max scaled by the replicas, but 10x higher: their 1e-5 .. 5e-5 protect pretrained
// weights; a model trained from scratch needs Adam's usual 1e-3 range.
constexpr keras::schedules::RampUpDecayOptions kFlowersFromScratch{
    .start = 1e-4, .max = 5e-4, .min = 1e-5, .rampup_epochs = 3, .sustain_epochs = 2, .decay = 0.8};

bool OneOf(const std::string& v, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return v == a; });
}

// The default dataset: TFRecords in TFDS's layout, made once from Debian's package into the
// cache directory.
Result<std::pair<std::string, std::string>> DefaultFashionMnist(bool talk) {
  const std::string data_dir = UserCacheDir() + "/datasets";
  const std::string dir = datasets::FashionMnistRecordDir(data_dir);
  const std::string train = dir + "/fashion_mnist-train.tfrecord-*", test = dir + "/fashion_mnist-test.tfrecord-*";
  if (!fs::exists(dir + "/dataset_info.json")) {
    if (talk) std::printf("Making the Fashion-MNIST TFRecords in %s (first run only)\n", dir.c_str());
    datasets::FashionMnistRecordsOptions o;
    const bool tty = talk && ::isatty(::fileno(stdout));
    Stopwatch clock;
    o.progress = [tty, clock](int64_t done, int64_t total) {
      if (!tty) return;
      std::printf("\r%s", keras::ProgbarLogger::Line(done, total, clock.ElapsedSeconds(), {}, done == total).c_str());
      std::fflush(stdout);
    };
    STRATA_ASSIGN_OR_RETURN(auto report, datasets::MakeFashionMnistRecords(data_dir, o));
    if (talk) std::printf("%s%lld examples written\n", tty ? "\n" : "", static_cast<long long>(report.written));
  }
  return std::make_pair(train, test);
}

// The channels when the recipe gives none: the first record's image (gray + alpha reads as
// gray, RGBA as RGB); the default Fashion-MNIST job is grayscale. Returns where they came from.
Result<std::string> ResolveChannels(Recipe* r, bool default_data) {
  if (r->channels != 0) return std::string("--channels");
  if (default_data) {
    r->channels = 1;
    return std::string("Fashion-MNIST");
  }
  STRATA_ASSIGN_OR_RETURN(image::ImageInfo first, datasets::FirstImageInfo(r->data, r->image_key, r->label_key));
  r->channels = first.channels <= 2 ? 1 : 3;
  return "the first record of --data (" + std::string(image::FormatName(first.format)) + " " +
         std::to_string(first.width) + "x" + std::to_string(first.height) + ", " + std::to_string(first.channels) +
         (first.channels == 1 ? " channel)" : " channels)");
}

// The error of a recipe with neither `data` nor a default_data, named by its preset if any.
Status NeedsData(const Recipe& r) {
  return InvalidArgument((r.preset.empty() ? std::string("a recipe without default_data") : "--preset " + r.preset) +
                         " needs --data 'DIR/train/*.tfrec' (and --val 'DIR/val/*.tfrec')");
}

}  // namespace

std::vector<std::string> PresetNames() { return {"fashion_mnist", "flowers"}; }

bool NativeBf16() {
  const CpuIsa& isa = HostIsa();
  return (isa.avx512_bf16 || isa.amx_bf16) && backend::PrecisionSupported(backend::Precision::kBF16).ok();
}

Result<Recipe> Preset(const std::string& name) {
  Recipe r;
  // Both presets train in bf16 where it runs at its full rate (AVX512_BF16 instructions or AMX
  // tiles, not oneDNN's emulation): the default job since it measured within 0.2 points of
  // f32's accuracy (docs/fashion_mnist.md), the flowers preset already before (docs/flowers.md).
  r.precision = NativeBf16() ? "bf16" : "f32";
  if (name.empty() || name == "fashion_mnist") return r;
  if (name != "flowers") return InvalidArgument("--preset must be fashion_mnist or flowers, not " + name);
  // Kaggle's "Flower Classification with TPUs" (docs/flowers.md): flowers-xception at 192 px
  // (the codelab's small flowers-cnn leaves 2 cores waiting on JPEG decode half the time: see
  // docs/flowers.md, "What an epoch costs"), `class` labels, 104 classes, 16 images per replica
  // (the seed's 16 x replicas), Adam, 12 epochs, accuracy and macro F1 (the competition's
  // metric) on `val` after each epoch.
  r.preset = "flowers";
  r.model = "flowers-xception";
  r.label_key = "class";
  r.image_size = 192;
  r.classes = datasets::kFlowersNumClasses;
  r.batch_per_replica = 16;
  r.epochs = 12;
  r.optimizer = "adam";
  r.lr = kFlowersFromScratch.max;
  r.warmup_epochs = kFlowersFromScratch.rampup_epochs;
  r.weight_decay = 0;
  r.schedule = "rampup";
  r.metrics = {"accuracy", "f1_macro"};
  r.label_smoothing = 0;  // the notebooks' plain cross-entropy
  r.flip = 0;             // FlowersDataset's own augmentation applies
  r.default_data = "";    // the competition's records are the user's to give
  r.resize_spec_file = true;
  r.val_split = "val";    // the competition's test split has no labels: it is for predictions
  return r;
}

Status Check(const Recipe& r) {
  if (!r.preset.empty() && !OneOf(r.preset, {"fashion_mnist", "flowers"}))
    return InvalidArgument("--preset must be fashion_mnist or flowers, not " + r.preset);
  if (!OneOf(r.default_data, {"fashion_mnist", ""}))
    return InvalidArgument("default_data must be fashion_mnist or empty (no default: --data needed), not " +
                           r.default_data);
  if (r.data.empty() && r.default_data.empty()) return NeedsData(r);
  if (!OneOf(r.val_split, {"test", "val"})) return InvalidArgument("val_split must be test or val, not " + r.val_split);
  if (!OneOf(r.precision, {"f32", "bf16"})) return InvalidArgument("--precision must be f32 or bf16");
  if (r.precision == "bf16")
    if (Status s = backend::PrecisionSupported(backend::Precision::kBF16); !s.ok())
      return InvalidArgument("--precision bf16: " + s.message());
  if (!OneOf(r.lr_scaling, {"linear", "none"})) return InvalidArgument("--lr-scaling must be linear or none");
  if (!OneOf(r.schedule, {"cosine", "constant", "rampup"}))
    return InvalidArgument("--schedule must be cosine, constant or rampup");
  if (!OneOf(r.optimizer, {"sgd", "adam"})) return InvalidArgument("--optimizer must be sgd or adam");
  if (r.channels != 0 && r.channels != 1 && r.channels != 3) return InvalidArgument("--channels must be 1 or 3");
  if (r.image_size < 0) return InvalidArgument("--image-size must be positive");
  if (r.resume && r.checkpoint_dir.empty()) return InvalidArgument("--resume needs --checkpoint-dir");
  if (r.epochs < 1 || r.batch_per_replica < 1)
    return InvalidArgument("--epochs and --batch-per-replica must be positive");
  if (r.validation_steps == 0 || r.validation_steps < -1)
    return InvalidArgument("--validation-steps must be positive (or left out: all of --val)");
  if (r.pad_crop < 0 || r.pad_crop > 27) return InvalidArgument("--pad-crop must be in [0, 27] pixels");
  if (!(r.flip >= 0 && r.flip <= 1)) return InvalidArgument("--flip must be a probability in [0, 1]");
  if (!(r.label_smoothing >= 0 && r.label_smoothing < 1)) return InvalidArgument("--label-smoothing must be in [0, 1)");
  if (!(r.ema >= 0 && r.ema < 1)) return InvalidArgument("--ema must be a momentum in [0, 1) (0: off)");
  STRATA_RETURN_IF_ERROR(CheckTta(r.tta));
  if (r.freeze_backbone_epochs < 0) return InvalidArgument("--freeze-backbone-epochs must be 0 or more");
  if (r.freeze_backbone_epochs > 0 && r.freeze_until.empty())
    return InvalidArgument("--freeze-backbone-epochs needs --freeze-until LAYER (the backbone's last layer)");
  if (r.freeze_backbone_epochs >= r.epochs && r.freeze_backbone_epochs > 0)
    return InvalidArgument("--freeze-backbone-epochs " + std::to_string(r.freeze_backbone_epochs) +
                           " leaves no epoch of --epochs " + std::to_string(r.epochs) +
                           " to fine-tune: pass fewer, or --freeze-until alone to train the head only");
  // A backup holds one phase's optimizer; which phase it was is not recorded, so a two-phase run
  // cannot be continued (--freeze-until alone resumes: the flag freezes the same layers again).
  if (r.freeze_backbone_epochs > 0 && r.resume)
    return InvalidArgument(
        "--resume cannot continue a --freeze-backbone-epochs run: rerun it without --resume, or continue the "
        "fine-tuning from a saved model with --weights");
  return Status::OK();
}

Result<std::string> ResolveInputs(Recipe* r, bool talk, bool make_data) {
  // A Keras application is built at Keras's default size unless the recipe says otherwise, and
  // refused below its minimum size before any data is made or read.
  const bool application = keras::applications::IsApplication(r->model);
  if (r->image_size == 0) r->image_size = application ? keras::applications::DefaultSize(r->model) : 28;
  if (application) STRATA_RETURN_IF_ERROR(ApplicationOptionsFor(r->model, r->image_size, 3, r->classes).status());
  const bool default_data = r->data.empty();
  if (default_data && make_data) {
    if (r->default_data.empty()) return NeedsData(*r);
    STRATA_ASSIGN_OR_RETURN(auto paths, DefaultFashionMnist(talk && r->verbose != 0));
    r->data = paths.first;
    if (r->val.empty()) r->val = paths.second;
  }
  return ResolveChannels(r, default_data);
}

DataKind DataKindOf(int64_t image_size, const std::string& label_key, int64_t channels) {
  return image_size == 28 && label_key == "label" && channels == 1 ? DataKind::kFashionMnist : DataKind::kImageRecords;
}

DataKind DataKindOf(const Recipe& r) { return DataKindOf(r.image_size, r.label_key, r.channels); }

Result<data::Dataset> MakeDataset(const Recipe& r, const std::string& pattern, int replicas, bool training) {
  if (r.image_size < 1 || r.channels < 1)
    return InvalidArgument("MakeDataset: the recipe's image_size and channels must be resolved (not 0)");
  if (DataKindOf(r) == DataKind::kFashionMnist) {
    datasets::FashionMnistOptions o;
    o.batch_size = r.batch_per_replica;
    o.replicas = replicas;
    o.drop_remainder = training;
    o.shuffle = training ? 60000 : 0;
    o.seed = static_cast<uint64_t>(r.seed);
    o.repeat = training;
    o.deterministic = true;
    o.image_key = r.image_key;
    o.label_key = r.label_key;
    if (training) {
      o.pad_crop = static_cast<int>(r.pad_crop);
      o.flip_left_right = static_cast<float>(r.flip);
    }
    return datasets::FashionMnistDataset(pattern, o);
  }
  datasets::FlowersOptions o;
  o.image_size = static_cast<int>(r.image_size);
  o.channels = static_cast<int>(r.channels);
  o.batch_size = r.batch_per_replica;
  o.replicas = replicas;
  o.deterministic = r.deterministic || !training;
  o.augment = training;
  o.repeat = training;
  o.drop_remainder = training;  // validation sees every record (a short last batch is padded)
  o.shuffle_buffer = training ? 2048 : 0;
  o.seed = static_cast<uint64_t>(r.seed);
  o.image_key = r.image_key;
  o.label_key = r.label_key;
  o.autotune.training_replicas = replicas;
  return datasets::FlowersDataset(pattern, o);
}

double PeakLearningRate(const Recipe& r, int replicas) {
  if (r.schedule == "rampup") return r.lr * replicas;
  // The seed's rule: learning rate scaled linearly with the global batch.
  const int64_t global_batch = datasets::GlobalBatch(r.batch_per_replica, replicas);
  return r.lr * (r.lr_scaling == "linear" ? static_cast<double>(global_batch) / 128.0 : 1.0);
}

keras::Schedule MakeSchedule(const Recipe& r, int64_t steps_per_epoch, int replicas) {
  const double lr = PeakLearningRate(r, replicas);
  if (r.schedule == "constant") return keras::schedules::Constant(lr);
  if (r.schedule == "rampup") {
    keras::schedules::RampUpDecayOptions ramp = kFlowersFromScratch;
    ramp.max = r.lr;  // per replica: the notebooks' LR_MAX x strategy.num_replicas_in_sync
    ramp.rampup_epochs = static_cast<int>(std::llround(r.warmup_epochs));
    ramp.replicas = replicas;
    return keras::schedules::RampUpSustainDecay(ramp, steps_per_epoch);
  }
  const int64_t total = steps_per_epoch * r.epochs;
  const int64_t warmup = static_cast<int64_t>(std::llround(r.warmup_epochs * static_cast<double>(steps_per_epoch)));
  return keras::schedules::CosineDecay(0.0, std::max<int64_t>(1, total - warmup),
                                       {.alpha = 0, .warmup_target = lr, .warmup_steps = warmup});
}

keras::Optimizer MakeOptimizer(const Recipe& r, keras::Schedule schedule) {
  // The flowers recipe: Adam, as the codelab and the seed's notebook; the default job: SGD with
  // Nesterov momentum and weight decay.
  keras::Optimizer o =
      r.optimizer == "adam"
          ? keras::optimizers::Adam(std::move(schedule), {.weight_decay = r.weight_decay})
          : keras::optimizers::SGD(std::move(schedule), {.momentum = 0.9, .nesterov = true, .weight_decay = r.weight_decay});
  o.use_ema = r.ema > 0;
  if (o.use_ema) o.ema_momentum = r.ema;
  return o;
}

Result<data::Dataset> InferenceDataset(const ModelInfo& info, const std::string& glob, int64_t batch, bool labels,
                                       const std::string& id_key) {
  // Fashion-MNIST's TFDS layout (its recipe reads the label); prediction (no labels, maybe ids)
  // takes the general recipe below at 28 x 28 x 1.
  const bool fashion_mnist =
      DataKindOf(info.image_size, info.label_key, info.channels) == DataKind::kFashionMnist;
  if (fashion_mnist && labels && id_key.empty()) {
    return datasets::FashionMnistDataset(glob, {.batch_size = batch, .drop_remainder = false, .shuffle = 0, .seed = 0,
                                                .cache = false, .image_key = info.image_key, .label_key = info.label_key});
  }
  datasets::FlowersOptions o;
  o.image_size = static_cast<int>(info.image_size);
  o.channels = static_cast<int>(info.channels);
  o.batch_size = batch;
  o.deterministic = true;
  o.augment = false;
  o.repeat = false;
  o.shuffle_buffer = 0;
  o.seed = 0;
  o.image_key = info.image_key;
  o.label_key = labels ? info.label_key : "";
  o.drop_remainder = false;
  o.id_key = id_key;
  return datasets::FlowersDataset(glob, o);
}

}  // namespace strata::train
