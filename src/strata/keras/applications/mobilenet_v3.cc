// MobileNetV3Small and MobileNetV3Large (Howard et al. 2019) as Keras 3 builds them
// (keras.applications.mobilenet_v3): a Rescaling to [-1, 1] (include_preprocessing), a 3x3/2 stem,
// inverted residual blocks with squeeze-and-excite gated by the hard sigmoid relu6(x + 3) / 6 and
// hard swish x relu6(x + 3) / 6 in the later blocks, batch norm epsilon 1e-3 and momentum 0.999,
// and a top of global pooling and two 1x1 convolutions. `minimalistic`: 3x3 kernels, ReLU
// everywhere and no squeeze-and-excite.
//
// Keras leaves the activations unnamed (ReLU() is "re_lu", "re_lu_1", ...; Activation("hard_swish")
// is "activation", ...): they take Keras's automatic names in call order here. Keras's gate is
// ReLU(6.)(x + 3.) * (1 / 6), one ReLU layer and two weightless operators; here it is one
// Activation("hard_sigmoid_keras3") under that ReLU's name.
#include <string>
#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

// One _inverted_res_block call: expansion, output channels before alpha, kernel (0: the model's,
// 5 or 3 when minimalistic), stride, squeeze-and-excite, and hard swish (else ReLU).
struct Block {
  double expansion;
  int filters, kernel, stride;
  bool se, hard_swish;
};
constexpr int kModel = 0;  // the kernel `kernel` the stack_fn is given

// Keras's stack_fn tables. Small's first block and Large's 4th to 6th use ReLU even when the
// model's activation is hard swish.
const std::vector<Block> kSmall = {
    {1, 16, 3, 2, true, false},           {72.0 / 16, 24, 3, 2, false, false}, {88.0 / 24, 24, 3, 1, false, false},
    {4, 40, kModel, 2, true, true},       {6, 40, kModel, 1, true, true},      {6, 40, kModel, 1, true, true},
    {3, 48, kModel, 1, true, true},       {3, 48, kModel, 1, true, true},      {6, 96, kModel, 2, true, true},
    {6, 96, kModel, 1, true, true},       {6, 96, kModel, 1, true, true},
};
const std::vector<Block> kLarge = {
    {1, 16, 3, 1, false, false},     {4, 24, 3, 2, false, false},     {3, 24, 3, 1, false, false},
    {3, 40, kModel, 2, true, false}, {3, 40, kModel, 1, true, false}, {3, 40, kModel, 1, true, false},
    {6, 80, 3, 2, false, true},      {2.5, 80, 3, 1, false, true},    {2.3, 80, 3, 1, false, true},
    {2.3, 80, 3, 1, false, true},    {6, 112, 3, 1, true, true},      {6, 112, 3, 1, true, true},
    {6, 160, kModel, 2, true, true}, {6, 160, kModel, 1, true, true}, {6, 160, kModel, 1, true, true},
};

LayerPtr Bn(const std::string& name) { return layers::BatchNormalization({.momentum = 0.999f, .epsilon = 1e-3f, .name = name}); }

// What the blocks track: the tensor, its channels and spatial size (correct_pad reads the parity).
struct Features {
  KTensor x;
  int64_t channels, height, width;
};

class Builder {
 public:
  Builder(bool minimalistic, double alpha) : minimalistic_(minimalistic), alpha_(alpha) {}

  // The model's activation (Keras's `activation`: hard swish, or ReLU when minimalistic), or
  // ReLU where the table says so.
  KTensor Act(const KTensor& x, bool hard_swish) {
    if (hard_swish && !minimalistic_) return Call(layers::Activation("hard_swish", names_.Next("activation")), x);
    return Call(layers::ReLU(layers::ReLUOptions{.name = names_.Next("re_lu")}), x);
  }
  KTensor ModelAct(const KTensor& x) { return Act(x, true); }

  Features Stem(const KTensor& x, int64_t height, int64_t width) {
    KTensor y = Call(layers::Conv2D(16, 3, {.strides = 2, .padding = "same", .use_bias = false, .name = "conv"}), x);
    y = ModelAct(Call(Bn("conv_bn"), y));
    return {y, 16, (height + 1) / 2, (width + 1) / 2};
  }

  // Keras's _se_block: pooled, squeezed to a quarter (rounded to 8), ReLU, widened back, gated.
  KTensor SqueezeExcite(const KTensor& in, int filters, const std::string& prefix) {
    KTensor x = Call(layers::GlobalAveragePooling2D({.keepdims = true, .name = prefix + "squeeze_excite_avg_pool"}), in);
    x = Call(layers::Conv2D(internal::MakeDivisible(filters * 0.25), 1,
                            {.padding = "same", .name = prefix + "squeeze_excite_conv"}),
             x);
    x = Call(layers::ReLU(layers::ReLUOptions{.name = prefix + "squeeze_excite_relu"}), x);
    x = Call(layers::Conv2D(filters, 1, {.padding = "same", .name = prefix + "squeeze_excite_conv_1"}), x);
    x = Call(layers::Activation("hard_sigmoid_keras3", names_.Next("re_lu")), x);
    return Call(layers::Multiply(prefix + "squeeze_excite_mul"), std::vector<KTensor>{in, x});
  }

