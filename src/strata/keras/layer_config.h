// A layer's Keras config (its get_config() dict, as JSON) read with Keras's conventions: sizes
// as an int or [k, k], initializers and activations as a name or {"class_name": ...}, L2
// regularizers; every key read is recorded, so an argument nobody reads is an error naming
// the layer instead of silently ignored. Internal (nlohmann): each layer family's
// from-config function (layers_*.cc) reads its layers' keys through it; layer_registry.h
// lists those functions by class name.
#pragma once

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "strata/core/status.h"

namespace strata::keras {

class LayerConfig {
 public:
  LayerConfig(const nlohmann::json& j, std::string label) : j_(j), label_(std::move(label)) {}
  const std::string& label() const { return label_; }

  Result<int> Size(const std::string& key, int fallback) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return fallback;
    const nlohmann::json& v = j_[key];
    if (v.is_number_integer()) return v.get<int>();
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
      for (const auto& x : v)
        if (!x.is_number_integer() || x.get<int>() != v[0].get<int>())
          return Unimplemented(label_ + ": " + key + " " + v.dump() + ": only square sizes are supported");
      return v[0].get<int>();
    }
    return InvalidArgument(label_ + ": " + key + " must be an integer or [k, k], got " + v.dump());
  }
  // An int (square) or [height, width]: Conv2D's kernel_size.
  Result<std::pair<int, int>> Size2(const std::string& key, int fallback) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return std::pair<int, int>{fallback, fallback};
    const nlohmann::json& v = j_[key];
    if (v.is_number_integer()) return std::pair<int, int>{v.get<int>(), v.get<int>()};
    if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer())
      return std::pair<int, int>{v[0].get<int>(), v[1].get<int>()};
    return InvalidArgument(label_ + ": " + key + " must be an integer or [height, width], got " + v.dump());
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
    const nlohmann::json& v = j_[key];
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
        const nlohmann::json& cfg = v["config"];
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
    const nlohmann::json& v = j_[key];
    if (v.is_number()) return v.get<float>();
    if (v.is_object() && v.contains("config") && v["config"].contains("l2")) return v["config"]["l2"].get<float>();
    return InvalidArgument(label_ + ": " + key + ": only L2 regularizers are supported, got " + v.dump());
  }
  // The raw JSON of `key` (nullptr: absent or null), marked used; the caller checks its form.
  const nlohmann::json* Raw(const std::string& key) {
    used_.insert(key);
    if (!j_.contains(key) || j_[key].is_null()) return nullptr;
    return &j_[key];
  }
  // The keys read so far, in order of name.
  const std::set<std::string>& used() const { return used_; }
  // Keys Keras writes that carry no meaning here: accepted and not read.
  static const std::set<std::string>& Ignored();
  Status CheckAllUsed() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!used_.count(it.key()) && !Ignored().count(it.key()))
        return InvalidArgument(label_ + ": unknown argument \"" + it.key() + "\"");
    }
    return Status::OK();
  }

 private:
  const nlohmann::json& j_;
  std::string label_;
  std::set<std::string> used_;
};

}  // namespace strata::keras
