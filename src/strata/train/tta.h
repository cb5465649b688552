// Test-time augmentation: a classifier's accuracy with each image's prediction the mean of the
// model's outputs over several views of it, as DAWNBench entries and Keller Jordan's CIFAR-10
// speed runs evaluate. Keras has no such option; `strata train --tta flip` and `strata evaluate
// --tta flip` report it beside the plain accuracy, which stays Keras's.
//
//   "flip"  the image and its mirror image (left-right), each output weighted 1/2: for a model
//           trained on mirrored images (`--flip`). Shifted views (a pixel each way, the border
//           reflected) were tried on the default job and cost accuracy: its images are centred
//           and it is not trained on crops.
//
// The outputs are averaged as the model gives them (logits or probabilities); the prediction is
// the class of the largest mean.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/data/dataset.h"
#include "strata/keras/model.h"

namespace strata::train {

// The names `--tta` takes: "" (none) and "flip".
std::vector<std::string> TtaNames();
Status CheckTta(const std::string& tta);

// `model`'s accuracy over `steps` batches of `data` (-1: all), each image's prediction the mean
// output over the views `tta` names. `data`'s elements are (x, y) batches: x [B, H, W, C] f32,
// y [B] integer class ids. tta "" is the plain accuracy (one view).
Result<double> TtaAccuracy(keras::Model& model, const data::Dataset& data, int64_t steps, const std::string& tta);

}  // namespace strata::train

#pragma GCC visibility pop
