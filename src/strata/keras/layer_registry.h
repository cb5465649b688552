// Every layer class a Keras config can name, by its Keras class name: one entry per class,
// written beside the layer itself (layers_core.cc, layers_conv.cc, layers_normalization.cc,
// layers_merge.cc hold each family's classes, options, from-config functions and entries).
// The model spec parser (spec.cc), LayerFromConfig and Python's strata.keras.layers build
// layers through it, and a test checks the Python classes' keywords against ConfigKeys.
// Internal: no JSON type appears here (LayerConfig is declared in layer_config.h).
#pragma once

#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/keras/layer.h"

namespace strata::keras {

class LayerConfig;

struct LayerClass {
  std::string name;  // Keras's class name: "Conv2D"; an alias ("MaxPool2D") is an entry of its own
  // Builds the layer from its config, reading each key it understands through `config`;
  // the caller then refuses any key left unread (LayerConfig::CheckAllUsed).
  Result<LayerPtr> (*from_config)(LayerConfig& config, const std::string& name);
};

// Every class, family by family.
const std::vector<LayerClass>& LayerClasses();
// The class named `name`, or null.
const LayerClass* FindLayerClass(const std::string& name);
// The get_config keys `cls` reads (sorted): what its from-config function asks of a config.
std::vector<std::string> ConfigKeys(const LayerClass& cls);
// Keys Keras writes that Strata accepts and does not read ("name", "trainable", "dtype", ...).
std::vector<std::string> IgnoredConfigKeys();

// Each family's entries (defined in its layers_*.cc).
std::vector<LayerClass> CoreLayerClasses();
std::vector<LayerClass> AttentionLayerClasses();  // layers_attention.cc
std::vector<LayerClass> ConvLayerClasses();
std::vector<LayerClass> NormalizationLayerClasses();
std::vector<LayerClass> MergeLayerClasses();

}  // namespace strata::keras
