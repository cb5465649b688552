// InceptionResNetV2 (Szegedy et al. 2017) as Keras builds it
// (keras.applications.inception_resnet_v2): InceptionV3's stem, then three kinds of
// Inception-ResNet blocks (block35 x 10, block17 x 20, block8 x 10) whose concatenated branches
// go through a 1x1 convolution with bias and are added to the block's input scaled by 0.17,
// 0.1 and 0.2 (CustomScaleLayer), with reduction blocks mixed_6a and mixed_7a between them.
// Keras's conv2d_bn: Conv2D, BatchNormalization(scale=False) unless the convolution has a bias,
// then the activation; unnamed ones carry Keras's automatic names.

#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

class Builder {
 public:
  // conv2d_bn(x, filters, (rows, cols), strides, padding, activation, use_bias, name).
  KTensor ConvBn(const KTensor& x, int filters, layers::KernelSize k, int strides = 1,
                 const std::string& padding = "same", const std::string& activation = "relu", bool use_bias = false,
                 const std::string& name = "") {
    if (name.empty() && !use_bias && activation == "relu")
      return internal::InceptionConvBn(x, filters, k, &names_, strides, padding);
    KTensor y = Call(layers::Conv2D(filters, k, {.strides = strides, .padding = padding, .use_bias = use_bias,
                                                 .name = name}),
                     x);
    if (!use_bias) y = Call(layers::BatchNormalization({.scale = false, .name = name + "_bn"}), y);
    if (!activation.empty()) y = Call(layers::Activation(activation, name + "_ac"), y);
    return y;
  }
  KTensor Stem(const KTensor& input) { return internal::InceptionStem(input, &names_); }
  KTensor Pool(const KTensor& x, bool max, int strides, const std::string& padding) {
    const layers::Pool2DOptions o{.pool_size = 3, .strides = strides, .padding = padding,
                                  .name = names_.Next(max ? "max_pooling2d" : "average_pooling2d")};
    return Call(max ? layers::MaxPooling2D(o) : layers::AveragePooling2D(o), x);
  }

  // inception_resnet_block(x, scale, block_type, block_idx, activation); `channels` is x's (the
  // 1x1 convolution's filters, which Keras reads from x's shape).
  KTensor Block(const KTensor& x, int channels, float scale, const std::string& type, int idx, bool relu = true) {
    std::vector<KTensor> branches;
    if (type == "block35") {
      branches = {ConvBn(x, 32, 1), ConvBn(ConvBn(x, 32, 1), 32, 3), ConvBn(ConvBn(ConvBn(x, 32, 1), 48, 3), 64, 3)};
    } else if (type == "block17") {
      branches = {ConvBn(x, 192, 1), ConvBn(ConvBn(ConvBn(x, 128, 1), 160, {1, 7}), 192, {7, 1})};
    } else {  // block8
      branches = {ConvBn(x, 192, 1), ConvBn(ConvBn(ConvBn(x, 192, 1), 224, {1, 3}), 256, {3, 1})};
    }
    const std::string name = type + "_" + std::to_string(idx);
    KTensor mixed = Call(layers::Concatenate(-1, name + "_mixed"), branches);
    KTensor up = ConvBn(mixed, channels, 1, 1, "same", "", true, name + "_conv");
    KTensor y = Call(layers::CustomScaleLayer(scale, name), std::vector<KTensor>{x, up});
    return relu ? Call(layers::Activation("relu", name + "_ac"), y) : y;
  }

 private:
  internal::AutoNames names_;
};

}  // namespace

Result<std::unique_ptr<Model>> InceptionResNetV2(Options o) {
  const internal::ModelFacts facts{"InceptionResNetV2", "inception_resnet_v2", 299, 75};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  Builder b;
  KTensor x = b.Stem(input);  // InceptionV3's

  // mixed_5b (Inception-A).
  {
    KTensor b0 = b.ConvBn(x, 96, 1);
    KTensor b1 = b.ConvBn(b.ConvBn(x, 48, 1), 64, 5);
    KTensor b2 = b.ConvBn(b.ConvBn(b.ConvBn(x, 64, 1), 96, 3), 96, 3);
    KTensor pool = b.ConvBn(b.Pool(x, false, 1, "same"), 64, 1);
    x = Call(layers::Concatenate(-1, "mixed_5b"), std::vector<KTensor>{b0, b1, b2, pool});
  }
  // The blocks keep their input's channels: 96 + 64 + 96 + 64 = 320 after mixed_5b, 384 + 384 +
  // 320 = 1088 after mixed_6a, 384 + 288 + 320 + 1088 = 2080 after mixed_7a.
  for (int i = 1; i <= 10; ++i) x = b.Block(x, 320, 0.17f, "block35", i);
  // mixed_6a (Reduction-A).
  {
    KTensor b0 = b.ConvBn(x, 384, 3, 2, "valid");
    KTensor b1 = b.ConvBn(b.ConvBn(b.ConvBn(x, 256, 1), 256, 3), 384, 3, 2, "valid");
    KTensor pool = b.Pool(x, true, 2, "valid");
    x = Call(layers::Concatenate(-1, "mixed_6a"), std::vector<KTensor>{b0, b1, pool});
  }
  for (int i = 1; i <= 20; ++i) x = b.Block(x, 1088, 0.1f, "block17", i);
  // mixed_7a (Reduction-B).
  {
    KTensor b0 = b.ConvBn(b.ConvBn(x, 256, 1), 384, 3, 2, "valid");
    KTensor b1 = b.ConvBn(b.ConvBn(x, 256, 1), 288, 3, 2, "valid");
    KTensor b2 = b.ConvBn(b.ConvBn(b.ConvBn(x, 256, 1), 288, 3), 320, 3, 2, "valid");
    KTensor pool = b.Pool(x, true, 2, "valid");
    x = Call(layers::Concatenate(-1, "mixed_7a"), std::vector<KTensor>{b0, b1, b2, pool});
  }
  for (int i = 1; i <= 9; ++i) x = b.Block(x, 2080, 0.2f, "block8", i);
  x = b.Block(x, 2080, 1.0f, "block8", 10, /*relu=*/false);
  x = b.ConvBn(x, 1536, 1, 1, "same", "relu", false, "conv_7b");
  x = internal::Top(x, o, {.top_pool = "avg_pool"});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace strata::keras::applications
