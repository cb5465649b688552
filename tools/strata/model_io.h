// Saved models on the command line: `strata evaluate|predict --model x.ckpt` rebuild the model a
// checkpoint records (train/model_source.h) and run it over records in file order.
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
#include "strata/keras/model.h"
#include "strata/train/model_source.h"

namespace strata::cli {

// A model ready for evaluate/predict: --model CKPT (a checkpoint `strata train` wrote), or
// --model SPEC (a built-in name, a Keras application or a JSON file) with --weights: a Strata
// checkpoint, a Keras .h5 (loaded in order, as Keras's applications load theirs) or, for an
// application, "imagenet" (Keras's published file, io::GetFile); none: fresh weights.
// The model runs predict/evaluate as one replica per usable core (its batches split over them,
// keras.md "predict and evaluate"): `strategy` outlives the model that points to it.
struct LoadedModel {
  std::unique_ptr<distribute::Strategy> strategy;
  std::unique_ptr<keras::Model> model;
  train::ModelInfo info;
};
Result<LoadedModel> LoadModelForInference(const std::string& model, const std::string& weights);


// Class probabilities of a batch of model outputs [B, K]: rows that are not already a
// distribution (a model ending in logits) go through softmax.
std::vector<float> ToProbabilities(const Tensor& outputs);

// Runs the model over every batch of `ds` in order and hands each batch with its class
// probabilities (rows x k, row-major) to `fn`, so labels and ids stay beside their rows.
using PredictionFn = std::function<Status(const data::Element& batch, const std::vector<float>& probs, int64_t rows, int64_t k)>;
Status ForEachPrediction(keras::Model& model, const data::Dataset& ds, const PredictionFn& fn);

// The class names for a model: the competition's for 104 classes, Fashion-MNIST's for 10 on its
// data kind (not CIFAR-10's); otherwise "class N".
std::vector<std::string> ClassNames(const train::ModelInfo& info, int64_t classes);

}  // namespace strata::cli
