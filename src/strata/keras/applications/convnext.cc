// ConvNeXtTiny to ConvNeXtXLarge (Liu et al. 2022) as Keras builds them
// (keras.applications.convnext): a Normalization with ImageNet's mean and variance (the
// "prestem", include_preprocessing), a 4x4/4 stem with layer normalization, four stages of
// ConvNeXt blocks (7x7 depthwise, layer normalization, Dense 4C, GELU, Dense C, LayerScale,
// stochastic depth, residual add) with a layer normalization and a 2x2/2 convolution between
// stages, and a pooled, layer-normalized head.
//
// Keras wraps the stem and each downsampling pair in a nested Sequential
// ("convnext_tiny_stem", "convnext_tiny_downsampling_block_0"); here their layers stand in the
// model itself under the same names, and the weight files' nested groups load into them
// (keras/h5_weights.cc). Keras's residual sum is an unnamed operator layer; here it is an Add
// named "<block>_add".
#include <string>
#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

struct Config {
  const char* function;
  const char* keras_name;
  int depths[4];
  int dims[4];
};
constexpr Config kTiny{"ConvNeXtTiny", "convnext_tiny", {3, 3, 9, 3}, {96, 192, 384, 768}};
constexpr Config kSmall{"ConvNeXtSmall", "convnext_small", {3, 3, 27, 3}, {96, 192, 384, 768}};
constexpr Config kBase{"ConvNeXtBase", "convnext_base", {3, 3, 27, 3}, {128, 256, 512, 1024}};
constexpr Config kLarge{"ConvNeXtLarge", "convnext_large", {3, 3, 27, 3}, {192, 384, 768, 1536}};
constexpr Config kXLarge{"ConvNeXtXLarge", "convnext_xlarge", {3, 3, 27, 3}, {256, 512, 1024, 2048}};

constexpr float kEpsilon = 1e-6f;          // every layer normalization's
constexpr float kLayerScaleInit = 1e-6f;   // Keras's layer_scale_init_value
// Keras's ConvNeXt* functions pass drop_path_rate=0.0: no StochasticDepth layer, an identity
// Activation named "<block>_identity" instead.

// Keras's PreStem constants, computed in double as Python does, then stored as float32.
float Pixels(double v) { return static_cast<float>(v * 255); }
float Squared(double sd) { return static_cast<float>((sd * 255) * (sd * 255)); }

LayerPtr Norm(const std::string& name) { return layers::LayerNormalization({.epsilon = kEpsilon, .name = name}); }

KTensor Block(const KTensor& in, int dim, const std::string& name) {
  KTensor x = Call(layers::Conv2D(dim, 7, {.padding = "same", .groups = dim, .name = name + "_depthwise_conv"}), in);
  x = Call(Norm(name + "_layernorm"), x);
  x = Call(layers::Dense(4 * dim, {.name = name + "_pointwise_conv_1"}), x);
  x = Call(layers::Activation("gelu", name + "_gelu"), x);
  x = Call(layers::Dense(dim, {.name = name + "_pointwise_conv_2"}), x);
  x = Call(layers::LayerScale(kLayerScaleInit, dim, name + "_layer_scale"), x);
  x = Call(layers::Activation("linear", name + "_identity"), x);
  return Call(layers::Add(name + "_add"), std::vector<KTensor>{in, x});
}

Result<std::unique_ptr<Model>> Build(const Config& c, Options o) {
  const internal::ModelFacts facts{.function = c.function, .keras_name = c.keras_name, .takes_preprocessing = true};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  // Keras's model_name (Keras 3's name) is also every layer's prefix.
  const std::string m = o.name.empty() ? c.keras_name : o.name;
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = input;
  // ImageNet's per-channel mean and variance in [0, 255] pixels (Keras's PreStem), for 3 channels.
  if (o.include_preprocessing && input_shape[2] == 3)
    x = Call(layers::Normalization({.mean = {Pixels(0.485), Pixels(0.456), Pixels(0.406)},
                                    .variance = {Squared(0.229), Squared(0.224), Squared(0.225)},
                                    .name = m + "_prestem_normalization"}),
             x);
  x = Call(layers::Conv2D(c.dims[0], 4, {.strides = 4, .name = m + "_stem_conv"}), x);
  x = Call(Norm(m + "_stem_layernorm"), x);
  for (int stage = 0; stage < 4; ++stage) {
    if (stage > 0) {
      const std::string i = std::to_string(stage - 1);
      x = Call(Norm(m + "_downsampling_layernorm_" + i), x);
      x = Call(layers::Conv2D(c.dims[stage], 2, {.strides = 2, .name = m + "_downsampling_conv_" + i}), x);
    }
    for (int j = 0; j < c.depths[stage]; ++j)
      x = Block(x, c.dims[stage], m + "_stage_" + std::to_string(stage) + "_block_" + std::to_string(j));
  }
  if (o.include_top) {
    x = Call(layers::GlobalAveragePooling2D(m + "_head_gap"), x);
    x = Call(Norm(m + "_head_layernorm"), x);
    x = Call(layers::Dense(o.classes, {.activation = internal::ClassifierActivation(o), .name = m + "_head_dense"}), x);
  } else {
    // Keras's no-top model pools (or not) and always ends in an unnamed layer normalization.
    if (o.pooling == "avg") x = Call(layers::GlobalAveragePooling2D("global_average_pooling2d"), x);
    if (o.pooling == "max") x = Call(layers::GlobalMaxPooling2D("global_max_pooling2d"), x);
    x = Call(Norm("layer_normalization"), x);
  }
  return internal::Finish(input, x, o, m);
}

}  // namespace

Result<std::unique_ptr<Model>> ConvNeXtTiny(Options o) { return Build(kTiny, std::move(o)); }
Result<std::unique_ptr<Model>> ConvNeXtSmall(Options o) { return Build(kSmall, std::move(o)); }
Result<std::unique_ptr<Model>> ConvNeXtBase(Options o) { return Build(kBase, std::move(o)); }
Result<std::unique_ptr<Model>> ConvNeXtLarge(Options o) { return Build(kLarge, std::move(o)); }
Result<std::unique_ptr<Model>> ConvNeXtXLarge(Options o) { return Build(kXLarge, std::move(o)); }

}  // namespace strata::keras::applications
