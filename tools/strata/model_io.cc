#include "model_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "strata/core/cpu.h"
#include "strata/core/file.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/datasets/flowers.h"
#include "strata/datasets/make_records.h"
#include "strata/keras/spec.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"

namespace strata::cli {

using nlohmann::json;

Result<std::string> SpecText(const std::string& name_or_path) {
  auto builtin = keras::BuiltinSpec(name_or_path);
  if (builtin.ok()) return builtin;
  if (std::filesystem::exists(name_or_path)) return ReadFileToString(name_or_path);
  return NotFound(builtin.status().message() + "; and no file " + name_or_path);
}

Result<std::string> SpecWithImageSize(const std::string& spec_json, int64_t size) {
  json spec = json::parse(spec_json, nullptr, false);
  if (!spec.is_object() || !spec.contains("config") || !spec["config"].contains("layers"))
    return InvalidArgument("model spec: not a Keras-style {\"class_name\", \"config\": {\"layers\"}} object");
  int inputs = 0;
  for (auto& layer : spec["config"]["layers"]) {
    if (layer.value("class_name", "") != "InputLayer") continue;
    auto& shape = layer["config"]["batch_input_shape"];
    if (!shape.is_array() || shape.size() != 4)
      return InvalidArgument("model spec: InputLayer " + layer["config"].value("name", std::string("input")) +
                             " is not an image input [None, H, W, C]; --image-size cannot set it");
    shape[1] = size;
    shape[2] = size;
    ++inputs;
  }
  if (inputs == 0) return InvalidArgument("model spec: no InputLayer to set the image size on");
  return spec.dump();
}

Result<std::string> SpecWithInputShape(const std::string& spec_json, int64_t size, int64_t channels) {
  STRATA_ASSIGN_OR_RETURN(Shape now, SpecInputShape(spec_json));
  if (now == Shape{size, size, channels}) return spec_json;  // byte for byte: the default job's spec
  STRATA_ASSIGN_OR_RETURN(std::string sized, SpecWithImageSize(spec_json, size));
  json spec = json::parse(sized);
  for (auto& layer : spec["config"]["layers"])
    if (layer.value("class_name", "") == "InputLayer") layer["config"]["batch_input_shape"][3] = channels;
  return spec.dump();
}

Result<std::string> SpecWithClasses(const std::string& spec_json, int64_t classes) {
  json spec = json::parse(spec_json, nullptr, false);
  if (!spec.is_object() || !spec.contains("config") || !spec["config"].contains("layers") ||
      !spec["config"]["layers"].is_array())
    return InvalidArgument("model spec: not a Keras-style {\"class_name\", \"config\": {\"layers\"}} object");
  // The classifier: the last Dense (its units), or a SqueezeNet's last Conv2D (its filters)
  // when only pooling and activations follow it.
  auto& layers = spec["config"]["layers"];
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const std::string kind = it->value("class_name", "");
    const char* field = kind == "Dense" ? "units" : kind == "Conv2D" ? "filters" : nullptr;
    if (!field) continue;
    if ((*it)["config"].value(field, int64_t{0}) == classes) return spec_json;
    (*it)["config"][field] = classes;
    return spec.dump();
  }
  return InvalidArgument("model spec: no Dense or Conv2D layer whose outputs --classes could set");
}

Result<Shape> SpecInputShape(const std::string& spec_json) {
  json spec = json::parse(spec_json, nullptr, false);
  if (spec.is_object() && spec.contains("config") && spec["config"].contains("layers"))
    for (const auto& layer : spec["config"]["layers"]) {
      if (layer.value("class_name", "") != "InputLayer") continue;
      const auto shape = layer["config"].value("batch_input_shape", json::array());
      if (shape.size() != 4 || !shape[1].is_number() || !shape[2].is_number() || !shape[3].is_number())
        return InvalidArgument("model spec: the InputLayer is not an image input [None, H, W, C]");
      return Shape{shape[1].get<int64_t>(), shape[2].get<int64_t>(), shape[3].get<int64_t>()};
    }
  return NotFound("model spec: no InputLayer");
}

