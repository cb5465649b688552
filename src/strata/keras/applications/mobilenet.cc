// MobileNet (Howard et al. 2017, "v1") at width alpha and depth multiplier, as tf.keras builds
// it (keras.applications.mobilenet): a 3x3 stride-2 stem, 13 depthwise-separable blocks
// (3x3 depthwise, 1x1 pointwise, each with batch norm and ReLU6; a stride-2 block pads the
// bottom and right by one first), and a top that convolves the pooled features: global
// average pooling kept 4-D, dropout, a 1x1 convolution to the classes, a reshape, the
// activation.
#include <cstdio>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// The pointwise filters and stride of blocks 1..13.
struct Block {
  int filters, stride;
};
constexpr Block kBlocks[] = {{64, 1},  {128, 2}, {128, 1}, {256, 2}, {256, 1}, {512, 2},  {512, 1},
                             {512, 1}, {512, 1}, {512, 1}, {512, 1}, {1024, 2}, {1024, 1}};
constexpr int kStem = 32;

LayerPtr Relu6(const std::string& name) { return layers::ReLU(layers::ReLUOptions{.max_value = 6, .name = name}); }

// Keras's _depthwise_conv_block "conv_{dw,pw}_<id>".
KTensor SeparableBlock(const KTensor& in, int filters, int stride, int depth_multiplier, int id) {
  const std::string dw = "conv_dw_" + std::to_string(id), pw = "conv_pw_" + std::to_string(id);
  KTensor x = in;
  if (stride == 2)
    x = Call(layers::ZeroPadding2D({.top = 0, .bottom = 1, .left = 0, .right = 1, .name = "conv_pad_" + std::to_string(id)}),
             x);
  x = Call(layers::DepthwiseConv2D(3, {.strides = stride, .padding = stride == 1 ? "same" : "valid",
                                       .depth_multiplier = depth_multiplier, .use_bias = false, .name = dw}),
           x);
  x = Call(layers::BatchNormalization({.name = dw + "_bn"}), x);
  x = Call(Relu6(dw + "_relu"), x);
  x = Call(layers::Conv2D(filters, 1, {.padding = "same", .use_bias = false, .name = pw}), x);
  x = Call(layers::BatchNormalization({.name = pw + "_bn"}), x);
  return Call(Relu6(pw + "_relu"), x);
}

}  // namespace

Result<std::unique_ptr<Model>> MobileNet(Options o) {
  const internal::ModelFacts facts{"MobileNet", "mobilenet", 224, 32, /*takes_alpha=*/true,
                                   /*takes_depth_multiplier=*/true};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  if (!(o.dropout >= 0 && o.dropout < 1))
    return InvalidArgument("MobileNet: dropout must be in [0, 1), got " + std::to_string(o.dropout));
  const double alpha = o.alpha;
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = Call(layers::Conv2D(static_cast<int>(kStem * alpha), 3,
                                  {.strides = 2, .padding = "same", .use_bias = false, .name = "conv1"}),
                   input);
  x = Call(layers::BatchNormalization({.name = "conv1_bn"}), x);
  x = Call(Relu6("conv1_relu"), x);
  int id = 1;
  for (const Block& b : kBlocks) x = SeparableBlock(x, static_cast<int>(b.filters * alpha), b.stride, o.depth_multiplier, id++);
  if (o.include_top) {
    x = Call(layers::GlobalAveragePooling2D(layers::GlobalPool2DOptions{.keepdims = true, .name = "global_average_pooling2d"}), x);
    x = Call(layers::Dropout(static_cast<float>(o.dropout), "dropout"), x);
    x = Call(layers::Conv2D(o.classes, 1, {.padding = "same", .name = "conv_preds"}), x);
    x = Call(layers::Reshape({o.classes}, "reshape_2"), x);
    x = Call(layers::Activation(internal::ClassifierActivation(o), "predictions"), x);
  } else {
    x = internal::Top(x, o, {.avg_pool = "global_average_pooling2d", .max_pool = "global_max_pooling2d"});
  }
  char name[48];
  std::snprintf(name, sizeof name, "mobilenet_%0.2f_%lld", alpha, static_cast<long long>(input_shape[0]));
  return internal::Finish(input, x, o, name);
}

}  // namespace strata::keras::applications
