// ResNet (He et al. 2015, "v1": the stride on the first 1x1 convolution) and ResNetV2 (He et
// al. 2016: pre-activation, the stride on the last block's 3x3) as Keras builds them
// (keras.applications.resnet, .resnet_v2): a 7x7 stem, four stacks of bottleneck blocks, batch
// norm epsilon 1.001e-5 throughout. The depths differ only in the number of blocks per stack.
#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// One stack of bottleneck blocks "<name>_block<i>": 1x1 (filters) -> 3x3 (filters) -> 1x1
// (4 * filters).
struct Stack {
  const char* name;
  int filters;
};
constexpr Stack kStacks[] = {{"conv2", 64}, {"conv3", 128}, {"conv4", 256}, {"conv5", 512}};
constexpr float kEpsilon = 1.001e-5f;

struct Depth {
  const char* function;  // Keras's function: "ResNet101"
  const char* keras_name;
  int blocks[4];  // per stack
};
constexpr Depth kResNet50{"ResNet50", "resnet50", {3, 4, 6, 3}};
constexpr Depth kResNet101{"ResNet101", "resnet101", {3, 4, 23, 3}};
constexpr Depth kResNet152{"ResNet152", "resnet152", {3, 8, 36, 3}};
constexpr Depth kResNet50V2{"ResNet50V2", "resnet50v2", {3, 4, 6, 3}};
constexpr Depth kResNet101V2{"ResNet101V2", "resnet101v2", {3, 4, 23, 3}};
constexpr Depth kResNet152V2{"ResNet152V2", "resnet152v2", {3, 8, 36, 3}};

LayerPtr Bn(const std::string& name) { return layers::BatchNormalization({.epsilon = kEpsilon, .name = name}); }
LayerPtr Relu(const std::string& name) { return layers::Activation("relu", name); }

KTensor ConvBn(const KTensor& x, int filters, int kernel, int stride, const std::string& name, const char* padding = "valid") {
  KTensor y = Call(layers::Conv2D(filters, kernel, {.strides = stride, .padding = padding, .name = name + "_conv"}), x);
  return Call(Bn(name + "_bn"), y);
}

// Keras's block1: the first block of a stack has a 1x1 convolution on its shortcut and the
// stack's stride (on its first 1x1).
KTensor Bottleneck(const KTensor& x, int filters, int stride, bool conv_shortcut, const std::string& name) {
  const KTensor shortcut = conv_shortcut ? ConvBn(x, 4 * filters, 1, stride, name + "_0") : x;
  KTensor y = ConvBn(x, filters, 1, stride, name + "_1");
  y = Call(Relu(name + "_1_relu"), y);
  y = ConvBn(y, filters, 3, 1, name + "_2", "same");
  y = Call(Relu(name + "_2_relu"), y);
  y = ConvBn(y, 4 * filters, 1, 1, name + "_3");
  y = Call(layers::Add(name + "_add"), std::vector<KTensor>{shortcut, y});
  return Call(Relu(name + "_out"), y);
}

// Keras's block2 (v2): batch norm and ReLU before the block ("preact"), read by the 1x1
// shortcut convolution of a stack's first block and by the residual branch; other blocks
// pass their input on, through a 1x1 max pool (Keras leaves it unnamed) where they stride.
KTensor PreactBottleneck(const KTensor& x, int filters, int stride, bool conv_shortcut, const std::string& name,
                         int* pool_count) {
  KTensor preact = Call(Bn(name + "_preact_bn"), x);
  preact = Call(Relu(name + "_preact_relu"), preact);
  KTensor shortcut = x;
  if (conv_shortcut) {
    shortcut = Call(layers::Conv2D(4 * filters, 1, {.strides = stride, .name = name + "_0_conv"}), preact);
  } else if (stride > 1) {
    shortcut = Call(layers::MaxPooling2D({.pool_size = 1, .strides = stride,
                                          .name = internal::AutoName("max_pooling2d", (*pool_count)++)}),
                    x);
  }
  KTensor y = Call(layers::Conv2D(filters, 1, {.use_bias = false, .name = name + "_1_conv"}), preact);
  y = Call(Bn(name + "_1_bn"), y);
  y = Call(Relu(name + "_1_relu"), y);
  y = Call(layers::ZeroPadding2D(1, name + "_2_pad"), y);
  y = Call(layers::Conv2D(filters, 3, {.strides = stride, .use_bias = false, .name = name + "_2_conv"}), y);
  y = Call(Bn(name + "_2_bn"), y);
  y = Call(Relu(name + "_2_relu"), y);
  y = Call(layers::Conv2D(4 * filters, 1, {.name = name + "_3_conv"}), y);
  return Call(layers::Add(name + "_out"), std::vector<KTensor>{shortcut, y});
}

Result<std::unique_ptr<Model>> Build(const Depth& d, bool v2, Options o) {
  const internal::ModelFacts facts{d.function, d.keras_name, 224, 32};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = Call(layers::ZeroPadding2D(3, "conv1_pad"), input);
  x = Call(layers::Conv2D(64, 7, {.strides = 2, .name = "conv1_conv"}), x);
  if (!v2) {  // v2 normalizes in its first block's preact instead
    x = Call(Bn("conv1_bn"), x);
    x = Call(Relu("conv1_relu"), x);
  }
  x = Call(layers::ZeroPadding2D(1, "pool1_pad"), x);
  x = Call(layers::MaxPooling2D({.pool_size = 3, .strides = 2, .name = "pool1_pool"}), x);
  int pools = 0;
  for (int s = 0; s < 4; ++s) {
    const Stack& stack = kStacks[s];
    const int blocks = d.blocks[s];
    for (int b = 1; b <= blocks; ++b) {
      const std::string name = std::string(stack.name) + "_block" + std::to_string(b);
      if (!v2) {
        x = Bottleneck(x, stack.filters, b == 1 && s > 0 ? 2 : 1, b == 1, name);
      } else {
        // stack2: the stride on the last block of every stack but the last.
        x = PreactBottleneck(x, stack.filters, b == blocks && s < 3 ? 2 : 1, b == 1, name, &pools);
      }
    }
  }
  if (v2) {
    x = Call(Bn("post_bn"), x);
    x = Call(Relu("post_relu"), x);
  }
  x = internal::Top(x, o, {.top_pool = "avg_pool", .avg_pool = "avg_pool", .max_pool = "max_pool"});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> ResNet50(Options o) { return Build(kResNet50, false, std::move(o)); }
Result<std::unique_ptr<Model>> ResNet101(Options o) { return Build(kResNet101, false, std::move(o)); }
Result<std::unique_ptr<Model>> ResNet152(Options o) { return Build(kResNet152, false, std::move(o)); }
Result<std::unique_ptr<Model>> ResNet50V2(Options o) { return Build(kResNet50V2, true, std::move(o)); }
Result<std::unique_ptr<Model>> ResNet101V2(Options o) { return Build(kResNet101V2, true, std::move(o)); }
Result<std::unique_ptr<Model>> ResNet152V2(Options o) { return Build(kResNet152V2, true, std::move(o)); }

}  // namespace strata::keras::applications
