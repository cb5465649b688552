// ResNet50 (He et al. 2015, "v1": the stride on the first 1x1 convolution) as Keras builds it
// (keras.applications.resnet): a 7x7 stem, four stacks of bottleneck blocks, batch norm
// epsilon 1.001e-5 throughout.
#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// One stack of bottleneck blocks "<name>_block<i>": 1x1 (filters) -> 3x3 (filters) -> 1x1
// (4 * filters). The first block has a 1x1 convolution on its shortcut and the stack's stride.
struct Stack {
  const char* name;
  int filters, blocks, stride;
};
constexpr Stack kResNet50[] = {{"conv2", 64, 3, 1}, {"conv3", 128, 4, 2}, {"conv4", 256, 6, 2}, {"conv5", 512, 3, 2}};
constexpr float kEpsilon = 1.001e-5f;

KTensor ConvBn(const KTensor& x, int filters, int kernel, int stride, const std::string& name, const char* padding = "valid") {
  KTensor y = Call(layers::Conv2D(filters, kernel, {.strides = stride, .padding = padding, .name = name + "_conv"}), x);
  return Call(layers::BatchNormalization({.epsilon = kEpsilon, .name = name + "_bn"}), y);
}

KTensor Bottleneck(const KTensor& x, int filters, int stride, bool conv_shortcut, const std::string& name) {
  const KTensor shortcut = conv_shortcut ? ConvBn(x, 4 * filters, 1, stride, name + "_0") : x;
  KTensor y = ConvBn(x, filters, 1, stride, name + "_1");
  y = Call(layers::Activation("relu", name + "_1_relu"), y);
  y = ConvBn(y, filters, 3, 1, name + "_2", "same");
  y = Call(layers::Activation("relu", name + "_2_relu"), y);
  y = ConvBn(y, 4 * filters, 1, 1, name + "_3");
  y = Call(layers::Add(name + "_add"), std::vector<KTensor>{shortcut, y});
  return Call(layers::Activation("relu", name + "_out"), y);
}

}  // namespace

Result<std::unique_ptr<Model>> ResNet50(Options o) {
  const internal::ModelFacts facts{"ResNet50", "resnet50", 224, 32};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = Input(input_shape);
  KTensor x = Call(layers::ZeroPadding2D(3, "conv1_pad"), input);
  x = ConvBn(x, 64, 7, 2, "conv1");
  x = Call(layers::Activation("relu", "conv1_relu"), x);
  x = Call(layers::ZeroPadding2D(1, "pool1_pad"), x);
  x = Call(layers::MaxPooling2D({.pool_size = 3, .strides = 2, .name = "pool1_pool"}), x);
  for (const Stack& s : kResNet50)
    for (int b = 1; b <= s.blocks; ++b)
      x = Bottleneck(x, s.filters, b == 1 ? s.stride : 1, b == 1, std::string(s.name) + "_block" + std::to_string(b));
  x = internal::Top(x, o, {.top_pool = "avg_pool", .avg_pool = "avg_pool", .max_pool = "max_pool"});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace strata::keras::applications
