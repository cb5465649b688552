// strata make-records: image folders or Fashion-MNIST to TFRecords (datasets/make_records.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "command.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/make_records.h"

namespace strata::cli {
namespace {

// A one-line progress bar on stderr, redrawn at most 10 times a second, only on a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(const char* what) : what_(what), tty_(isatty(STDERR_FILENO)), start_(Clock::now()) {}
  void Update(int64_t done, int64_t total) {
    if (!tty_) return;
    const auto now = Clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30, filled = total > 0 ? static_cast<int>(width * done / total) : width;
    std::string bar(filled, '=');
    if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld  %.0f/s ", what_, bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), secs > 0 ? done / secs : 0.0);
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  const char* what_;
  bool tty_;
  Clock::time_point start_, last_{};
};

int RunMakeRecords(const std::vector<std::string>& args) {
  std::string from, out, split = "train";
  int64_t shards = 0, image_size = 192, quality = 95, seed = 0, threads = 0;
  int64_t classes = 104, per_class = 20, val_per_class = -1, test_per_class = -1;
  bool no_label = false, skip_bad = false, quiet = false;
  FlagParser flags(
      "make-records",
      "--from DIR|fashion-mnist|generated-flowers --out DIR [--split train] [--shards N] [--image-size S]\n"
      "       [--quality Q] [--seed N] [--no-label] [--skip-bad] [--threads N] [--quiet]\n"
      "       [--classes N --per-class K --val-per-class K --test-per-class K]  (generated-flowers)",
      "Writes TFRecord files of tf.train.Example.\n"
      "  --from DIR: DIR holds one sub-folder per class (Keras image_dataset_from_directory layout). Writes\n"
      "    OUT/SPLIT/{shard:02d}-{S}x{S}-{count}.tfrec in the flowers competition schema (image: JPEG SxSx3,\n"
      "    class: int64, id: 9 hex characters), examples shuffled across shards by --seed, and OUT/classes.txt.\n"
      "    --no-label writes a test split (image and id only).\n"
      "  --from fashion-mnist: reads Debian's dataset-fashion-mnist IDX files and writes TFDS's layout,\n"
      "    OUT/fashion_mnist/3.0.1/fashion_mnist-{train,test}.tfrecord-*-of-* (image: PNG 28x28x1, label: int64).\n"
      "  --from generated-flowers: draws a small flowers-schema dataset whose pixels carry class-dependent\n"
      "    structure (petal hue and count, centre, background) into OUT/{train,val,test}/ (test: image and id),\n"
      "    plus OUT/classes.txt (the competition's names) and OUT/test_labels.csv (the test answers).\n"
      "A file that cannot be decoded stops the run, naming it, unless --skip-bad is given.");
  flags.String("from", &from, "an image folder, fashion-mnist or generated-flowers");
  flags.Int("classes", &classes, "generated-flowers: number of classes (default 104)");
  flags.Int("per-class", &per_class, "generated-flowers: training images per class (default 20)");
  flags.Int("val-per-class", &val_per_class, "generated-flowers: validation images per class (default per-class / 4, at least 1)");
  flags.Int("test-per-class", &test_per_class, "generated-flowers: test images per class (default per-class / 4, at least 1)");
  flags.String("out", &out, "output directory (created)");
  flags.String("split", &split, "sub-folder of --out for the shards (folder form)");
  flags.Int("shards", &shards, "number of shard files (folder form: default min(16, images); fashion-mnist: per split, default 1)");
  flags.Int("image-size", &image_size, "side S of the written square JPEGs (folder form)");
  flags.Int("quality", &quality, "JPEG quality 1..100 (folder form)");
  flags.Int("seed", &seed, "seed of the shuffle and the ids (folder form)");
  flags.Int("threads", &threads, "worker threads (default: every usable core)");
  flags.Bool("no-label", &no_label, "write image and id only (a test split)");
  flags.Bool("skip-bad", &skip_bad, "skip images that cannot be read or decoded, and list them");
  flags.Bool("quiet", &quiet, "no progress bar and no summary");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (from.empty() || out.empty()) {
    std::fprintf(stderr, "strata make-records: --from and --out are required\n%s", flags.Help().c_str());
    return kExitUsage;
  }
  if (shards < 0 || threads < 0 || image_size <= 0 || quality < 1 || quality > 100) {
    return Fail("make-records", "bad flag value (shards and threads >= 0, image-size > 0, quality 1..100)",
                kExitUsage);
  }
  ProgressBar bar(from == "fashion-mnist" || from == "generated-flowers" ? from.c_str() : "make-records");
  datasets::ProgressFn progress;
  if (!quiet) progress = [&](int64_t done, int64_t total) { bar.Update(done, total); };

  auto run = [&]() -> Result<datasets::MakeRecordsReport> {
    if (from == "fashion-mnist") {
      const int per_split = shards > 0 ? static_cast<int>(shards) : 1;
      return datasets::MakeFashionMnistRecords(out, {.train_shards = per_split,
                                                     .test_shards = per_split,
                                                     .threads = static_cast<int>(threads),
                                                     .progress = progress});
    }
    if (from == "generated-flowers") {
      const int64_t quarter = std::max<int64_t>(1, per_class / 4);
      datasets::GeneratedFlowersOptions g{.classes = static_cast<int>(classes),
                                          .train_per_class = static_cast<int>(per_class),
                                          .val_per_class = static_cast<int>(val_per_class >= 0 ? val_per_class : quarter),
                                          .test_per_class = static_cast<int>(test_per_class >= 0 ? test_per_class : quarter),
                                          .image_size = static_cast<int>(image_size),
                                          .quality = static_cast<int>(quality),
                                          .shards = shards > 0 ? static_cast<int>(shards) : 4,
                                          .seed = static_cast<uint64_t>(seed),
                                          .class_names = {datasets::kFlowersClasses, datasets::kFlowersClasses + datasets::kFlowersNumClasses},
                                          .threads = static_cast<int>(threads),
                                          .progress = progress};
      return datasets::MakeGeneratedFlowerRecords(out, g);
    }
    return datasets::MakeImageFolderRecords(from, out,
                                            {.split = split,
                                             .shards = static_cast<int>(shards),
                                             .image_size = static_cast<int>(image_size),
                                             .quality = static_cast<int>(quality),
                                             .seed = static_cast<uint64_t>(seed),
                                             .labels = !no_label,
                                             .skip_bad = skip_bad,
                                             .threads = static_cast<int>(threads),
                                             .progress = progress});
  };
  Result<datasets::MakeRecordsReport> report = run();
  if (!report.ok()) return Fail("make-records", report.status().ToString());
  for (const auto& s : report->skipped) std::fprintf(stderr, "strata make-records: skipped %s\n", s.c_str());
  if (!quiet) {
    std::printf("wrote %lld examples in %zu files", static_cast<long long>(report->written), report->files.size());
    if (!report->skipped.empty()) std::printf(", skipped %zu bad images", report->skipped.size());
    std::printf("\n");
    for (const auto& f : report->files) std::printf("  %s\n", f.c_str());
  }
  return kExitOk;
}

const Registrar kMakeRecords({"make-records", "image folders or Fashion-MNIST to TFRecord shards of tf.train.Example",
                              RunMakeRecords});

}  // namespace
}  // namespace strata::cli
