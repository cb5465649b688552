// Synthetic datasets in the real layouts, for tests, benchmarks and demos when the real
// files are not at hand (no network here). Images are smooth colour fields with noise and
// a label-dependent pattern, so JPEG/PNG sizes and decode costs resemble photos, not flat
// colour.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"

namespace strata::datasets {

struct SyntheticFlowersOptions {
  int files = 4;
  int records_per_file = 32;
  int image_size = 512;   // square JPEGs, as the 512 px flowers TFRecords
  int classes = 104;
  int jpeg_quality = 90;
  uint64_t seed = 1;
};
// Writes `dir`/flowers-<i>.tfrec with Examples {image: JPEG, class: int64, id: bytes}.
// Returns the file names.
Result<std::vector<std::string>> WriteSyntheticFlowers(const std::string& dir, SyntheticFlowersOptions options = {});

// Fashion-MNIST, TFDS layout: `dir`/fashion_mnist-train.tfrecord-0000<i>-of-0000<n> with
// Examples {image: PNG 28x28x1, label: int64}. Record r of file f has label (f*n + r) % 10
// and every pixel of its image is at least 10 * label (a checkable pattern).
Result<std::vector<std::string>> WriteSyntheticFashionMnist(const std::string& dir, int files, int records_per_file);

}  // namespace strata::datasets

#pragma GCC visibility pop
