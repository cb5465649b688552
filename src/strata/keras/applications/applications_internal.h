// What the five applications share (not installed): Keras's option checks, its input-shape
// rules, the classifier / pooling top and Keras's automatic layer names.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "strata/keras/applications/applications.h"
#include "strata/keras/layers.h"
#include "strata/keras/model.h"

namespace strata::keras::applications::internal {

// The per-model facts the shared parts need.
struct ModelFacts {
  std::string function;      // "ResNet50": prefixes errors
  std::string keras_name;    // the model's name in Keras ("resnet50")
  int default_size = 224;    // input side when Options::input_shape is empty
  int min_size = 32;         // the smallest side Keras accepts
  bool takes_alpha = false;  // MobileNet, MobileNetV2, MobileNetV3: Options::alpha (else it must be 1)
  bool takes_depth_multiplier = false;  // MobileNet: Options::depth_multiplier (else it must be 1)
  bool takes_preprocessing = false;     // ConvNeXt, EfficientNetV2, MobileNetV3: include_preprocessing (else true)
  bool takes_minimalistic = false;      // MobileNetV3: Options::minimalistic (else it must be false)
};

// Keras's names of the layers after the feature extractor ("" = Keras leaves it unnamed and
// its automatic name applies: "global_average_pooling2d").
struct TopNames {
  std::string top_pool;          // the GlobalAveragePooling2D before the classifier
  std::string avg_pool, max_pool;  // pooling = "avg" / "max" without the top
  float dropout = 0;             // > 0: Dropout(rate) between the pool and the classifier
  std::string dropout_name;
  std::string classifier_initializer = "glorot_uniform";  // the Dense's kernel_initializer
};

// Checks the options (classes, pooling, classifier_activation) and returns the per-example
// input shape: the input_tensor's, else the given [H, W, C], else Keras's default [S, S, 3]; its
// height and width at least the minimum.
Result<Shape> CheckOptions(const Options& o, const ModelFacts& m);

// Keras's "predictions" Dense(classes) with the classifier's activation ("" is linear): the last
// layer of every top but MobileNet's, whose "predictions" is the activation alone
// (ClassifierActivation).
LayerPtr Predictions(const Options& o, const std::string& kernel_initializer = "glorot_uniform");
std::string ClassifierActivation(const Options& o);

// The classifier (include_top) or the pooling (pooling = "avg"/"max") on the features `x`.
KTensor Top(const KTensor& x, const Options& o, const TopNames& names);

// The image input the model's layers start from: o.input_tensor if given, else an Input of the
// shape CheckOptions returned.
KTensor ImageInput(const Options& o, const Shape& input_shape);
// The functional model from `input` to `output`, named o.name or Keras's name; its inputs are
// the input_tensor's source inputs where the options give one.
Result<std::unique_ptr<Model>> Finish(const KTensor& input, const KTensor& output, const Options& o,
                                      const std::string& keras_name);

// Keras's automatic name of the index-th unnamed layer of a kind: "conv2d", "conv2d_1", ...
std::string AutoName(const std::string& prefix, int index);

// Keras's automatic names in call order, one count per kind: Next("conv2d") is "conv2d", then
// "conv2d_1", ... (for models that leave most layers unnamed, as InceptionV3).
class AutoNames {
 public:
  std::string Next(const std::string& prefix) { return AutoName(prefix, counts_[prefix]++); }

 private:
  std::map<std::string, int> counts_;
};

// The Inception family's conv2d_bn without a name (InceptionV3's every one, InceptionResNetV2's
// unnamed ones): Conv2D without bias, BatchNormalization(scale=False), ReLU, under Keras's
// automatic names (conv2d_<n>, batch_normalization_<n>, activation_<n>) from `names`.
KTensor InceptionConvBn(const KTensor& x, int filters, layers::KernelSize k, AutoNames* names, int strides = 1,
                        const std::string& padding = "same");
// InceptionV3's stem, which InceptionResNetV2 shares: 3x3/2, 3x3, 3x3 "same", 3x3/2 max pool,
// 1x1, 3x3, 3x3/2 max pool (192 channels, 35 x 35 at 299 px), all under automatic names.
KTensor InceptionStem(const KTensor& input, AutoNames* names);

// Keras's _make_divisible(v, 8) (MobileNetV2's widths; EfficientNet's round_filters is it on the
// scaled width): v to the nearest multiple of 8, at least 8, and not more than 10 % below v.
int MakeDivisible(double v);

// EfficientNet's squeeze-and-excitation (V1's and V2's, the same layers and names): pooled
// ("<prefix>se_squeeze"), reshaped to [1, 1, filters] ("se_reshape"), squeezed to filters_se
// channels by a 1x1 convolution with swish ("se_reduce"), widened back with a sigmoid
// ("se_expand"), and multiplied in ("se_excite"); the convolutions' kernels drawn by `kernel_init`.
KTensor EfficientNetSqueezeExcite(const KTensor& x, int filters, int filters_se, const std::string& prefix,
                                  const std::string& kernel_init);
// Keras's round_repeats (both EfficientNets): the depth scaled and rounded up.
int RoundRepeats(int repeats, double depth);

// Keras's correct_pad(inputs, kernel_size): the ((top, bottom), (left, right)) zeros before a
// stride-2 "valid" convolution so it samples as TensorFlow's "same" does for either parity.
layers::ZeroPadding2DOptions CorrectPad(int64_t height, int64_t width, int kernel_size, const std::string& name);

}  // namespace strata::keras::applications::internal
