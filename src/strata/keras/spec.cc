#include "strata/keras/spec.h"

#include <map>
#include <nlohmann/json.hpp>

#include "strata/core/file.h"
#include "strata/keras/layer_config.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/applications/builtin_specs.h"  // generated from models/*.json

namespace strata::keras {
namespace {

using Json = nlohmann::json;

// One layer of a spec from the registry (layer_registry.h), every key of its config read.
Result<LayerPtr> MakeLayer(const std::string& cls, const Json& config_json, const std::string& name) {
  LayerConfig c(config_json, (name.empty() ? std::string("layer") : name) + " (" + cls + ")");
  const LayerClass* layer_class = FindLayerClass(cls);
  if (layer_class == nullptr) {
    std::string known;
    for (const LayerClass& k : LayerClasses()) known += (known.empty() ? "" : ", ") + k.name;
    return InvalidArgument(c.label() + ": unknown layer class \"" + cls + "\" (known: InputLayer, " + known + ")");
  }
  STRATA_ASSIGN_OR_RETURN(LayerPtr layer, layer_class->from_config(c, name));
  STRATA_RETURN_IF_ERROR(c.CheckAllUsed());
  return layer;
}

Result<Shape> InputShapeOf(const Json& config, const std::string& label) {
  const Json* s = nullptr;
  bool with_batch = false;
  if (config.contains("batch_input_shape")) {
    s = &config["batch_input_shape"];
    with_batch = true;
  } else if (config.contains("batch_shape")) {
    s = &config["batch_shape"];
    with_batch = true;
  } else if (config.contains("input_shape")) {
    s = &config["input_shape"];
  } else if (config.contains("shape")) {
    s = &config["shape"];
  }
  if (!s || !s->is_array()) return InvalidArgument(label + ": needs batch_input_shape (or input_shape)");
  std::vector<int64_t> dims;
  for (size_t i = with_batch ? 1 : 0; i < s->size(); ++i) {
    if (!(*s)[i].is_number_integer() || (*s)[i].get<int64_t>() <= 0)
      return InvalidArgument(label + ": input dimensions must be positive integers (static shapes), got " + s->dump());
    dims.push_back((*s)[i].get<int64_t>());
  }
  return Shape(dims);
}

Result<std::unique_ptr<Model>> SequentialFromJson(const Json& config) {
  const std::string name = config.value("name", "sequential");
  if (!config.contains("layers") || !config["layers"].is_array() || config["layers"].empty())
    return InvalidArgument("spec " + name + ": a Sequential needs a non-empty \"layers\" list");
  std::vector<LayerPtr> list;
  for (size_t i = 0; i < config["layers"].size(); ++i) {
    const Json& l = config["layers"][i];
    const std::string cls = l.value("class_name", "");
    const Json cfg = l.contains("config") ? l["config"] : Json::object();
    const std::string lname = cfg.value("name", "");
    if (cls == "InputLayer") {
      if (i != 0) return InvalidArgument("spec " + name + ": InputLayer must come first");
      STRATA_ASSIGN_OR_RETURN(Shape s, InputShapeOf(cfg, "spec " + name + " InputLayer"));
      list.push_back(layers::InputLayer(s, DType::kF32, lname));
      continue;
    }
    if (i == 0) {
      // Keras also allows the first layer to carry batch_input_shape.
      STRATA_ASSIGN_OR_RETURN(Shape s, InputShapeOf(cfg, "spec " + name + " first layer " + cls));
      list.push_back(layers::InputLayer(s));
    }
    STRATA_ASSIGN_OR_RETURN(LayerPtr layer, MakeLayer(cls, cfg, lname));
    list.push_back(layer);
  }
  return Sequential(std::move(list), name);
}

Result<std::unique_ptr<Model>> FunctionalFromJson(const Json& config) {
  const std::string name = config.value("name", "model");
  std::map<std::string, KTensor> tensors;
  std::map<std::string, LayerPtr> made;
  if (!config.contains("layers") || !config["layers"].is_array())
    return InvalidArgument("spec " + name + ": a Functional model needs \"layers\"");
  for (const auto& l : config["layers"]) {
    const std::string cls = l.value("class_name", "");
    const Json cfg = l.contains("config") ? l["config"] : Json::object();
    const std::string lname = l.value("name", cfg.value("name", ""));
    if (lname.empty()) return InvalidArgument("spec " + name + ": every layer of a Functional model needs a name");
    if (cls == "InputLayer") {
      STRATA_ASSIGN_OR_RETURN(Shape s, InputShapeOf(cfg, "spec " + name + " input " + lname));
      tensors[lname] = Input(s, DType::kF32, lname);
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(LayerPtr layer, MakeLayer(cls, cfg, lname));
    made[lname] = layer;
    // inbound_nodes: [[["src", node_index, tensor_index, {}], ...]] — one call each.
    const Json& inbound = l.contains("inbound_nodes") ? l["inbound_nodes"] : Json::array();
    if (!inbound.is_array() || inbound.size() != 1)
      return Unimplemented("spec " + name + ": layer " + lname + " must be called exactly once (shared layers in specs are not supported)");
    std::vector<KTensor> args;
    for (const auto& src : inbound[0]) {
      if (!src.is_array() || src.empty() || !src[0].is_string())
        return InvalidArgument("spec " + name + ": layer " + lname + ": malformed inbound node " + src.dump());
      auto it = tensors.find(src[0].get<std::string>());
      if (it == tensors.end())
        return InvalidArgument("spec " + name + ": layer " + lname + " takes \"" + src[0].get<std::string>() +
                               "\", which is not defined before it");
      args.push_back(it->second);
    }
    tensors[lname] = args.size() == 1 ? Call(layer, args[0]) : Call(layer, args);
  }
  auto pick = [&](const char* key) -> Result<std::vector<KTensor>> {
    std::vector<KTensor> out;
    if (!config.contains(key) || !config[key].is_array()) return InvalidArgument("spec " + name + ": needs " + key);
    for (const auto& e : config[key]) {
      const std::string n = e.is_array() && !e.empty() ? e[0].get<std::string>() : e.get<std::string>();
      auto it = tensors.find(n);
      if (it == tensors.end()) return InvalidArgument("spec " + name + ": " + key + " names unknown layer " + n);
      out.push_back(it->second);
    }
    return out;
  };
  STRATA_ASSIGN_OR_RETURN(auto ins, pick("input_layers"));
  STRATA_ASSIGN_OR_RETURN(auto outs, pick("output_layers"));
  return Model::Functional(ins, outs, name);
}

}  // namespace

Result<LayerPtr> LayerFromConfig(const std::string& class_name, const std::string& config_json, const std::string& name) {
  Json config;
  try {
    config = Json::parse(config_json);
  } catch (const Json::exception& e) {
    return InvalidArgument((name.empty() ? std::string("layer") : name) + " (" + class_name + "): config is not JSON: " + e.what());
  }
  if (!config.is_object())
    return InvalidArgument((name.empty() ? std::string("layer") : name) + " (" + class_name + "): config must be an object");
  try {
    return MakeLayer(class_name, config, name);
  } catch (const Json::exception& e) {
    return InvalidArgument((name.empty() ? std::string("layer") : name) + " (" + class_name + "): " + e.what());
  }
}

Result<std::unique_ptr<Model>> ModelFromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("model spec: not valid JSON");
  if (!j.is_object()) return InvalidArgument("model spec: the top level must be an object");
  const std::string cls = j.value("class_name", "");
  const Json config = j.contains("config") ? j["config"] : Json::object();
  try {
    // Keras before 2.2 wrote a Sequential's config as the bare list of its layers.
    if (cls == "Sequential") return SequentialFromJson(config.is_array() ? Json{{"layers", config}} : config);
    if (cls == "Functional" || cls == "Model") return FunctionalFromJson(config);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("model spec: ") + e.what());
  }
  return InvalidArgument("model spec: class_name must be \"Sequential\" or \"Functional\", got \"" + cls + "\"");
}

Result<std::string> BuiltinSpec(const std::string& name) {
  std::string names;
  for (const auto& spec : applications::kBuiltinSpecs) {
    if (name == spec.name) return std::string(spec.json);
    names += (names.empty() ? "" : ", ") + std::string(spec.name);
  }
  return NotFound("no built-in model spec \"" + name + "\" (" + names + ")");
}

Result<std::unique_ptr<Model>> LoadModelSpec(const std::string& path_or_name) {
  auto builtin = BuiltinSpec(path_or_name);
  if (builtin.ok()) return ModelFromJson(*builtin);
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path_or_name));
  auto model = ModelFromJson(text);
  if (!model.ok()) return model.status().WithContext(path_or_name);
  return model;
}

}  // namespace strata::keras