  // Keras's _inverted_res_block: "expanded_conv_<id>_..." ("expanded_conv_" for block 0, which
  // does not expand).
  Features InvertedResidual(const Features& in, const Block& b, int id) {
    const int filters = internal::MakeDivisible(b.filters * alpha_);
    const int kernel = b.kernel == kModel ? (minimalistic_ ? 3 : 5) : b.kernel;
    const bool se = b.se && !minimalistic_;
    const int expanded = internal::MakeDivisible(in.channels * b.expansion);
    std::string prefix = "expanded_conv_";
    KTensor x = in.x;
    if (id > 0) {
      prefix = "expanded_conv_" + std::to_string(id) + "_";
      x = Call(layers::Conv2D(expanded, 1, {.padding = "same", .use_bias = false, .name = prefix + "expand"}), x);
      x = Act(Call(Bn(prefix + "expand_bn"), x), b.hard_swish);
    }
    int64_t height = in.height, width = in.width;
    if (b.stride == 2) {
      x = Call(layers::ZeroPadding2D(internal::CorrectPad(height, width, kernel, prefix + "depthwise_pad")), x);
      height = (height + 1) / 2;  // correct_pad + k x k/2 "valid": ceil(size / 2) for either parity
      width = (width + 1) / 2;
    }
    x = Call(layers::DepthwiseConv2D(kernel, {.strides = b.stride, .padding = b.stride == 1 ? "same" : "valid",
                                              .use_bias = false, .name = prefix + "depthwise"}),
             x);
    x = Act(Call(Bn(prefix + "depthwise_bn"), x), b.hard_swish);
    // Keras's _se_block is given _depth(infilters * expansion) even for block 0 (no expansion).
    if (se) x = SqueezeExcite(x, expanded, prefix);
    x = Call(layers::Conv2D(filters, 1, {.padding = "same", .use_bias = false, .name = prefix + "project"}), x);
    x = Call(Bn(prefix + "project_bn"), x);
    if (b.stride == 1 && in.channels == filters) x = Call(layers::Add(prefix + "add"), std::vector<KTensor>{in.x, x});
    return {x, filters, height, width};
  }

  internal::AutoNames& names() { return names_; }

 private:
  bool minimalistic_;
  double alpha_;
  internal::AutoNames names_;
};

Result<std::unique_ptr<Model>> Build(const char* function, const std::vector<Block>& blocks, int last_point, Options o) {
  const internal::ModelFacts facts{.function = function, .keras_name = function, .takes_alpha = true,
                                   .takes_preprocessing = true, .takes_minimalistic = true};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  if (!(o.dropout_rate >= 0 && o.dropout_rate < 1))
    return InvalidArgument(std::string(function) + ": dropout_rate must be in [0, 1), got " +
                           std::to_string(o.dropout_rate));
  Builder b(o.minimalistic, o.alpha);
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = input;
  if (o.include_preprocessing) x = Call(layers::Rescaling(1.0f / 127.5f, -1.0f, b.names().Next("rescaling")), x);
  Features f = b.Stem(x, input_shape[0], input_shape[1]);
  for (size_t i = 0; i < blocks.size(); ++i) f = b.InvertedResidual(f, blocks[i], static_cast<int>(i));
  const int last_conv = internal::MakeDivisible(f.channels * 6.0);
  // Wider than 1.0, the top's convolution widens too.
  if (o.alpha > 1.0) last_point = internal::MakeDivisible(last_point * o.alpha);
  x = Call(layers::Conv2D(last_conv, 1, {.padding = "same", .use_bias = false, .name = "conv_1"}), f.x);
  x = b.ModelAct(Call(Bn("conv_1_bn"), x));
  if (o.include_top) {
    x = Call(layers::GlobalAveragePooling2D({.keepdims = true, .name = b.names().Next("global_average_pooling2d")}), x);
    x = Call(layers::Conv2D(last_point, 1, {.padding = "same", .name = "conv_2"}), x);
    x = b.ModelAct(x);
    if (o.dropout_rate > 0) x = Call(layers::Dropout(static_cast<float>(o.dropout_rate), b.names().Next("dropout")), x);
    x = Call(layers::Conv2D(o.classes, 1, {.padding = "same", .name = "logits"}), x);
    x = Call(layers::Flatten(b.names().Next("flatten")), x);
    x = Call(layers::Activation(internal::ClassifierActivation(o), "predictions"), x);
  } else {
    if (o.pooling == "avg") x = Call(layers::GlobalAveragePooling2D("avg_pool"), x);
    if (o.pooling == "max") x = Call(layers::GlobalMaxPooling2D("max_pool"), x);
  }
  return internal::Finish(input, x, o, function);
}

}  // namespace

Result<std::unique_ptr<Model>> MobileNetV3Small(Options o) {
  return Build("MobileNetV3Small", kSmall, 1024, std::move(o));
}
Result<std::unique_ptr<Model>> MobileNetV3Large(Options o) {
  return Build("MobileNetV3Large", kLarge, 1280, std::move(o));
}

}  // namespace strata::keras::applications
