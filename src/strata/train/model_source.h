// Which model a recipe trains, and what its checkpoint records of it: `strata train` (and
// `strata.train(...)`) record in the checkpoint which spec (and which input settings) its
// weights belong to, so `strata evaluate|predict --model x.ckpt` rebuild the model with nothing
// else given. The record is the checkpoint header's "model" object, written by the same
// save_weights call as the weights (docs/formats/checkpoint.md):
//   {"spec": {Keras-style spec}, "source": "flowers-cnn", "preset": "flowers",
//    "image_key": "image", "label_key": "class", "image_size": 192, "channels": 3, "classes": 104}
// A Keras application (keras/applications) records its name and options in place of "spec":
//   {"application": {"name": "xception", "include_top": true, "input_shape": [71, 71, 3],
//                    "classes": 4, "pooling": "", "classifier_activation": "softmax"}, ...}
// (its structure is code, rebuilt from the same options, so the weights' names and order match).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "strata/core/status.h"
#include "strata/core/tensor.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/model.h"
#include "strata/train/recipe.h"

namespace strata::train {

struct ModelInfo {
  std::string spec_json;       // the spec the weights belong to (input size already set)
  std::string source;          // built-in name or spec file it came from
  std::string preset;          // "flowers", or "" for the default job and plain --model runs
  std::string image_key = "image", label_key = "label";
  int64_t image_size = 28, classes = 10;
  int64_t channels = 1;        // the spec's input channels: 1 grayscale, 3 RGB
  // A Keras application ("resnet50", ...; keras::applications::Names()) built with
  // `application_options`; empty for a spec (then spec_json says what to build).
  std::string application;
  keras::applications::Options application_options;
};

// The options `strata train|bench-step --model NAME --image-size S` build an application with,
// as a Keras user passes them: input_shape [S, S, channels], `classes` outputs (0: Keras's
// 1000), softmax. A size below the model's minimum is an error naming the model, the size and
// the minimum.
Result<keras::applications::Options> ApplicationOptionsFor(const std::string& name, int64_t size, int64_t channels,
                                                           int64_t classes);
// The model `info` describes: its application, else its spec.
Result<std::unique_ptr<keras::Model>> BuildModel(const ModelInfo& info);
// `--weights imagenet`: Keras's ImageNet file for the application `info` builds, with or without
// its top (keras::applications::ImagenetWeights), fetched once into the model cache
// (io::GetFile); the local path. A model that is no application is InvalidArgument.
Result<std::string> FetchImagenetWeights(const ModelInfo& info, bool include_top);

// Model selection, in one place for every command (train, evaluate, predict, export,
// bench-step): what --model names, built for the input asked for.
struct ModelChoice {
  // A Keras application, a built-in spec (reference-cnn, ...), a spec file, or a checkpoint
  // `strata train` wrote (its recorded model, input and record keys; the fields below unused).
  std::string model;
  // The input and outputs asked for; 0: the model's own (an application's Keras default size and
  // 3 channels; a spec's InputLayer; Keras's 1000 classes or the spec's classifier). Applications
  // and built-in specs are built for them as a Keras user passes input_shape and classes.
  int64_t image_size = 0, channels = 0, classes = 0;
  // A spec file's InputLayer is set to image_size too (else kept as written).
  bool resize_spec_file = false;
};
// The model `choice` names, and in `info` what its checkpoint records: for anything but a
// checkpoint, the model's input size, channels and classes, and the record keys of its data kind
// (DataKindOf: Fashion-MNIST's "label" for 28 x 28 x 1, else the flowers schema's "class").
// A built-in spec too small for image_size says the smallest size that builds.
Result<std::unique_ptr<keras::Model>> SelectModel(const ModelChoice& choice, ModelInfo* info);

// The recipe's model (SelectModel of its model, image_size, channels, classes and
// resize_spec_file), and in `info` the recipe's preset, keys, size, channels and classes. The
// recipe's image_size and channels must be resolved. recipe.h's MakeModel is this without `info`.
Result<std::unique_ptr<keras::Model>> BuildRecipeModel(const Recipe& r, ModelInfo* info);

// How every command compiles a classifier (train, evaluate, predict, export, bench-step), so that
// they run and measure what training compiles: sparse cross-entropy on the model's logits (or
// its probabilities, where it ends in a softmax) with `label_smoothing`, the optimizer, and
// precision "bf16" as mixed_bfloat16. The caller adds what is its own (metrics, seed, threads,
// strategy).
struct ClassifierCompile {
  keras::Optimizer optimizer = keras::optimizers::SGD();
  float label_smoothing = 0;
  std::string precision = "f32";  // "f32" or "bf16"
};
keras::CompileOptions ClassifierCompileOptions(const keras::Model& model, ClassifierCompile c);

// A built-in spec's JSON (reference-cnn, flowers-cnn, ...) or a spec file's text.
Result<std::string> SpecText(const std::string& name_or_path);
// The spec with its InputLayer(s) set to size x size (convnets ending in global pooling take
// any size); the channel count is kept.
Result<std::string> SpecWithImageSize(const std::string& spec_json, int64_t size);
// The spec built for size x size x channels images, as a Keras user passes input_shape: the
// InputLayer's shape set (the spec returned unchanged when it already is that shape).
Result<std::string> SpecWithInputShape(const std::string& spec_json, int64_t size, int64_t channels);
// The spec with its classifier giving `classes` outputs, as Keras applications take classes=
// (unchanged when it already does): the last Dense layer, or a fully convolutional model's
// last Conv2D.
Result<std::string> SpecWithClasses(const std::string& spec_json, int64_t classes);
// The input shape [H, W, C] of the spec's first InputLayer (NotFound when it has none).
Result<Shape> SpecInputShape(const std::string& spec_json);

// The record of `info` a checkpoint keeps: what Model::save_weights takes as
// SaveWeightsOptions::model_json. InvalidArgument when `info`'s spec is not JSON.
Result<std::string> ModelInfoJson(const ModelInfo& info);
// The model a checkpoint records (keras::ReadCheckpointHeader's model_json, so also the
// "extra"."model" of a file written before the header had a "model"). NotFound, saying to pass
// --model SPEC --weights, for a checkpoint that records none (a plain model.save_weights).
Result<ModelInfo> ReadModelInfo(const std::string& checkpoint);

}  // namespace strata::train
