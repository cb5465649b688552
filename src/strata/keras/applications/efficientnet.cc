// EfficientNetB0 to B7 (Tan & Le 2019) as tf.keras builds them
// (keras.applications.efficientnet): a Rescaling(1/255) + Normalization stem, seven stages of
// MBConv blocks (1x1 expansion, depthwise k x k, squeeze-and-excitation, linear 1x1
// projection) with swish, drop-connect (Dropout with noise_shape (None, 1, 1, 1)) on the
// residuals and correct_pad zeros before every stride-2 depthwise convolution. B1-B7 scale
// B0's widths and depths by Keras's round_filters / round_repeats.
#include <algorithm>
#include <cmath>
#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// DEFAULT_BLOCKS_ARGS: `repeats` blocks "block<stage><a, b, ...>_", the first with `stride`
// and filters_in -> filters_out, the others filters_out -> filters_out (B0's; the others
// scale them).
struct Stage {
  int kernel, repeats, filters_in, filters_out, expand, stride;
};
constexpr Stage kStages[] = {{3, 1, 32, 16, 1, 1},  {3, 2, 16, 24, 6, 2},  {5, 2, 24, 40, 6, 2},  {3, 3, 40, 80, 6, 2},
                             {5, 3, 80, 112, 6, 1}, {5, 4, 112, 192, 6, 2}, {3, 1, 192, 320, 6, 1}};
constexpr double kSeRatio = 0.25;
constexpr double kDropConnect = 0.2;  // the last block's drop-connect rate; block b has 0.2 * b / blocks
constexpr int kStem = 32, kTop = 1280;

// Keras's EfficientNetB0..B7(width_coefficient, depth_coefficient, default_size, dropout_rate).
struct Scale {
  const char* function;
  const char* keras_name;
  double width, depth;
  int default_size;
  double dropout;
};
constexpr Scale kB0{"EfficientNetB0", "efficientnetb0", 1.0, 1.0, 224, 0.2};
constexpr Scale kB1{"EfficientNetB1", "efficientnetb1", 1.0, 1.1, 240, 0.2};
constexpr Scale kB2{"EfficientNetB2", "efficientnetb2", 1.1, 1.2, 260, 0.3};
constexpr Scale kB3{"EfficientNetB3", "efficientnetb3", 1.2, 1.4, 300, 0.3};
constexpr Scale kB4{"EfficientNetB4", "efficientnetb4", 1.4, 1.8, 380, 0.4};
constexpr Scale kB5{"EfficientNetB5", "efficientnetb5", 1.6, 2.2, 456, 0.4};
constexpr Scale kB6{"EfficientNetB6", "efficientnetb6", 1.8, 2.6, 528, 0.5};
constexpr Scale kB7{"EfficientNetB7", "efficientnetb7", 2.0, 3.1, 600, 0.5};

// Keras's round_filters: the width scaled, then _make_divisible.
int RoundFilters(int filters, double width) { return internal::MakeDivisible(filters * width); }
// Keras's CONV_KERNEL_INITIALIZER and DENSE_KERNEL_INITIALIZER, with Keras's fans.
constexpr const char* kConvInit = "variance_scaling(scale=2.0, mode=fan_out, distribution=truncated_normal)";
constexpr const char* kDenseInit = "variance_scaling(scale=0.3333333333333333, mode=fan_out, distribution=uniform)";

LayerPtr Conv(int filters, int kernel, const std::string& name) {
  return layers::Conv2D(filters, kernel,
                        {.padding = "same", .use_bias = false, .kernel_initializer = kConvInit, .name = name});
}

struct Features {
  KTensor x;
  int64_t height, width;
};

