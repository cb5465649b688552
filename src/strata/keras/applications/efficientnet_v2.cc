// EfficientNetV2B0 to B3, S, M and L (Tan & Le 2021) as Keras builds them
// (keras.applications.efficientnet_v2): the preprocessing (include_preprocessing: the B models'
// Rescaling(1/255) and ImageNet Normalization, S/M/L's Rescaling(1/128, -1)), a 3x3/2 "same"
// stem, stages of fused MBConv blocks (a k x k expansion convolution in place of the 1x1 +
// depthwise pair, no squeeze-and-excitation) and then MBConv blocks, swish, batch norm momentum
// 0.9 and epsilon 1e-3, drop-connect on the residuals, a 1x1 top convolution and Keras's top.
// Unlike EfficientNet (V1), every stride-2 convolution pads "same" itself.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// DEFAULT_BLOCKS_ARGS: `repeats` blocks "block<stage><a, b, ...>_", the first with `stride` and
// filters_in -> filters_out, the others filters_out -> filters_out; all 3x3.
struct Stage {
  bool fused;
  int repeats, filters_in, filters_out, expand, stride;
  double se_ratio;
};
using Stages = std::vector<Stage>;
const Stages kB = {{true, 1, 32, 16, 1, 1, 0},      {true, 2, 16, 32, 4, 2, 0},      {true, 2, 32, 48, 4, 2, 0},
                   {false, 3, 48, 96, 4, 2, 0.25},  {false, 5, 96, 112, 6, 1, 0.25}, {false, 8, 112, 192, 6, 2, 0.25}};
const Stages kS = {{true, 2, 24, 24, 1, 1, 0},       {true, 4, 24, 48, 4, 2, 0},       {true, 4, 48, 64, 4, 2, 0},
                   {false, 6, 64, 128, 4, 2, 0.25},  {false, 9, 128, 160, 6, 1, 0.25}, {false, 15, 160, 256, 6, 2, 0.25}};
const Stages kM = {{true, 3, 24, 24, 1, 1, 0},        {true, 5, 24, 48, 4, 2, 0},
                   {true, 5, 48, 80, 4, 2, 0},        {false, 7, 80, 160, 4, 2, 0.25},
                   {false, 14, 160, 176, 6, 1, 0.25}, {false, 18, 176, 304, 6, 2, 0.25},
                   {false, 5, 304, 512, 6, 1, 0.25}};
const Stages kL = {{true, 4, 32, 32, 1, 1, 0},        {true, 7, 32, 64, 4, 2, 0},
                   {true, 7, 64, 96, 4, 2, 0},        {false, 10, 96, 192, 4, 2, 0.25},
                   {false, 19, 192, 224, 6, 1, 0.25}, {false, 25, 224, 384, 6, 2, 0.25},
                   {false, 7, 384, 640, 6, 1, 0.25}};
constexpr double kDropConnect = 0.2;  // block b's drop-connect rate is 0.2 * b / blocks
constexpr double kTopDropout = 0.2;
constexpr int kTop = 1280;

struct Variant {
  const char* function;
  const char* keras_name;
  const Stages* stages;
  double width, depth;
  int default_size;
  bool imagenet_normalization;  // the B models' Rescaling(1/255) + Normalization, else Rescaling(1/128, -1)
};
const Variant kB0{"EfficientNetV2B0", "efficientnetv2-b0", &kB, 1.0, 1.0, 224, true};
const Variant kB1{"EfficientNetV2B1", "efficientnetv2-b1", &kB, 1.0, 1.1, 240, true};
const Variant kB2{"EfficientNetV2B2", "efficientnetv2-b2", &kB, 1.1, 1.2, 260, true};
const Variant kB3{"EfficientNetV2B3", "efficientnetv2-b3", &kB, 1.2, 1.4, 300, true};
const Variant kSVariant{"EfficientNetV2S", "efficientnetv2-s", &kS, 1.0, 1.0, 384, false};
const Variant kMVariant{"EfficientNetV2M", "efficientnetv2-m", &kM, 1.0, 1.0, 480, false};
const Variant kLVariant{"EfficientNetV2L", "efficientnetv2-l", &kL, 1.0, 1.0, 480, false};

// Keras's round_filters of efficientnet_v2.py: the width scaled and rounded to a multiple of 8,
// at least 8 (without V1's _make_divisible rule of not going 10 % below).
int RoundFilters(int filters, double width) {
  const double scaled = filters * width;
  return std::max(8, static_cast<int>(scaled + 4) / 8 * 8);
}
constexpr const char* kConvInit = "variance_scaling(scale=2.0, mode=fan_out, distribution=truncated_normal)";
constexpr const char* kDenseInit = "variance_scaling(scale=0.3333333333333333, mode=fan_out, distribution=uniform)";

LayerPtr Conv(int filters, int kernel, const std::string& name, int strides = 1) {
  return layers::Conv2D(filters, kernel, {.strides = strides, .padding = "same", .use_bias = false,
                                          .kernel_initializer = kConvInit, .name = name});
}
LayerPtr Bn(const std::string& name) { return layers::BatchNormalization({.momentum = 0.9f, .name = name}); }
KTensor Swish(const KTensor& x, const std::string& name) { return Call(layers::Activation("swish", name), x); }