Result<keras::applications::Options> ApplicationOptionsFor(const std::string& name, int64_t size, int64_t channels,
                                                           int64_t classes) {
  if (!keras::applications::IsApplication(name)) {
    std::string names;
    for (const auto& n : keras::applications::Names()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument("no Keras application " + name + " (there are " + names + ")");
  }
  const int minimum = keras::applications::MinimumSize(name);
  if (size < minimum)
    return InvalidArgument("model " + name + " takes images of at least " + std::to_string(minimum) + "x" +
                           std::to_string(minimum) + " (Keras's minimum input size), not " + std::to_string(size) + "x" +
                           std::to_string(size) + ": pass --image-size " + std::to_string(minimum) + " or more");
  if (channels != 3 && channels != 1) return InvalidArgument("model " + name + ": channels must be 1 or 3");
  keras::applications::Options o;
  o.input_shape = Shape{size, size, channels};
  if (classes > 0) o.classes = static_cast<int>(classes);
  return o;
}

Result<std::unique_ptr<keras::Model>> BuildModel(const ModelInfo& info) {
  if (!info.application.empty()) {
    auto m = keras::applications::ByName(info.application, info.application_options);
    if (!m.ok()) return m.status().WithContext("model " + info.application);
    return m;
  }
  auto m = keras::ModelFromJson(info.spec_json);
  if (!m.ok() && !info.source.empty()) return m.status().WithContext(info.source);
  return m;
}

namespace {

json ApplicationJson(const ModelInfo& info) {
  const auto& o = info.application_options;
  return {{"name", info.application},         {"include_top", o.include_top},
          {"input_shape", o.input_shape.dims()}, {"classes", o.classes},
          {"pooling", o.pooling},               {"classifier_activation", o.classifier_activation},
          {"model_name", o.name}};
}

Result<ModelInfo> ApplicationFromJson(const json& a, const std::string& path) {
  ModelInfo info;
  const auto bad = [&](const std::string& what) {
    return Corruption("checkpoint " + path + ": \"extra\".\"model\".\"application\" " + what);
  };
  if (!a.is_object() || !a.contains("name") || !a["name"].is_string()) return bad("has no name");
  info.application = a["name"].get<std::string>();
  if (!keras::applications::IsApplication(info.application)) return bad("names no Keras application: " + info.application);
  auto& o = info.application_options;
  // A field of the wrong type: nlohmann's value() throws; the file is corrupt, not the program.
  try {
    o.include_top = a.value("include_top", true);
    o.classes = a.value("classes", 1000);
    o.pooling = a.value("pooling", std::string());
    o.classifier_activation = a.value("classifier_activation", std::string("softmax"));
    o.name = a.value("model_name", std::string());
  } catch (const json::exception& e) {
    return bad(std::string("has a field of the wrong type (") + e.what() + ")");
  }
  const json shape = a.value("input_shape", json::array());
  if (!shape.is_array() || shape.size() != 3) return bad("input_shape is not [H, W, C]");
  std::vector<int64_t> dims;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) return bad("input_shape is not [H, W, C]");
    dims.push_back(d.get<int64_t>());
  }
  o.input_shape = Shape(dims);
  return info;
}

struct CheckpointRecords {
  json header;
  std::string params, slots, iterator;
};

Result<CheckpointRecords> ReadCheckpointRecords(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto r, record::RecordReader::Open(path));
  CheckpointRecords c;
  std::string header;
  STRATA_RETURN_IF_ERROR(r->ReadRecord(&header).WithContext("checkpoint " + path + " header"));
  c.header = json::parse(header, nullptr, false);
  if (!c.header.is_object() || c.header.value("format", "") != "strata-checkpoint")
    return Corruption("checkpoint " + path + ": not a Strata checkpoint (bad header record)");
  STRATA_RETURN_IF_ERROR(r->ReadRecord(&c.params).WithContext("checkpoint " + path + " parameters"));
  STRATA_RETURN_IF_ERROR(r->ReadRecord(&c.slots).WithContext("checkpoint " + path + " optimizer slots"));
  STRATA_RETURN_IF_ERROR(r->ReadRecord(&c.iterator).WithContext("checkpoint " + path + " iterator state"));
  return c;
}

