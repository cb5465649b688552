// MobileNetV2 (Sandler et al. 2018) at any width alpha, as Keras builds it
// (keras.applications.mobilenet_v2): inverted residual blocks (1x1 expansion, 3x3 depthwise,
// linear 1x1 projection) with ReLU(6.), batch norm epsilon 1e-3 and momentum 0.999, and
// correct_pad zeros before every stride-2 depthwise convolution.
#include <cstdio>
#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// The paper's table 2: n blocks of expansion t and c output channels, the first with stride s.
struct Stage {
  int t, c, n, s;
};
constexpr Stage kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
constexpr int kStem = 32, kLast = 1280;  // before alpha scales them

LayerPtr Bn(const std::string& name) { return layers::BatchNormalization({.momentum = 0.999f, .epsilon = 1e-3f, .name = name}); }
LayerPtr Relu6(const std::string& name) { return layers::ReLU(layers::ReLUOptions{.max_value = 6, .name = name}); }

// What the blocks track of their input: the tensor, its channels and spatial size (correct_pad
// depends on the size's parity).
struct Features {
  KTensor x;
  int64_t channels, height, width;
};

// Keras's _inverted_res_block: "block_<id>_..." ("expanded_conv_..." for block 0, which has
// no expansion).
Features InvertedResidual(const Features& in, int expansion, int stride, int filters, int id) {
  std::string prefix = "block_" + std::to_string(id) + "_";
  KTensor x = in.x;
  if (id > 0) {
    x = Call(layers::Conv2D(static_cast<int>(expansion * in.channels), 1,
                            {.padding = "same", .use_bias = false, .name = prefix + "expand"}),
             x);
    x = Call(Bn(prefix + "expand_BN"), x);
    x = Call(Relu6(prefix + "expand_relu"), x);
  } else {
    prefix = "expanded_conv_";
  }
  int64_t height = in.height, width = in.width;
  if (stride == 2) {
    x = Call(layers::ZeroPadding2D(internal::CorrectPad(height, width, 3, prefix + "pad")), x);
    height = (height + 1) / 2;  // correct_pad + 3x3/2 "valid": ceil(size / 2) for either parity
    width = (width + 1) / 2;
  }
  x = Call(layers::DepthwiseConv2D(3, {.strides = stride, .padding = stride == 1 ? "same" : "valid", .use_bias = false,
                                       .name = prefix + "depthwise"}),
           x);
  x = Call(Bn(prefix + "depthwise_BN"), x);
  x = Call(Relu6(prefix + "depthwise_relu"), x);
  x = Call(layers::Conv2D(filters, 1, {.padding = "same", .use_bias = false, .name = prefix + "project"}), x);
  x = Call(Bn(prefix + "project_BN"), x);
  if (in.channels == filters && stride == 1) x = Call(layers::Add(prefix + "add"), std::vector<KTensor>{in.x, x});
  return {x, filters, height, width};
}

}  // namespace

Result<std::unique_ptr<Model>> MobileNetV2(Options o) {
  const internal::ModelFacts facts{"MobileNetV2", "mobilenetv2", 224, 32, /*takes_alpha=*/true};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  const double alpha = o.alpha;
  KTensor input = internal::ImageInput(o, input_shape);
  // tf.keras's stem convolution pads "same" itself (keras_applications 1.0.8 had Conv1_pad).
  const int stem = internal::MakeDivisible(kStem * alpha);
  KTensor x = Call(layers::Conv2D(stem, 3, {.strides = 2, .padding = "same", .use_bias = false, .name = "Conv1"}), input);
  x = Call(Bn("bn_Conv1"), x);
  x = Call(Relu6("Conv1_relu"), x);
  Features f{x, stem, (input_shape[0] + 1) / 2, (input_shape[1] + 1) / 2};
  int id = 0;
  for (const Stage& s : kStages)
    for (int i = 0; i < s.n; ++i)
      f = InvertedResidual(f, s.t, i == 0 ? s.s : 1, internal::MakeDivisible(static_cast<int>(s.c * alpha)), id++);
  // Wider than 1.0, the last convolution widens too.
  const int last = alpha > 1.0 ? internal::MakeDivisible(kLast * alpha) : kLast;
  x = Call(layers::Conv2D(last, 1, {.use_bias = false, .name = "Conv_1"}), f.x);
  x = Call(Bn("Conv_1_bn"), x);
  x = Call(Relu6("out_relu"), x);
  x = internal::Top(x, o, {});
  // Keras names the model after alpha and the input rows it has weights for (else 224).
  const int64_t rows = input_shape[0];
  const bool weights_size = rows == input_shape[1] && (rows == 96 || rows == 128 || rows == 160 || rows == 192 || rows == 224);
  char name[48];
  std::snprintf(name, sizeof name, "mobilenetv2_%0.2f_%lld", alpha, static_cast<long long>(weights_size ? rows : 224));
  return internal::Finish(input, x, o, name);
}

}  // namespace strata::keras::applications
