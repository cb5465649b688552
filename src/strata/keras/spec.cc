#include "strata/keras/spec.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "strata/core/file.h"
#include "strata/datasets/builtin_specs.h"  // generated from models/*.json

namespace strata::keras {
namespace {

using Json = nlohmann::json;



// Reads config values with Keras's conventions and records which keys were used, so an
// unknown argument is an error rather than silently ignored.
class Config {
 public:
  Config(const Json& j, std::string label) : j_(j), label_(std::move(label)) {}
  const std::string& label() const { return label_; }

  Result<int> Size(const std::string& key, int fallback) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return fallback;
    const Json& v = j_[key];
    if (v.is_number_integer()) return v.get<int>();
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
      for (const auto& x : v)
        if (!x.is_number_integer() || x.get<int>() != v[0].get<int>())
          return Unimplemented(label_ + ": " + key + " " + v.dump() + ": only square sizes are supported");
      return v[0].get<int>();
    }
    return InvalidArgument(label_ + ": " + key + " must be an integer or [k, k], got " + v.dump());
  }
  Result<double> Number(const std::string& key, double fallback) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return fallback;
    if (!j_[key].is_number()) return InvalidArgument(label_ + ": " + key + " must be a number, got " + j_[key].dump());
    return j_[key].get<double>();
  }
  Result<bool> Bool(const std::string& key, bool fallback) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return fallback;
    if (!j_[key].is_boolean()) return InvalidArgument(label_ + ": " + key + " must be true or false");
    return j_[key].get<bool>();
  }
  Result<std::string> String(const std::string& key, std::string fallback) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return fallback;
    const Json& v = j_[key];
    if (v.is_string()) return v.get<std::string>();
    // Initializers and activations as Keras serialises them: {"class_name": "GlorotUniform"}.
    if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
      std::string cls = v["class_name"].get<std::string>(), snake;
      for (char c : cls) {
        if (std::isupper(static_cast<unsigned char>(c)) && !snake.empty()) snake += '_';
        snake += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      // VarianceScaling keeps its config: "variance_scaling(scale=2, mode=fan_out, distribution=...)".
      if (snake == "variance_scaling" && v.contains("config") && v["config"].is_object()) {
        const Json& cfg = v["config"];
        std::string args;
        for (const char* k : {"scale", "mode", "distribution"}) {
          if (!cfg.contains(k) || cfg[k].is_null()) continue;
          if (!args.empty()) args += ", ";
          args += std::string(k) + "=" + (cfg[k].is_string() ? cfg[k].get<std::string>() : cfg[k].dump());
        }
        return snake + "(" + args + ")";
      }
      return snake;
    }
    return InvalidArgument(label_ + ": " + key + " must be a string, got " + v.dump());
  }
  // L2 regularizer factor: {"class_name": "L2", "config": {"l2": 0.01}} or a number.
  Result<float> L2(const std::string& key) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return 0.0f;
    const Json& v = j_[key];
    if (v.is_number()) return v.get<float>();
    if (v.is_object() && v.contains("config") && v["config"].contains("l2")) return v["config"]["l2"].get<float>();
    return InvalidArgument(label_ + ": " + key + ": only L2 regularizers are supported, got " + v.dump());
  }
  // The raw JSON of `key` (nullptr: absent or null), marked used; the caller checks its form.
  const Json* Raw(const std::string& key) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return nullptr;
    return &j_[key];
  }
  Status CheckAllUsed() const {
    // Keys Keras writes that carry no meaning here.
    static const std::set<std::string> kIgnored = {"name", "trainable", "dtype", "data_format", "batch_input_shape",
                                                   "sparse", "ragged", "input_shape", "kernel_constraint",
                                                   "bias_constraint", "activity_regularizer", "bias_regularizer",
                                                   "beta_initializer", "gamma_initializer",
                                                   "moving_mean_initializer", "moving_variance_initializer",
                                                   "beta_regularizer", "gamma_regularizer", "beta_constraint",
                                                   "gamma_constraint", "synchronized", "keepdims"};
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!used_.count(it.key()) && !kIgnored.count(it.key()))
        return InvalidArgument(label_ + ": unknown argument \"" + it.key() + "\"");
    }
    return Status::OK();
  }

 private:
  const Json& j_;
  std::string label_;
  std::set<std::string> used_;
};

