#include "strata/keras/layer_registry.h"

#include <nlohmann/json.hpp>

#include "strata/keras/layer_config.h"

namespace strata::keras {

const std::set<std::string>& LayerConfig::Ignored() {
  static const std::set<std::string> kIgnored = {"name", "trainable", "dtype", "data_format", "batch_input_shape",
                                                 "sparse", "ragged", "input_shape", "kernel_constraint",
                                                 "bias_constraint", "activity_regularizer", "bias_regularizer",
                                                 "beta_initializer", "gamma_initializer",
                                                 "moving_mean_initializer", "moving_variance_initializer",
                                                 "beta_regularizer", "gamma_regularizer", "beta_constraint",
                                                 "gamma_constraint", "synchronized", "keepdims"};
  return kIgnored;
}

const std::vector<LayerClass>& LayerClasses() {
  static const std::vector<LayerClass> kAll = [] {
    std::vector<LayerClass> all;
    for (auto family : {CoreLayerClasses, ConvLayerClasses, NormalizationLayerClasses, MergeLayerClasses,
                        AttentionLayerClasses})
      for (LayerClass& c : family()) all.push_back(std::move(c));
    return all;
  }();
  return kAll;
}

const LayerClass* FindLayerClass(const std::string& name) {
  for (const LayerClass& c : LayerClasses())
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<std::string> ConfigKeys(const LayerClass& cls) {
  // An empty config: every from-config function reads each key it knows, taking the default
  // where the key is absent (a required one may then fail, after it was read).
  const nlohmann::json empty = nlohmann::json::object();
  LayerConfig config(empty, "probe (" + cls.name + ")");
  (void)cls.from_config(config, "probe");
  return {config.used().begin(), config.used().end()};
}

std::vector<std::string> IgnoredConfigKeys() {
  return {LayerConfig::Ignored().begin(), LayerConfig::Ignored().end()};
}

}  // namespace strata::keras