// Keras's MBConvBlock and FusedMBConvBlock, named `prefix` ("block4a_").
KTensor Block(const KTensor& in, const Stage& s, int filters_in, int filters_out, int stride, double drop_rate,
              const std::string& prefix) {
  const int filters = filters_in * s.expand;
  KTensor x = in;
  if (s.expand != 1) {  // fused: the k x k expansion does the stride
    x = Call(Conv(filters, s.fused ? 3 : 1, prefix + "expand_conv", s.fused ? stride : 1), x);
    x = Swish(Call(Bn(prefix + "expand_bn"), x), prefix + "expand_activation");
  }
  if (!s.fused) {
    x = Call(layers::DepthwiseConv2D(3, {.strides = stride, .padding = "same", .use_bias = false,
                                         .depthwise_initializer = kConvInit, .name = prefix + "dwconv2"}),
             x);
    x = Swish(Call(Bn(prefix + "bn"), x), prefix + "activation");
  }
  if (s.se_ratio > 0)  // squeezed to the block input's se_ratio
    x = internal::EfficientNetSqueezeExcite(x, filters, std::max(1, static_cast<int>(filters_in * s.se_ratio)), prefix,
                                            kConvInit);
  // A fused block without expansion is one k x k convolution (with the stride and swish).
  const bool alone = s.fused && s.expand == 1;
  x = Call(Conv(filters_out, alone ? 3 : 1, prefix + "project_conv", alone ? stride : 1), x);
  x = Call(Bn(prefix + "project_bn"), x);
  if (alone) x = Swish(x, prefix + "project_activation");
  if (stride == 1 && filters_in == filters_out) {
    if (drop_rate > 0)  // Keras's `if survival_probability:` (its name for the drop rate)
      x = Call(layers::Dropout(static_cast<float>(drop_rate), layers::DropoutOptions{.noise_shape = {0, 1, 1, 1},
                                                                                    .name = prefix + "drop"}),
               x);
    x = Call(layers::Add(prefix + "add"), std::vector<KTensor>{x, in});
  }
  return x;
}

Result<std::unique_ptr<Model>> Build(const Variant& v, Options o) {
  const internal::ModelFacts facts{.function = v.function, .keras_name = v.keras_name, .default_size = v.default_size,
                                   .takes_preprocessing = true};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  const Stages& stages = *v.stages;
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = input;
  // Keras leaves these unnamed; the B models' ImageNet normalization needs 3 channels.
  if (o.include_preprocessing && v.imagenet_normalization && input_shape[2] == 3) {
    x = Call(layers::Rescaling(1.0f / 255.0f, 0, "rescaling"), x);
    x = Call(layers::Normalization({.mean = {0.485f, 0.456f, 0.406f},
                                    .variance = {static_cast<float>(0.229 * 0.229), static_cast<float>(0.224 * 0.224),
                                                 static_cast<float>(0.225 * 0.225)},
                                    .name = "normalization"}),
             x);
  } else if (o.include_preprocessing) {
    x = Call(layers::Rescaling(1.0f / 128.0f, -1.0f, "rescaling"), x);
  }
  x = Call(Conv(RoundFilters(stages[0].filters_in, v.width), 3, "stem_conv", 2), x);
  x = Swish(Call(Bn("stem_bn"), x), "stem_activation");
  int blocks = 0;
  for (const Stage& s : stages) blocks += s.repeats;  // Keras counts the unscaled repeats
  int b = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    const int filters_in = RoundFilters(s.filters_in, v.width), filters_out = RoundFilters(s.filters_out, v.width);
    for (int j = 0; j < internal::RoundRepeats(s.repeats, v.depth); ++j, ++b) {
      const std::string prefix = "block" + std::to_string(i + 1) + static_cast<char>('a' + j) + "_";
      x = Block(x, s, j == 0 ? filters_in : filters_out, filters_out, j == 0 ? s.stride : 1, kDropConnect * b / blocks,
                prefix);
    }
  }
  x = Call(Conv(RoundFilters(kTop, v.width), 1, "top_conv"), x);
  x = Swish(Call(Bn("top_bn"), x), "top_activation");
  x = internal::Top(x, o, {.top_pool = "avg_pool", .avg_pool = "avg_pool", .max_pool = "max_pool",
                           .dropout = static_cast<float>(kTopDropout), .dropout_name = "top_dropout",
                           .classifier_initializer = kDenseInit});
  return internal::Finish(input, x, o, v.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> EfficientNetV2B0(Options o) { return Build(kB0, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetV2B1(Options o) { return Build(kB1, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetV2B2(Options o) { return Build(kB2, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetV2B3(Options o) { return Build(kB3, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetV2S(Options o) { return Build(kSVariant, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetV2M(Options o) { return Build(kMVariant, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetV2L(Options o) { return Build(kLVariant, std::move(o)); }

}  // namespace strata::keras::applications
