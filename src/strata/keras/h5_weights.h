// Keras weight files (HDF5, through libhdf5) in and out of any compiled Strata model.
//
//   auto model = *keras::applications::Xception({.include_top = false, .pooling = "avg"});
//   model->compile({...});
//   auto report = keras::LoadKerasWeights(*model, "xception_notop.h5", {.by_name = true});
//   ...
//   keras::SaveKerasWeights(*model, "fine_tuned.h5");   // Keras: model.load_weights(...)
//
// Read: the legacy layout of Keras's `model.save_weights("w.h5")` and of the
// keras.applications weight files (root attribute layer_names, a group per layer with a
// weight_names attribute; a full-model file's `model_weights` group), and Keras 3's
// `.weights.h5` (layers/<class>[_n]/vars/0, 1, ...). Written: the legacy layout, which every
// Keras version loads. Layouts, name mapping and options: docs/formats/h5.md.
//
// A load validates every layer, weight name, shape and dtype against the model and reads
// every value before it changes anything: an error leaves the model as it was.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/keras/model.h"

namespace strata::keras {

struct KerasWeightsOptions {
  // false (Keras's default): the file's layers with weights pair with the model's layers with
  // weights in order (Keras's model.layers order); a file whose layer names are exactly the
  // model's pairs by name, which is the same pairing for the files Keras writes.
  // true: a model layer takes the file layer of its name; model layers the file lacks keep
  // their weights (a new head on an include_top=False file). Legacy .h5 only, as in Keras 3.
  // A partial load logs one warning line naming the layers absent from the file and the file's
  // layers left unused (and KerasWeightsReport lists them).
  bool by_name = false;
  // Layers whose weight count or shapes differ are left unchanged, with a warning naming
  // them, instead of failing the load. As in Keras: with by_name for a legacy .h5.
  bool skip_mismatch = false;
};

enum class KerasWeightsLayout { kLegacyH5, kKeras3 };

struct KerasWeightsReport {
  KerasWeightsLayout layout = KerasWeightsLayout::kLegacyH5;
  std::vector<std::string> loaded;   // model layers whose weights were replaced
  std::vector<std::string> skipped;  // skip_mismatch: layers left unchanged, with why
  std::vector<std::string> absent;   // by_name: model layers with weights the file lacks
  std::vector<std::string> unused;   // by_name: file layers with weights no model layer took
};

// Whether `path` starts with the HDF5 signature ("\x89HDF\r\n\x1a\n" at byte 0, or at 512,
// 1024, ... after a user block). A file that cannot be opened is not.
bool IsHdf5File(const std::string& path);

// Loads a Keras weight file into a compiled model (after compile(), before or during fit).
// Optimizer slots and the step count are untouched, as in Keras.
Result<KerasWeightsReport> LoadKerasWeights(Model& model, const std::string& path, KerasWeightsOptions options = {});

// Writes the model's weights in the legacy Keras layout (Keras 2 weight names,
// "conv1/kernel:0"), atomically: a temporary file beside `path`, fsync, rename.
Status SaveKerasWeights(const Model& model, const std::string& path);

}  // namespace strata::keras

#pragma GCC visibility pop