// Keras's block(): one MBConv block named `prefix` ("block2a_").
Features MBConv(const Features& in, const Stage& s, int filters_in, int filters_out, int stride, double drop_rate,
                const std::string& prefix) {
  const int filters = filters_in * s.expand;
  KTensor x = in.x;
  if (s.expand != 1) {
    x = Call(Conv(filters, 1, prefix + "expand_conv"), x);
    x = Call(layers::BatchNormalization({.name = prefix + "expand_bn"}), x);
    x = Call(layers::Activation("swish", prefix + "expand_activation"), x);
  }
  int64_t height = in.height, width = in.width;
  std::string padding = "same";
  if (stride == 2) {
    x = Call(layers::ZeroPadding2D(internal::CorrectPad(height, width, s.kernel, prefix + "dwconv_pad")), x);
    padding = "valid";
    height = (height + 1) / 2;  // correct_pad + k x k/2 "valid": ceil(size / 2) for either parity
    width = (width + 1) / 2;
  }
  x = Call(layers::DepthwiseConv2D(s.kernel, {.strides = stride, .padding = padding, .use_bias = false,
                                              .depthwise_initializer = kConvInit, .name = prefix + "dwconv"}),
           x);
  x = Call(layers::BatchNormalization({.name = prefix + "bn"}), x);
  x = Call(layers::Activation("swish", prefix + "activation"), x);
  // Squeeze and excitation: a per-channel gate from the pooled features.
  x = internal::EfficientNetSqueezeExcite(x, filters, std::max(1, static_cast<int>(filters_in * kSeRatio)), prefix,
                                          kConvInit);
  x = Call(Conv(filters_out, 1, prefix + "project_conv"), x);
  x = Call(layers::BatchNormalization({.name = prefix + "project_bn"}), x);
  if (stride == 1 && filters_in == filters_out) {
    if (drop_rate > 0)
      x = Call(layers::Dropout(static_cast<float>(drop_rate), layers::DropoutOptions{.noise_shape = {0, 1, 1, 1},
                                                                                    .name = prefix + "drop"}),
               x);
    x = Call(layers::Add(prefix + "add"), std::vector<KTensor>{x, in.x});
  }
  return {x, height, width};
}

Result<std::unique_ptr<Model>> Build(const Scale& scale, Options o) {
  const internal::ModelFacts facts{scale.function, scale.keras_name, scale.default_size, 32};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  // Keras leaves the stem's Rescaling and Normalization unnamed: these are the names it gives.
  KTensor x = Call(layers::Rescaling(1.0f / 255.0f, 0, "rescaling"), input);
  x = Call(layers::Normalization({.name = "normalization"}), x);
  x = Call(layers::ZeroPadding2D(internal::CorrectPad(input_shape[0], input_shape[1], 3, "stem_conv_pad")), x);
  x = Call(layers::Conv2D(RoundFilters(kStem, scale.width), 3,
                          {.strides = 2, .use_bias = false, .kernel_initializer = kConvInit, .name = "stem_conv"}),
           x);
  x = Call(layers::BatchNormalization({.name = "stem_bn"}), x);
  x = Call(layers::Activation("swish", "stem_activation"), x);
  Features f{x, (input_shape[0] + 1) / 2, (input_shape[1] + 1) / 2};
  int blocks = 0;
  for (const Stage& s : kStages) blocks += internal::RoundRepeats(s.repeats, scale.depth);
  int b = 0;
  for (size_t i = 0; i < std::size(kStages); ++i) {
    const Stage& s = kStages[i];
    const int filters_in = RoundFilters(s.filters_in, scale.width), filters_out = RoundFilters(s.filters_out, scale.width);
    for (int j = 0; j < internal::RoundRepeats(s.repeats, scale.depth); ++j, ++b) {
      const std::string prefix = "block" + std::to_string(i + 1) + static_cast<char>('a' + j) + "_";
      f = MBConv(f, s, j == 0 ? filters_in : filters_out, filters_out, j == 0 ? s.stride : 1,
                 kDropConnect * b / blocks, prefix);
    }
  }
  x = Call(Conv(RoundFilters(kTop, scale.width), 1, "top_conv"), f.x);
  x = Call(layers::BatchNormalization({.name = "top_bn"}), x);
  x = Call(layers::Activation("swish", "top_activation"), x);
  x = internal::Top(x, o, {.top_pool = "avg_pool", .avg_pool = "avg_pool", .max_pool = "max_pool",
                           .dropout = static_cast<float>(scale.dropout), .dropout_name = "top_dropout",
                           .classifier_initializer = kDenseInit});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> EfficientNetB0(Options o) { return Build(kB0, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB1(Options o) { return Build(kB1, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB2(Options o) { return Build(kB2, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB3(Options o) { return Build(kB3, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB4(Options o) { return Build(kB4, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB5(Options o) { return Build(kB5, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB6(Options o) { return Build(kB6, std::move(o)); }
Result<std::unique_ptr<Model>> EfficientNetB7(Options o) { return Build(kB7, std::move(o)); }

}  // namespace strata::keras::applications
