// Saved models on the command line: `strata train` records in the checkpoint which spec (and
// which input settings) its weights belong to, so `strata evaluate|predict --model x.ckpt`
// rebuild the model with nothing else given. The record is the checkpoint header's
// "extra"."model" object (docs/formats/checkpoint.md):
//   {"spec": {Keras-style spec}, "source": "flowers-cnn", "preset": "flowers",
//    "image_key": "image", "label_key": "class", "image_size": 192, "channels": 3, "classes": 104}
// A Keras application (keras/applications) records its name and options in place of "spec":
//   {"application": {"name": "xception", "include_top": true, "input_shape": [71, 71, 3],
//                    "classes": 4, "pooling": "", "classifier_activation": "softmax"}, ...}
// (its structure is code, rebuilt from the same options, so the weights' names and order match).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/core/tensor.h"
#include "strata/data/dataset.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/model.h"

namespace strata::cli {

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

// Adds `info` to the checkpoint's header (rewritten atomically; the other records unchanged).
Status RecordModelInfo(const std::string& checkpoint, const ModelInfo& info);
// True when `path` is a Strata checkpoint file (its first record is the JSON header).
bool IsCheckpoint(const std::string& path);

// A model ready for evaluate/predict: --model CKPT (a checkpoint `strata train` wrote), or
// --model SPEC (a built-in name or JSON file) with --weights CKPT (or fresh weights).
// The model runs predict/evaluate as one replica per usable core (its batches split over them,
// keras.md "predict and evaluate"): `strategy` outlives the model that points to it.
struct LoadedModel {
  std::unique_ptr<distribute::Strategy> strategy;
  std::unique_ptr<keras::Model> model;
  ModelInfo info;
};
Result<LoadedModel> LoadModelForInference(const std::string& model, const std::string& weights);

// The records for evaluation or prediction, in file order, unaugmented, the last short batch
// kept: (image f32 [B, S, S, C], label i64 [B] when `labels`, id u8 [B, L] when `ids`: the
// feature `id_key`). S, C and the features come from `info`.
Result<data::Dataset> InferenceDataset(const ModelInfo& info, const std::string& glob, int64_t batch, bool labels,
                                       const std::string& id_key = "");

// Class probabilities of a batch of model outputs [B, K]: rows that are not already a
// distribution (a model ending in logits) go through softmax.
std::vector<float> ToProbabilities(const Tensor& outputs);

// Runs the model over every batch of `ds` in order and hands each batch with its class
// probabilities (rows x k, row-major) to `fn`, so labels and ids stay beside their rows.
using PredictionFn = std::function<Status(const data::Element& batch, const std::vector<float>& probs, int64_t rows, int64_t k)>;
Status ForEachPrediction(keras::Model& model, const data::Dataset& ds, const PredictionFn& fn);

// The class names for a model: the competition's 104 for the flowers preset (or 104
// classes), Fashion-MNIST's for 10; otherwise "class N".
std::vector<std::string> ClassNames(const ModelInfo& info, int64_t classes);

}  // namespace strata::cli
