// Writing image datasets as TFRecords of tf.train.Example (the `strata make-records`
// command, and the default dataset of `strata train`).
//
// Image folder -> the flowers competition schema (Kaggle "Petals to the Metal"):
//   FROM/<class>/<file>.jpg|.jpeg|.png  (Keras image_dataset_from_directory layout;
//   classes are the sub-folder names in sorted order)
//   OUT/<split>/{shard:02d}-{S}x{S}-{count}.tfrec, each record an Example with
//     class  int64   the class index              (absent with labels = false)
//     id     bytes   9 lower-case hex characters, unique in the split
//     image  bytes   JPEG, S x S x 3, 4:2:0, the largest centred square of the source
//                    resized (area; bilinear when enlarging)
//   OUT/classes.txt  one class name per line, index order
//   Examples are shuffled across shards by the seed; shard sizes differ by at most one.
//   The same inputs and seed give the same files, byte for byte, for any thread count.
//
// Fashion-MNIST (Debian dataset-fashion-mnist IDX files) -> TFDS's layout:
//   OUT/fashion_mnist/3.0.1/fashion_mnist-{train,test}.tfrecord-{i:05d}-of-{n:05d}
//     image  bytes   PNG 28 x 28 x 1
//     label  int64   0..9
//   plus label.labels.txt and a small dataset_info.json (split names and shard lengths).
//   Examples keep the IDX order, dealt to shards in contiguous runs.
//
// A file that cannot be read or decoded stops the run with an error naming it, unless
// skip_bad is set; then it is counted and listed in the report.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strata/core/status.h"

namespace strata::datasets {

// Called from one thread as work completes: (items done, items total).
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

struct MakeRecordsOptions {
  std::string split = "train";  // sub-folder of OUT the shards go to
  int shards = 0;               // 0: min(16, images), as the flowers data are cut
  int image_size = 192;         // S: 192, 224, 331 or 512 in the flowers data
  int quality = 95;             // JPEG quality of the written images
  uint64_t seed = 0;            // shuffle and ids
  bool labels = true;           // false: test split, `image` and `id` only
  bool skip_bad = false;        // go on past unreadable images (listed in the report)
  int threads = 0;              // 0: every usable core
  ProgressFn progress;
};

struct MakeRecordsReport {
  int64_t written = 0;
  std::vector<std::string> files;    // shard paths, in shard order
  std::vector<std::string> classes;  // index order
  std::vector<std::string> skipped;  // "path: reason"
};

Result<MakeRecordsReport> MakeImageFolderRecords(const std::string& from_dir, const std::string& out_dir,
                                                 const MakeRecordsOptions& options);

// Generated flowers: a small dataset in the flowers schema, made from nothing, whose pixels
// carry class-dependent structure (so a short training run learns something measurable):
// each class has its own petal hue, petal count, centre hue and background; each image
// draws its position, size, rotation, lighting and noise from (seed, index).
//   OUT/{train,val,test}/{shard:02d}-{S}x{S}-{count}.tfrec  (test: image and id only)
//   OUT/classes.txt       the class names, index order
//   OUT/test_labels.csv   id,label of the test split (the answer key a real test set hides)
// Ids are unique across the three splits. The same options give the same files.
struct GeneratedFlowersOptions {
  int classes = 104;
  int train_per_class = 20;
  int val_per_class = 5;
  int test_per_class = 5;
  int image_size = 192;
  int quality = 90;
  int shards = 4;                        // per split (fewer when a split is smaller)
  uint64_t seed = 0;
  std::vector<std::string> class_names;  // for classes.txt; shorter: "class_NNN" for the rest
  int threads = 0;                       // 0: every usable core
  ProgressFn progress;
};
Result<MakeRecordsReport> MakeGeneratedFlowerRecords(const std::string& out_dir, const GeneratedFlowersOptions& options);
// One generated image of class `label`: rgb is [size, size, 3] u8.
void RenderGeneratedFlower(int label, uint64_t seed, uint64_t index, int size, uint8_t* rgb);

// Where Debian's dataset-fashion-mnist puts the IDX files.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Fashion-MNIST's class names, label order.
extern const char* const kFashionMnistClasses[10];

struct FashionMnistRecordsOptions {
  std::string source_dir = kFashionMnistDir;  // holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  int train_shards = 1;  // TFDS writes one shard per split for this size
  int test_shards = 1;
  int threads = 0;       // 0: every usable core
  ProgressFn progress;
};

// Writes both splits under out_dir (a TFDS data_dir). The report lists train shards,
// then test shards.
Result<MakeRecordsReport> MakeFashionMnistRecords(const std::string& out_dir, const FashionMnistRecordsOptions& options);

// The directory MakeFashionMnistRecords writes the shards to.
std::string FashionMnistRecordDir(const std::string& out_dir);

// IDX (LeCun's MNIST format; big-endian): magic 0x00000803 + n, rows, cols + u8 pixels,
// or 0x00000801 + n + u8 labels. Reads plain or gzip files. Errors name the file and say
// what the header promised and what the file holds.
struct IdxImages {
  int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // [count, rows, cols]
};
Result<IdxImages> ReadIdxImages(const std::string& path);
Result<std::vector<uint8_t>> ReadIdxLabels(const std::string& path);

}  // namespace strata::datasets

#pragma GCC visibility pop