Result<ModelInfo> InfoFromJson(const json& m, const std::string& path) {
  if (!m.is_object() || (!m.contains("spec") && !m.contains("application")))
    return NotFound("checkpoint " + path + " does not record its model spec (written before specs were recorded?): "
                    "pass --model SPEC --weights " + path);
  ModelInfo info;
  if (m.contains("application")) {
    STRATA_ASSIGN_OR_RETURN(info, ApplicationFromJson(m["application"], path));
  } else {
    info.spec_json = m["spec"].dump();
  }
  info.source = m.value("source", "");
  info.preset = m.value("preset", "");
  info.image_key = m.value("image_key", "image");
  info.label_key = m.value("label_key", "label");
  info.image_size = m.value("image_size", int64_t{28});
  info.classes = m.value("classes", int64_t{10});
  info.channels = m.value("channels", int64_t{0});  // 0: written before channels were recorded (the spec says)
  return info;
}

}  // namespace

Status RecordModelInfo(const std::string& checkpoint, const ModelInfo& info) {
  STRATA_ASSIGN_OR_RETURN(CheckpointRecords c, ReadCheckpointRecords(checkpoint));
  json spec;
  if (info.application.empty()) {
    spec = json::parse(info.spec_json, nullptr, false);
    if (spec.is_discarded()) return InvalidArgument("model spec of " + checkpoint + " is not JSON");
  }
  if (!c.header.contains("extra") || !c.header["extra"].is_object()) c.header["extra"] = json::object();
  c.header["extra"]["model"] = {{"source", info.source},
                                {"preset", info.preset},   {"image_key", info.image_key},
                                {"label_key", info.label_key}, {"image_size", info.image_size},
                                {"channels", info.channels}, {"classes", info.classes}};
  if (info.application.empty()) c.header["extra"]["model"]["spec"] = spec;
  else c.header["extra"]["model"]["application"] = ApplicationJson(info);
  STRATA_ASSIGN_OR_RETURN(auto w, record::RecordWriter::Open(checkpoint));  // atomic: temp + rename
  STRATA_RETURN_IF_ERROR(w->WriteRecord(c.header.dump()));
  STRATA_RETURN_IF_ERROR(w->WriteRecord(c.params));
  STRATA_RETURN_IF_ERROR(w->WriteRecord(c.slots));
  STRATA_RETURN_IF_ERROR(w->WriteRecord(c.iterator));
  return w->Close();
}

bool IsCheckpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  auto r = record::RecordReader::Open(path);
  if (!r.ok()) return false;
  std::string header;
  if (!(*r)->ReadRecord(&header).ok()) return false;
  auto h = json::parse(header, nullptr, false);
  return h.is_object() && h.value("format", "") == "strata-checkpoint";
}

