// The flowers pipeline (Kaggle "Flower Classification with TPUs") and its 104 class names.
//
//   STRATA_ASSIGN_OR_RETURN(data::Dataset train, datasets::FlowersDataset("/data/flowers/train*.tfrec",
//                                                                         {.image_size = 192, .batch_size = 64, .replicas = 2}));
//   // elements: (image f32 [128, 192, 192, 3] in [0, 1], label i64 [128])
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <optional>
#include <string>

#include "strata/data/dataset.h"

namespace strata::datasets {

// The seed's flowers pipeline (Kaggle "Flower Classification with TPUs" TFRecords:
// `image` JPEG bytes, `class` int64, `id` bytes):
//   list_files -> TFRecordDataset(num_parallel_reads = AUTOTUNE) -> deterministic = false
//   -> repeat -> shuffle(2048) -> parse -> decode + resize to S -> random flip + saturation
//   -> batch(GlobalBatch(batch_size, replicas), drop_remainder) -> prefetch(AUTOTUNE)
// The seed shuffles after augmenting; here the shuffle buffer holds the encoded records
// (~90 KB at 512 px) instead of f32 images (442 KB at 192 px), as TensorFlow's own ResNet
// input pipeline does. The orders it can produce are the same; it holds 5x less memory,
// and each image goes from the augmenter to its batch while still in cache (measured: the
// recipe went from 0.79x to 0.94x of a bare decode loop's rate on one core).
struct FlowersOptions {
  int image_size = 192;            // S: decoded images are resized to S x S
  int channels = 3;                // 3: RGB (the competition's); 1: grayscale (no saturation jitter)
  int64_t batch_size = 64;         // per replica (batch_size.h)
  int replicas = 1;                // batches hold GlobalBatch(batch_size, replicas) elements
  bool deterministic = false;      // the seed's choice: order traded for speed
  bool augment = true;             // random left-right flip and saturation in [0, 2]
  bool repeat = true;              // forever (the training loop counts steps)
  int64_t shuffle_buffer = 2048;   // 0: no shuffle
  std::optional<uint64_t> seed;    // shuffle, file order and augmentation; unset: random
  std::string image_key = "image"; // the encoded (JPEG or PNG) image feature
  std::string label_key = "class"; // "class" (labeled) ; set "" to omit the label
  // Evaluation and prediction: keep the last short batch, and carry each record's `id`
  // bytes as a last component, u8 [B, L] zero-padded to the batch's longest id.
  bool drop_remainder = true;      // static shapes for the compiled training step
  std::string id_key;              // "" : no ids; "id" in the competition's files
  int64_t num_parallel_reads = data::AUTOTUNE;  // reader threads
  int64_t files_open = 8;                 // TFRecord cycle_length: fixes the order with the seed
  int64_t num_parallel_calls = data::AUTOTUNE;  // decode+augment workers
  int64_t prefetch = data::AUTOTUNE;
  data::AutotuneOptions autotune{};      // budgets (training_replicas = replicas sharing the cores)
};
Result<data::Dataset> FlowersDataset(const std::string& file_glob, FlowersOptions options = {});

// The competition's 104 class names in label order, exact strings (two end in a space:
// "cyclamen " and "hippeastrum ", as in the competition's notebooks).
inline constexpr int kFlowersNumClasses = 104;
extern const char* const kFlowersClasses[kFlowersNumClasses];

}  // namespace strata::datasets

#pragma GCC visibility pop
