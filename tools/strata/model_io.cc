#include "model_io.h"

#include <algorithm>
#include <cmath>

#include "strata/core/cpu.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/make_records.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/h5_weights.h"
#include "strata/train/recipe.h"

namespace strata::cli {

Result<LoadedModel> LoadModelForInference(const std::string& model_arg, const std::string& weights_arg) {
  LoadedModel out;
  const bool checkpoint = keras::IsCheckpointFile(model_arg);
  if (checkpoint && !weights_arg.empty())
    return InvalidArgument("--weights is for --model SPEC; " + model_arg + " is a checkpoint already");
  const std::string weights = checkpoint ? model_arg : weights_arg;
  STRATA_ASSIGN_OR_RETURN(out.model, train::SelectModel({.model = model_arg}, &out.info));
  STRATA_ASSIGN_OR_RETURN(out.strategy, distribute::MirroredStrategy(std::max(1, UsableCores())));
  // Inference loads the weights alone, so the optimizer compiled with is never used.
  keras::CompileOptions compile = train::ClassifierCompileOptions(*out.model, {.optimizer = keras::optimizers::SGD(0.01)});
  compile.metrics = {"accuracy"};
  compile.strategy = out.strategy.get();
  STRATA_RETURN_IF_ERROR(out.model->compile(std::move(compile)));
  if (weights.empty()) return out;
  std::string path = weights;
  // Keras's published file for the application as built (with its ImageNet classifier).
  if (weights == "imagenet") {
    STRATA_ASSIGN_OR_RETURN(path, train::FetchImagenetWeights(out.info, out.info.application_options.include_top));
  }
  if (keras::IsHdf5File(path)) {
    // A Keras weight file, as Keras's applications load one: in order, every layer (an error
    // names what differs).
    auto report = keras::LoadKerasWeights(*out.model, path);
    if (!report.ok()) return report.status().WithContext("--weights");
    return out;
  }
  STRATA_RETURN_IF_ERROR(out.model->load_weights(path, {.weights_only = true}));
  return out;
}

std::vector<float> ToProbabilities(const Tensor& outputs) {
  const int64_t rows = outputs.shape()[0], k = outputs.num_elements() / std::max<int64_t>(rows, 1);
  const float* p = outputs.data<float>();
  std::vector<float> out(p, p + rows * k);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out.data() + r * k;
    double sum = 0;
    bool distribution = true;
    for (int64_t j = 0; j < k; ++j) {
      sum += row[j];
      distribution &= row[j] >= 0 && row[j] <= 1;
    }
    if (distribution && std::fabs(sum - 1) < 1e-3) continue;
    const float mx = *std::max_element(row, row + k);
    double z = 0;
    for (int64_t j = 0; j < k; ++j) z += std::exp(static_cast<double>(row[j] - mx));
    for (int64_t j = 0; j < k; ++j) row[j] = static_cast<float>(std::exp(static_cast<double>(row[j] - mx)) / z);
  }
  return out;
}

Status ForEachPrediction(keras::Model& model, const data::Dataset& ds, const PredictionFn& fn) {
  STRATA_ASSIGN_OR_RETURN(auto it, ds.make_iterator());
  for (;;) {
    STRATA_ASSIGN_OR_RETURN(std::optional<data::Element> batch, it->Next());
    if (!batch) return Status::OK();
    const Tensor& images = (*batch)[0];  // [B, H, W, C]
    const int64_t rows = images.shape()[0];
    // The batch as a one-batch dataset: predict() pads a short last batch and cuts it off.
    data::Dataset one = data::Dataset::from_tensor_slices(data::Element({images})).batch(rows);
    STRATA_ASSIGN_OR_RETURN(Tensor out, model.predict(one));
    const int64_t k = out.num_elements() / std::max<int64_t>(rows, 1);
    STRATA_RETURN_IF_ERROR(fn(*batch, ToProbabilities(out), rows, k));
  }
}

std::vector<std::string> ClassNames(const train::ModelInfo& info, int64_t classes) {
  std::vector<std::string> names;
  for (int64_t c = 0; c < classes; ++c) {
    if (classes == datasets::kFlowersNumClasses) names.push_back(datasets::kFlowersClasses[c]);
    else if (classes == 10 &&
             train::DataKindOf(info.image_size, info.label_key, info.channels) == train::DataKind::kFashionMnist)
      names.push_back(datasets::kFashionMnistClasses[c]);  // not for other 10-class data (CIFAR-10)
    else names.push_back("class " + std::to_string(c));
  }
  return names;
}


}  // namespace strata::cli