#define SPEC_ASSIGN(lhs, expr) STRATA_ASSIGN_OR_RETURN(lhs, expr)

Result<LayerPtr> MakeLayer(const std::string& cls, const Json& config_json, const std::string& name) {
  Config c(config_json, (name.empty() ? std::string("layer") : name) + " (" + cls + ")");
  LayerPtr layer;
  if (cls == "Dense") {
    layers::DenseOptions o;
    SPEC_ASSIGN(int units, c.Size("units", 0));
    SPEC_ASSIGN(o.activation, c.String("activation", "linear"));
    SPEC_ASSIGN(o.use_bias, c.Bool("use_bias", true));
    SPEC_ASSIGN(o.kernel_initializer, c.String("kernel_initializer", "glorot_uniform"));
    SPEC_ASSIGN(o.bias_initializer, c.String("bias_initializer", "zeros"));
    SPEC_ASSIGN(o.kernel_regularizer_l2, c.L2("kernel_regularizer"));
    o.name = name;
    layer = layers::Dense(units, o);
  } else if (cls == "Conv2D") {
    layers::Conv2DOptions o;
    SPEC_ASSIGN(int filters, c.Size("filters", 0));
    SPEC_ASSIGN(int k, c.Size("kernel_size", 3));
    SPEC_ASSIGN(o.strides, c.Size("strides", 1));
    SPEC_ASSIGN(o.padding, c.String("padding", "valid"));
    SPEC_ASSIGN(o.dilation_rate, c.Size("dilation_rate", 1));
    SPEC_ASSIGN(o.groups, c.Size("groups", 1));
    SPEC_ASSIGN(o.activation, c.String("activation", "linear"));
    SPEC_ASSIGN(o.use_bias, c.Bool("use_bias", true));
    SPEC_ASSIGN(o.kernel_initializer, c.String("kernel_initializer", "glorot_uniform"));
    SPEC_ASSIGN(o.bias_initializer, c.String("bias_initializer", "zeros"));
    SPEC_ASSIGN(o.kernel_regularizer_l2, c.L2("kernel_regularizer"));
    o.name = name;
    layer = layers::Conv2D(filters, k, o);
  } else if (cls == "DepthwiseConv2D") {
    layers::DepthwiseConv2DOptions o;
    SPEC_ASSIGN(int k, c.Size("kernel_size", 3));
    SPEC_ASSIGN(o.strides, c.Size("strides", 1));
    SPEC_ASSIGN(o.padding, c.String("padding", "valid"));
    SPEC_ASSIGN(o.depth_multiplier, c.Size("depth_multiplier", 1));
    SPEC_ASSIGN(o.dilation_rate, c.Size("dilation_rate", 1));
    SPEC_ASSIGN(o.activation, c.String("activation", "linear"));
    SPEC_ASSIGN(o.use_bias, c.Bool("use_bias", true));
    SPEC_ASSIGN(o.depthwise_initializer, c.String("depthwise_initializer", "glorot_uniform"));
    SPEC_ASSIGN(o.depthwise_regularizer_l2, c.L2("depthwise_regularizer"));
    (void)c.String("bias_initializer", "zeros");
    o.name = name;
    layer = layers::DepthwiseConv2D(k, o);
  } else if (cls == "SeparableConv2D") {
    layers::SeparableConv2DOptions o;
    SPEC_ASSIGN(int filters, c.Size("filters", 0));
    SPEC_ASSIGN(int k, c.Size("kernel_size", 3));
    SPEC_ASSIGN(o.strides, c.Size("strides", 1));
    SPEC_ASSIGN(o.padding, c.String("padding", "valid"));
    SPEC_ASSIGN(o.depth_multiplier, c.Size("depth_multiplier", 1));
    SPEC_ASSIGN(o.activation, c.String("activation", "linear"));
    SPEC_ASSIGN(o.use_bias, c.Bool("use_bias", true));
    SPEC_ASSIGN(o.depthwise_initializer, c.String("depthwise_initializer", "glorot_uniform"));
    SPEC_ASSIGN(o.pointwise_initializer, c.String("pointwise_initializer", "glorot_uniform"));
    (void)c.String("bias_initializer", "zeros");
    (void)c.Size("dilation_rate", 1);
    o.name = name;
    layer = layers::SeparableConv2D(filters, k, o);
  } else if (cls == "BatchNormalization") {
    layers::BatchNormalizationOptions o;
    SPEC_ASSIGN(double m, c.Number("momentum", 0.99));
    SPEC_ASSIGN(double e, c.Number("epsilon", 1e-3));
    SPEC_ASSIGN(o.center, c.Bool("center", true));
    SPEC_ASSIGN(o.scale, c.Bool("scale", true));
    SPEC_ASSIGN(o.synchronized, c.Bool("synchronized", false));
    SPEC_ASSIGN(int axis, c.Size("axis", -1));
    if (axis != -1 && axis != 3) return Unimplemented(c.label() + ": only the last axis (channels_last) is supported");
    o.momentum = static_cast<float>(m);
    o.epsilon = static_cast<float>(e);
    o.name = name;
    layer = layers::BatchNormalization(o);
  } else if (cls == "Activation") {
    SPEC_ASSIGN(std::string a, c.String("activation", "linear"));
    layer = layers::Activation(a, name);
  } else if (cls == "ReLU") {
    layers::ReLUOptions o;
    SPEC_ASSIGN(double max_value, c.Number("max_value", -1));
    SPEC_ASSIGN(double slope, c.Number("negative_slope", 0));
    SPEC_ASSIGN(double threshold, c.Number("threshold", 0));
    o.max_value = static_cast<float>(max_value);
    o.negative_slope = static_cast<float>(slope);
    o.threshold = static_cast<float>(threshold);
    o.name = name;
    layer = layers::ReLU(o);
  } else if (cls == "ZeroPadding2D") {
    // padding: int, [a, b] (rows a, columns b, both sides) or [[top, bottom], [left, right]].
    layers::ZeroPadding2DOptions o;
    o.name = name;
    const Json* p = c.Raw("padding");
    auto bad = [&] {
      return InvalidArgument(c.label() + ": padding must be an integer, [rows, cols] or [[top, bottom], [left, right]]"
                             " of non-negative integers, got " + (p ? p->dump() : std::string("null")));
    };
    auto is_int = [](const Json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (1 << 30); };
    if (p == nullptr) {
    } else if (is_int(*p)) {
      o.top = o.bottom = o.left = o.right = p->get<int>();
    } else if (p->is_array() && p->size() == 2 && is_int((*p)[0]) && is_int((*p)[1])) {
      o.top = o.bottom = (*p)[0].get<int>();
      o.left = o.right = (*p)[1].get<int>();
    } else if (p->is_array() && p->size() == 2 && (*p)[0].is_array() && (*p)[1].is_array() && (*p)[0].size() == 2 &&
               (*p)[1].size() == 2 && is_int((*p)[0][0]) && is_int((*p)[0][1]) && is_int((*p)[1][0]) &&
               is_int((*p)[1][1])) {
      o.top = (*p)[0][0].get<int>();
      o.bottom = (*p)[0][1].get<int>();
      o.left = (*p)[1][0].get<int>();
      o.right = (*p)[1][1].get<int>();
    } else {
      return bad();
    }
    layer = layers::ZeroPadding2D(o);
  } else if (cls == "Multiply") {
    layer = layers::Multiply(name);
  } else if (cls == "Normalization") {
    layers::NormalizationOptions o;
    o.name = name;
    const Json* axis = c.Raw("axis");
    if (axis != nullptr && !(axis->is_number_integer() && axis->get<int>() == -1) &&
        !(axis->is_array() && axis->size() == 1 && (*axis)[0].is_number_integer() && (*axis)[0].get<int>() == -1))
      return Unimplemented(c.label() + ": only axis -1 (the channels) is supported, got " + axis->dump());
    for (const char* key : {"mean", "variance"}) {
      const Json* v = c.Raw(key);
      if (v == nullptr) continue;
      if (!v->is_array()) return InvalidArgument(c.label() + ": " + key + " must be a list of numbers, got " + v->dump());
      std::vector<float>& out = std::string(key) == "mean" ? o.mean : o.variance;
      for (const Json& x : *v) {
        if (!x.is_number()) return InvalidArgument(c.label() + ": " + key + " must be a list of numbers, got " + v->dump());
        out.push_back(x.get<float>());
      }
    }
    (void)c.Raw("invert");
    if (config_json.contains("invert") && config_json["invert"].is_boolean() && config_json["invert"].get<bool>())
      return Unimplemented(c.label() + ": invert=true is not supported");
    layer = layers::Normalization(o);
  } else if (cls == "MaxPooling2D" || cls == "AveragePooling2D" || cls == "MaxPool2D" || cls == "AvgPool2D") {
    layers::Pool2DOptions o;
    SPEC_ASSIGN(o.pool_size, c.Size("pool_size", 2));
    SPEC_ASSIGN(o.strides, c.Size("strides", 0));
    SPEC_ASSIGN(o.padding, c.String("padding", "valid"));
    o.name = name;
    layer = cls[0] == 'M' ? layers::MaxPooling2D(o) : layers::AveragePooling2D(o);
  } else if (cls == "GlobalAveragePooling2D") {
    layer = layers::GlobalAveragePooling2D(name);
  } else if (cls == "GlobalMaxPooling2D") {
    layer = layers::GlobalMaxPooling2D(name);
  } else if (cls == "Flatten") {
    layer = layers::Flatten(name);
  } else if (cls == "Dropout") {
    SPEC_ASSIGN(double rate, c.Number("rate", 0.5));
    layers::DropoutOptions o;
    o.name = name;
    SPEC_ASSIGN(double seed, c.Number("seed", 0));
    if (seed < 0) return InvalidArgument(c.label() + ": seed must be >= 0");
    o.seed = static_cast<uint64_t>(seed);
    if (const Json* ns = c.Raw("noise_shape")) {
      if (!ns->is_array())
        return InvalidArgument(c.label() + ": noise_shape must be a list of integers or nulls, got " + ns->dump());
      for (const Json& d : *ns) {
        if (d.is_null()) o.noise_shape.push_back(0);
        else if (d.is_number_integer() && d.get<int64_t>() > 0) o.noise_shape.push_back(d.get<int64_t>());
        else return InvalidArgument(c.label() + ": noise_shape must be a list of positive integers or nulls, got " +
                                    ns->dump());
      }
    }
    layer = layers::Dropout(static_cast<float>(rate), o);
  } else if (cls == "Add") {
    layer = layers::Add(name);
  } else if (cls == "Concatenate") {
    SPEC_ASSIGN(int axis, c.Size("axis", -1));
    layer = layers::Concatenate(axis, name);
  } else if (cls == "Rescaling") {
    SPEC_ASSIGN(double scale, c.Number("scale", 1));
    SPEC_ASSIGN(double offset, c.Number("offset", 0));
    layer = layers::Rescaling(static_cast<float>(scale), static_cast<float>(offset), name);
  } else if (cls == "Reshape") {
    if (!config_json.contains("target_shape") || !config_json["target_shape"].is_array())
      return InvalidArgument(c.label() + ": needs target_shape");
    std::vector<int64_t> t = config_json["target_shape"].get<std::vector<int64_t>>();
    (void)c.String("target_shape", "");  // mark used
    layer = layers::Reshape(t, name);
  } else {
    return InvalidArgument(c.label() + ": unknown layer class \"" + cls + "\"");
  }
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
  for (const auto& spec : datasets::kBuiltinSpecs) {
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
