// Model spec files: a model described in JSON, in the structure Keras's `model.to_json()`
// writes, so the command line trains models without C++ and a Keras model's architecture
// can be brought over as it is.
//
//   {"class_name": "Sequential", "config": {"name": "reference_cnn", "layers": [
//     {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1]}},
//     {"class_name": "Conv2D", "config": {"filters": 32, "kernel_size": 3, "padding": "same"}},
//     ...]}}
//
// "Functional" specs list layers with "inbound_nodes" ([[["name", 0, 0, {}], ...]]) and
// "input_layers"/"output_layers", as Keras writes them. Arguments take Keras's names and
// defaults; sizes may be an int or Keras's [k, k] pair; initializers a name or
// {"class_name": "GlorotUniform"}. Unknown layer classes and arguments are errors that
// name the layer.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <memory>
#include <string>

#include "strata/core/status.h"
#include "strata/keras/model.h"

namespace strata::keras {

Result<std::unique_ptr<Model>> ModelFromJson(const std::string& json_text);
// One layer from its Keras class name and config ({"units": 10, "activation": "relu"}), as a
// spec's "layers" entry builds it: Keras's argument names, unknown arguments are errors naming
// the layer (the Python module's strata.keras.layers build their layers so).
Result<LayerPtr> LayerFromConfig(const std::string& class_name, const std::string& config_json, const std::string& name = "");
// A file path, or a built-in name: "reference-cnn" (the Fashion-MNIST CNN),
// "flowers-cnn" (a small CNN for the 104 flower classes at 192 px).
Result<std::unique_ptr<Model>> LoadModelSpec(const std::string& path_or_name);
// The JSON text of a built-in spec, or NotFound.
Result<std::string> BuiltinSpec(const std::string& name);

}  // namespace strata::keras

#pragma GCC visibility pop
