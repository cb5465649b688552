// The Fashion-MNIST pipeline: TFRecords in the TFDS layout (`image` PNG bytes 28x28x1,
// `label` int64, as make_records.h writes them), images scaled to [0, 1] f32.
//
//   STRATA_ASSIGN_OR_RETURN(data::Dataset fm, datasets::FashionMnistDataset("/data/fashion_mnist/*train*",
//                                                                           {.batch_size = 64, .replicas = 2}));
//   // elements: (image f32 [128, 28, 28, 1] in [0, 1], label i64 [128])
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <optional>
#include <string>

#include "strata/data/dataset.h"

namespace strata::datasets {

//   list_files -> TFRecordDataset -> parse + decode -> cache -> shuffle -> repeat
//   [-> pad, random crop, flip] -> batch(GlobalBatch(batch_size, replicas), drop_remainder)
//   -> prefetch(AUTOTUNE)
struct FashionMnistOptions {
  int64_t batch_size = 128;        // per replica (batch_size.h)
  int replicas = 1;                // batches hold GlobalBatch(batch_size, replicas) elements
  bool drop_remainder = true;      // static shapes for the compiled step
  int64_t shuffle = 10000;         // buffer; 0: file order
  std::optional<uint64_t> seed;
  bool repeat = false;             // false: one epoch per iterator
  bool cache = true;               // decoded images kept in memory after the first epoch
  int64_t num_parallel_calls = data::AUTOTUNE;
  bool deterministic = true;
  // Training augmentation of the decoded (cached) images, a fresh draw every epoch, seeded per
  // element (image/pad_crop.h): a random 28 x 28 window of the image padded by `pad_crop` zero
  // pixels a side, mirrored left-right with probability `flip_left_right`. 0, 0: none.
  int pad_crop = 0;
  float flip_left_right = 0;
  std::string image_key = "image";  // the PNG bytes feature (TFDS's name)
  std::string label_key = "label";  // the int64 class feature
};
Result<data::Dataset> FashionMnistDataset(const std::string& file_glob, FashionMnistOptions options = {});

}  // namespace strata::datasets

#pragma GCC visibility pop