Result<LoadedModel> LoadModelForInference(const std::string& model_arg, const std::string& weights_arg) {
  LoadedModel out;
  std::string weights = weights_arg;
  int64_t slots = 0, trainable = 0;
  if (IsCheckpoint(model_arg)) {
    if (!weights.empty()) return InvalidArgument("--weights is for --model SPEC; " + model_arg + " is a checkpoint already");
    weights = model_arg;
  } else if (keras::applications::IsApplication(model_arg)) {
    // A Keras application by name (with --weights, or fresh for --summary): Keras's defaults.
    out.info.application = model_arg;
    out.info.source = model_arg;
  } else {
    STRATA_ASSIGN_OR_RETURN(out.info.spec_json, SpecText(model_arg));
    out.info.source = model_arg;
  }
  if (!weights.empty()) {
    STRATA_ASSIGN_OR_RETURN(CheckpointRecords c, ReadCheckpointRecords(weights));
    if (weights == model_arg) {
      STRATA_ASSIGN_OR_RETURN(out.info, InfoFromJson(c.header.contains("extra") ? c.header["extra"].value("model", json()) : json(), weights));
    }
    slots = c.header.value("slots", int64_t{0});
    for (const auto& v : c.header.value("variables", json::array()))
      if (v.value("trainable", false)) trainable += v.value("size", int64_t{0});
  }
  // The input settings follow the spec when no checkpoint recorded them.
  if (weights != model_arg && !out.info.application.empty()) {
    const int side = keras::applications::DefaultSize(out.info.application);
    out.info.application_options.input_shape = Shape{side, side, 3};
    out.info.image_size = side;
    out.info.label_key = "class";  // the flowers schema
  } else if (weights != model_arg) {
    json spec = json::parse(out.info.spec_json, nullptr, false);
    for (const auto& layer : spec.is_object() ? spec["config"].value("layers", json::array()) : json::array()) {
      if (layer.value("class_name", "") != "InputLayer") continue;
      auto shape = layer["config"].value("batch_input_shape", json::array());
      if (shape.size() == 4 && shape[1].is_number()) out.info.image_size = shape[1].get<int64_t>();
    }
    if (out.info.image_size != 28) out.info.label_key = "class";  // the flowers schema
  }
  // The channels the model takes, so the pipeline decodes grayscale or RGB: the spec's input.
  if (!out.info.application.empty()) {
    const Shape& in = out.info.application_options.input_shape;
    if (in.rank() == 3) out.info.channels = in[2];
  } else if (auto input = SpecInputShape(out.info.spec_json); input.ok()) {
    out.info.channels = (*input)[2];
  }
  if (out.info.channels == 0) out.info.channels = out.info.image_size == 28 && out.info.label_key == "label" ? 1 : 3;
  STRATA_ASSIGN_OR_RETURN(out.model, BuildModel(out.info));
  STRATA_ASSIGN_OR_RETURN(out.strategy, distribute::MirroredStrategy(std::max(1, UsableCores())));
  // Loading checks the optimizer slots' size, so compile with an optimizer of the same shape:
  // none (plain SGD), one block (SGD with momentum) or two (Adam, RMSprop).
  const int64_t blocks = trainable > 0 ? slots / trainable : 0;
  keras::Optimizer opt = blocks == 0   ? keras::optimizers::SGD(0.01)
                         : blocks == 1 ? keras::optimizers::SGD(0.01, {.momentum = 0.9})
                                       : keras::optimizers::Adam(0.001);
  STRATA_RETURN_IF_ERROR(out.model->compile(
      {.optimizer = opt,
       .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = !out.model->ends_in_softmax()}),
       .metrics = {"accuracy"},
       .threads = 1,
       .strategy = out.strategy.get()}));
  if (!weights.empty()) STRATA_RETURN_IF_ERROR(out.model->load_weights(weights));
  return out;
}

Result<data::Dataset> InferenceDataset(const ModelInfo& info, const std::string& glob, int64_t batch, bool labels,
                                       const std::string& id_key) {
  // Fashion-MNIST's TFDS layout (its recipe reads the label); prediction (no labels, maybe ids)
  // takes the general recipe below at 28 x 28 x 1.
  if (info.image_size == 28 && info.label_key == "label" && info.channels == 1 && labels && id_key.empty()) {
    return datasets::FashionMnistDataset(glob, {.batch_size = batch, .drop_remainder = false, .shuffle = 0, .seed = 0,
                                                .cache = false, .image_key = info.image_key, .label_key = info.label_key});
  }
  datasets::FlowersOptions o;
  o.image_size = static_cast<int>(info.image_size);
  o.channels = static_cast<int>(info.channels);
  o.batch_size = batch;
  o.deterministic = true;
  o.augment = false;
  o.repeat = false;
  o.shuffle_buffer = 0;
  o.seed = 0;
  o.image_key = info.image_key;
  o.label_key = labels ? info.label_key : "";
  o.drop_remainder = false;
  o.id_key = id_key;
  return datasets::FlowersDataset(glob, o);
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

std::vector<std::string> ClassNames(const ModelInfo& info, int64_t classes) {
  std::vector<std::string> names;
  const bool flowers = info.preset == "flowers" || classes == datasets::kFlowersNumClasses;
  for (int64_t c = 0; c < classes; ++c) {
    if (flowers && c < datasets::kFlowersNumClasses) names.push_back(datasets::kFlowersClasses[c]);
    else if (classes == 10 && info.label_key == "label" && info.channels == 1 && info.image_size == 28)
      names.push_back(datasets::kFashionMnistClasses[c]);  // not for other 10-class data (CIFAR-10)
    else names.push_back("class " + std::to_string(c));
  }
  return names;
}

}  // namespace strata::cli
