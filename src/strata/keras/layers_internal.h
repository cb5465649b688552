// What the layer families (layers_core.cc, layers_conv.cc, layers_normalization.cc,
// layers_merge.cc, layers_attention.cc) share: padding and activation names, Keras's initializers with their fans,
// and making a named layer. Defined in layers.cc. Internal.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "strata/keras/layer_config.h"
#include "strata/keras/layers.h"

namespace strata::keras::layers {

// "valid" or "same"; anything else is an error naming `label`.
Result<graph::Padding> ParsePadding(const std::string& padding, const std::string& label);
// Applies a Keras activation by name ("softmax" and "hard_sigmoid" included).
Result<graph::Value> ApplyActivation(graph::Graph& g, const std::string& activation, graph::Value x,
                                     const std::string& name);
// A Keras initializer by name, the variance-scaling family with Keras's fans
// (fan_in / fan_out of the kernel in Keras's own layout).
Result<graph::VariableOptions> InitOptions(const std::string& initializer, double fan_in = 1, double fan_out = 1);

// The bias and activation after a Dense's or a Conv2D's kernel: a bias of `units` (Keras's
// fans for its initializer) when `use_bias`, then the activation by name.
Result<graph::Value> BiasAndActivation(BuildContext& ctx, const std::string& layer, graph::Value y, int64_t units,
                                       bool use_bias, const std::string& bias_initializer, const std::string& activation);

// The seed of a dropout layer's masks: the layer's own `seed` (0: the model's), the replica and
// the layer's name, so every dropout draws its own masks and the same ones each run.
uint64_t DropoutSeed(const BuildContext& ctx, const std::string& name, uint64_t seed);

// The Keras arguments a Dense and a Conv2D share, read from their config.
template <typename Options>
Status ReadKernelArgs(LayerConfig& c, Options* o) {
  STRATA_ASSIGN_OR_RETURN(o->activation, c.String("activation", "linear"));
  STRATA_ASSIGN_OR_RETURN(o->use_bias, c.Bool("use_bias", true));
  STRATA_ASSIGN_OR_RETURN(o->kernel_initializer, c.String("kernel_initializer", "glorot_uniform"));
  STRATA_ASSIGN_OR_RETURN(o->bias_initializer, c.String("bias_initializer", "zeros"));
  STRATA_ASSIGN_OR_RETURN(o->kernel_regularizer_l2, c.L2("kernel_regularizer"));
  return Status::OK();
}

template <typename T, typename... Args>
LayerPtr Named(const std::string& name, Args&&... args) {
  auto l = std::make_shared<T>(std::forward<Args>(args)...);
  l->set_name(name);
  return l;
}

}  // namespace strata::keras::layers
