// DenseNet121, 169 and 201 (Huang et al. 2017) as Keras builds them
// (keras.applications.densenet): a 7x7 stem, four dense blocks of pre-activation 1x1 -> 3x3
// convolutions whose outputs are concatenated (growth 32), transitions that halve the channels
// and the size, batch norm epsilon 1.001e-5 throughout. The depths differ only in the number
// of conv_blocks per dense block.

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

struct Depth {
  const char* function;  // Keras's function: "DenseNet169"
  const char* keras_name;
  int blocks[4];  // conv_blocks per dense block
};
constexpr Depth kDenseNet121{"DenseNet121", "densenet121", {6, 12, 24, 16}};
constexpr Depth kDenseNet169{"DenseNet169", "densenet169", {6, 12, 32, 32}};
constexpr Depth kDenseNet201{"DenseNet201", "densenet201", {6, 12, 48, 32}};
constexpr int kGrowth = 32;                 // channels each conv_block adds
constexpr float kEpsilon = 1.001e-5f;

KTensor BnRelu(const KTensor& x, const std::string& name) {
  KTensor y = Call(layers::BatchNormalization({.epsilon = kEpsilon, .name = name + "_bn"}), x);
  return Call(layers::Activation("relu", name + "_relu"), y);
}

// conv_block "<name>": BN-ReLU-1x1 (4 * growth), BN-ReLU-3x3 (growth), concatenated to the input.
KTensor ConvBlock(const KTensor& x, const std::string& name) {
  KTensor y = BnRelu(x, name + "_0");
  y = Call(layers::Conv2D(4 * kGrowth, 1, {.use_bias = false, .name = name + "_1_conv"}), y);
  y = BnRelu(y, name + "_1");
  y = Call(layers::Conv2D(kGrowth, 3, {.padding = "same", .use_bias = false, .name = name + "_2_conv"}), y);
  return Call(layers::Concatenate(-1, name + "_concat"), std::vector<KTensor>{x, y});
}

// transition_block "<name>": BN-ReLU-1x1 to half the channels, 2x2 average pool.
KTensor Transition(const KTensor& x, int64_t channels, const std::string& name) {
  KTensor y = BnRelu(x, name);
  y = Call(layers::Conv2D(static_cast<int>(channels / 2), 1, {.use_bias = false, .name = name + "_conv"}), y);
  return Call(layers::AveragePooling2D({.pool_size = 2, .strides = 2, .name = name + "_pool"}), y);
}

Result<std::unique_ptr<Model>> Build(const Depth& d, Options o) {
  const internal::ModelFacts facts{d.function, d.keras_name, 224, 32};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  // Keras leaves the two stem paddings unnamed: these are the names it gives them.
  KTensor x = Call(layers::ZeroPadding2D(3, internal::AutoName("zero_padding2d", 0)), input);
  x = Call(layers::Conv2D(64, 7, {.strides = 2, .use_bias = false, .name = "conv1/conv"}), x);
  x = Call(layers::BatchNormalization({.epsilon = kEpsilon, .name = "conv1/bn"}), x);
  x = Call(layers::Activation("relu", "conv1/relu"), x);
  x = Call(layers::ZeroPadding2D(1, internal::AutoName("zero_padding2d", 1)), x);
  x = Call(layers::MaxPooling2D({.pool_size = 3, .strides = 2, .name = "pool1"}), x);
  int64_t channels = 64;
  const int stages = 4;
  for (int s = 0; s < stages; ++s) {
    for (int b = 1; b <= d.blocks[s]; ++b) {
      x = ConvBlock(x, "conv" + std::to_string(s + 2) + "_block" + std::to_string(b));
      channels += kGrowth;
    }
    if (s + 1 < stages) {
      x = Transition(x, channels, "pool" + std::to_string(s + 2));
      channels /= 2;
    }
  }
  x = Call(layers::BatchNormalization({.epsilon = kEpsilon, .name = "bn"}), x);
  x = Call(layers::Activation("relu", "relu"), x);
  x = internal::Top(x, o, {.top_pool = "avg_pool", .avg_pool = "avg_pool", .max_pool = "max_pool"});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> DenseNet121(Options o) { return Build(kDenseNet121, std::move(o)); }
Result<std::unique_ptr<Model>> DenseNet169(Options o) { return Build(kDenseNet169, std::move(o)); }
Result<std::unique_ptr<Model>> DenseNet201(Options o) { return Build(kDenseNet201, std::move(o)); }

}  // namespace strata::keras::applications
