#include "strata/train/model_source.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "strata/core/file.h"
#include "strata/io/get_file.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/spec.h"

namespace strata::train {

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

Result<std::string> FetchImagenetWeights(const ModelInfo& info, bool include_top) {
  if (info.application.empty())
    return InvalidArgument("--weights imagenet needs --model one of the Keras applications (" +
                           keras::applications::NameList() + "), not " + info.source);
  keras::applications::Options o = info.application_options;
  o.include_top = include_top;
  auto source = keras::applications::ImagenetWeights(info.application, o);
  if (!source.ok()) return source.status().WithContext("--weights imagenet");
  return io::GetFile(source->fname, source->url, source->file_hash);
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
    return Corruption("checkpoint " + path + ": the model's \"application\" " + what);
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
  try {
    info.source = m.value("source", "");
    info.preset = m.value("preset", "");
    info.image_key = m.value("image_key", "image");
    info.label_key = m.value("label_key", "label");
    info.image_size = m.value("image_size", int64_t{28});
    info.classes = m.value("classes", int64_t{10});
    info.channels = m.value("channels", int64_t{0});  // 0: written before channels were recorded (the spec says)
  } catch (const json::exception& e) {
    return Corruption("checkpoint " + path + ": the model's record has a field of the wrong type (" + e.what() + ")");
  }
  return info;
}

}  // namespace

Result<std::string> ModelInfoJson(const ModelInfo& info) {
  json m = {{"source", info.source},       {"preset", info.preset},         {"image_key", info.image_key},
            {"label_key", info.label_key}, {"image_size", info.image_size}, {"channels", info.channels},
            {"classes", info.classes}};
  if (info.application.empty()) {
    json spec = json::parse(info.spec_json, nullptr, false);
    if (spec.is_discarded()) return InvalidArgument("model spec of " + info.source + " is not JSON");
    m["spec"] = std::move(spec);
  } else {
    m["application"] = ApplicationJson(info);
  }
  return m.dump();
}

Result<ModelInfo> ReadModelInfo(const std::string& checkpoint) {
  STRATA_ASSIGN_OR_RETURN(keras::CheckpointState header, keras::ReadCheckpointHeader(checkpoint));
  return InfoFromJson(json::parse(header.model_json, nullptr, false), checkpoint);
}

namespace {

// The smallest square image size >= 1 a built-in spec can be built for, or 0 when none up to
// 256 (larger tries would allocate big Dense layers for nothing): the number `image_size` must reach.
int64_t SmallestImageSize(const std::string& spec, int64_t channels) {
  auto builds = [&](int64_t size) {
    auto sized = SpecWithInputShape(spec, size, channels);
    return sized.ok() && keras::ModelFromJson(*sized).ok();
  };
  int64_t hi = 1;
  while (hi <= 256 && !builds(hi)) hi *= 2;
  if (hi > 256) return 0;
  int64_t lo = hi / 2;  // does not build (or 0)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (builds(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

Result<std::unique_ptr<keras::Model>> SelectModel(const ModelChoice& c, ModelInfo* info) {
  *info = ModelInfo{};
  info->source = c.model;
  std::unique_ptr<keras::Model> model;
  const bool recorded = keras::IsCheckpointFile(c.model);  // reads the file's header
  if (recorded) {
    STRATA_ASSIGN_OR_RETURN(*info, ReadModelInfo(c.model));  // the model, input and records it was trained on
    STRATA_ASSIGN_OR_RETURN(model, BuildModel(*info));
  } else if (keras::applications::IsApplication(c.model)) {
    const int64_t size = c.image_size > 0 ? c.image_size : keras::applications::DefaultSize(c.model);
    STRATA_ASSIGN_OR_RETURN(info->application_options,
                            ApplicationOptionsFor(c.model, size, c.channels > 0 ? c.channels : 3, c.classes));
    info->application = c.model;
    STRATA_ASSIGN_OR_RETURN(model, BuildModel(*info));
  } else {
    STRATA_ASSIGN_OR_RETURN(std::string spec, SpecText(c.model));
    const bool builtin = keras::BuiltinSpec(c.model).ok();
    const std::string as_written = spec;
    int64_t channels = c.channels;
    if (builtin && c.image_size > 0) {
      if (channels == 0) {
        STRATA_ASSIGN_OR_RETURN(Shape own, SpecInputShape(spec));
        channels = own[2];
      }
      STRATA_ASSIGN_OR_RETURN(spec, SpecWithInputShape(spec, c.image_size, channels));
    } else if (c.resize_spec_file && c.image_size > 0) {
      STRATA_ASSIGN_OR_RETURN(spec, SpecWithImageSize(spec, c.image_size));
    }
    if (builtin && c.classes > 0) {
      STRATA_ASSIGN_OR_RETURN(spec, SpecWithClasses(spec, c.classes));
    }
    info->spec_json = spec;
    auto m = keras::ModelFromJson(spec);
    if (!m.ok() && builtin && c.image_size > 0) {
      const int64_t smallest = SmallestImageSize(as_written, channels);
      const std::string shape = Shape{c.image_size, c.image_size, channels}.ToString();
      return InvalidArgument("model " + c.model + " cannot be built for " + shape + " images (" + m.status().message() +
                             ")" + (smallest > c.image_size ? ": pass --image-size " + std::to_string(smallest) + " or more" : ""));
    }
    if (!m.ok()) return m.status().WithContext(c.model);
    model = std::move(*m);
  }
  // What an application or a spec leaves unsaid (and a checkpoint written before channels were
  // recorded) follows from the model: its input, its outputs, and the records' kind from the input.
  if (auto in = model->input_shape(0); in.ok() && in->rank() == 3) {
    if (!recorded) {
      info->image_size = (*in)[0];
      info->label_key = DataKindOf(info->image_size, "label", (*in)[2]) == DataKind::kFashionMnist ? "label" : "class";
    }
    if (!recorded || info->channels == 0) info->channels = (*in)[2];
  }
  if (auto out = model->output_shape(0); !recorded && out.ok()) info->classes = out->num_elements();
  return model;
}

Result<std::unique_ptr<keras::Model>> BuildRecipeModel(const Recipe& r, ModelInfo* info) {
  if (r.image_size < 1 || r.channels < 1)
    return InvalidArgument("the recipe's image_size and channels must be resolved (not 0) to build its model");
  if (keras::IsCheckpointFile(r.model))
    return InvalidArgument("--model " + r.model + " is a checkpoint: pass the model it was trained as with --model and "
                           "the checkpoint with --weights");
  STRATA_ASSIGN_OR_RETURN(auto model, SelectModel({.model = r.model, .image_size = r.image_size, .channels = r.channels,
                                                   .classes = r.classes, .resize_spec_file = r.resize_spec_file},
                                                  info));
  // What the checkpoint records of the data: the recipe's, which the trainer checks the model against.
  info->preset = r.preset;
  info->image_key = r.image_key;
  info->label_key = r.label_key;
  info->image_size = r.image_size;
  info->classes = r.classes;
  info->channels = r.channels;
  return model;
}

keras::CompileOptions ClassifierCompileOptions(const keras::Model& model, ClassifierCompile c) {
  return {.optimizer = std::move(c.optimizer),
          .loss = keras::losses::SparseCategoricalCrossentropy(
              {.from_logits = !model.ends_in_softmax(), .label_smoothing = c.label_smoothing}),
          .precision = c.precision == "bf16" ? "mixed_bfloat16" : "float32"};
}

Result<std::unique_ptr<keras::Model>> MakeModel(const Recipe& r) {
  ModelInfo info;
  return BuildRecipeModel(r, &info);
}

}  // namespace strata::train
