// The applications' table (command-line names, default and minimum sizes) and what every
// model shares: Keras's option checks, the classifier / pooling top, automatic names.
#include "strata/keras/applications/applications.h"

#include <algorithm>
#include <cmath>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

struct Entry {
  const char* name;  // the command-line name
  Result<std::unique_ptr<Model>> (*build)(Options);
  int default_size, min_size;  // Keras's obtain_input_shape(default_size=, min_size=)
  const char* preprocess;      // its module's preprocess_input mode (applications.h)
};

const std::vector<Entry>& Table() {
  static const std::vector<Entry> table = {
      {"vgg16", VGG16, 224, 32, "caffe"},
      {"vgg19", VGG19, 224, 32, "caffe"},
      {"resnet50", ResNet50, 224, 32, "caffe"},
      {"resnet101", ResNet101, 224, 32, "caffe"},
      {"resnet152", ResNet152, 224, 32, "caffe"},
      {"resnet50_v2", ResNet50V2, 224, 32, "tf"},
      {"resnet101_v2", ResNet101V2, 224, 32, "tf"},
      {"resnet152_v2", ResNet152V2, 224, 32, "tf"},
      {"mobilenet", MobileNet, 224, 32, "tf"},
      {"mobilenet_v2", MobileNetV2, 224, 32, "tf"},
      {"mobilenet_v3_small", MobileNetV3Small, 224, 32, ""},
      {"mobilenet_v3_large", MobileNetV3Large, 224, 32, ""},
      {"efficientnet_b0", EfficientNetB0, 224, 32, ""},
      {"efficientnet_b1", EfficientNetB1, 240, 32, ""},
      {"efficientnet_b2", EfficientNetB2, 260, 32, ""},
      {"efficientnet_b3", EfficientNetB3, 300, 32, ""},
      {"efficientnet_b4", EfficientNetB4, 380, 32, ""},
      {"efficientnet_b5", EfficientNetB5, 456, 32, ""},
      {"efficientnet_b6", EfficientNetB6, 528, 32, ""},
      {"efficientnet_b7", EfficientNetB7, 600, 32, ""},
      {"efficientnet_v2_b0", EfficientNetV2B0, 224, 32, ""},
      {"efficientnet_v2_b1", EfficientNetV2B1, 240, 32, ""},
      {"efficientnet_v2_b2", EfficientNetV2B2, 260, 32, ""},
      {"efficientnet_v2_b3", EfficientNetV2B3, 300, 32, ""},
      {"efficientnet_v2_s", EfficientNetV2S, 384, 32, ""},
      {"efficientnet_v2_m", EfficientNetV2M, 480, 32, ""},
      {"efficientnet_v2_l", EfficientNetV2L, 480, 32, ""},
      {"inception_v3", InceptionV3, 299, 75, "tf"},
      {"inception_resnet_v2", InceptionResNetV2, 299, 75, "tf"},
      {"xception", Xception, 299, 71, "tf"},
      {"nasnet_mobile", NASNetMobile, 224, 32, "tf"},
      {"nasnet_large", NASNetLarge, 331, 32, "tf"},
      {"densenet121", DenseNet121, 224, 32, "torch"},
      {"densenet169", DenseNet169, 224, 32, "torch"},
      {"densenet201", DenseNet201, 224, 32, "torch"},
      {"convnext_tiny", ConvNeXtTiny, 224, 32, ""},
      {"convnext_small", ConvNeXtSmall, 224, 32, ""},
      {"convnext_base", ConvNeXtBase, 224, 32, ""},
      {"convnext_large", ConvNeXtLarge, 224, 32, ""},
      {"convnext_xlarge", ConvNeXtXLarge, 224, 32, ""},
      {"vit_b16", ViTB16, 224, 32, "tf"},  // KerasHub's ViT converter: x / 127.5 - 1
      {"vit_s16", ViTS16, 224, 32, "tf"},
  };
  return table;
}

const Entry* Find(const std::string& name) {
  for (const Entry& e : Table())
    if (name == e.name) return &e;
  return nullptr;
}

// The entry called `name`, or the error that lists the applications there are.
Result<const Entry*> Lookup(const std::string& name) {
  if (const Entry* e = Find(name)) return e;
  return InvalidArgument("unknown model \"" + name + "\" (the applications are " + NameList() + ")");
}

}  // namespace

std::string NameList() {
  std::string s;
  for (const Entry& e : Table()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

const std::vector<std::string>& Names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Entry& e : Table()) v.push_back(e.name);
    return v;
  }();
  return names;
}

bool IsApplication(const std::string& name) { return Find(name) != nullptr; }

Result<std::unique_ptr<Model>> ByName(const std::string& name, Options o) {
  STRATA_ASSIGN_OR_RETURN(const Entry* e, Lookup(name));
  return e->build(std::move(o));
}

Result<std::string> PreprocessMode(const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(const Entry* e, Lookup(name));
  return std::string(e->preprocess);
}

int DefaultSize(const std::string& name) {
  const Entry* e = Find(name);
  return e ? e->default_size : 0;
}

int MinimumSize(const std::string& name) {
  const Entry* e = Find(name);
  return e ? e->min_size : 0;
}

namespace internal {

Result<Shape> CheckOptions(const Options& o, const ModelFacts& m) {
  const std::string label = m.function + ": ";
  if (o.include_top && o.classes < 1)
    return InvalidArgument(label + "classes must be at least 1 with include_top, got " + std::to_string(o.classes));
  // Keras ignores pooling when include_top is set (the top pools itself); an unknown value is
  // an error either way, so a typo does not silently return 4-D features.
  if (!o.pooling.empty() && o.pooling != "avg" && o.pooling != "max")
    return InvalidArgument(label + "pooling must be \"avg\", \"max\" or empty (none), got \"" + o.pooling + "\"");
  if (o.include_top && o.classifier_activation != "softmax") {
    auto a = ParseActivation(o.classifier_activation);
    if (!a.ok()) return InvalidArgument(label + "classifier_activation: " + a.status().message());
  }
  if (!m.takes_alpha && o.alpha != 1.0)
    return InvalidArgument(label + "has no alpha (a width multiplier of the MobileNets), got " +
                           std::to_string(o.alpha));
  if (!(o.alpha > 0)) return InvalidArgument(label + "alpha must be positive, got " + std::to_string(o.alpha));
  if (!m.takes_depth_multiplier && o.depth_multiplier != 1)
    return InvalidArgument(label + "has no depth_multiplier (MobileNet's), got " + std::to_string(o.depth_multiplier));
  if (!m.takes_preprocessing && !o.include_preprocessing)
    return InvalidArgument(label + "has no include_preprocessing (ConvNeXt's, EfficientNetV2's, MobileNetV3's); its preprocessing is "
                                   "preprocess_input's");
  if (!m.takes_minimalistic && o.minimalistic) return InvalidArgument(label + "has no minimalistic (MobileNetV3's)");
  if (o.depth_multiplier < 1)
    return InvalidArgument(label + "depth_multiplier must be at least 1, got " + std::to_string(o.depth_multiplier));
  Shape s = o.input_shape;
  if (o.input_tensor.node()) {
    auto shape = ShapeOf(o.input_tensor);
    if (!shape.ok()) return InvalidArgument(label + "input_tensor: " + shape.status().message());
    if (s.rank() != 0 && !(s == *shape))
      return InvalidArgument(label + "input_shape " + s.ToString() + " differs from the input_tensor's shape " +
                             shape->ToString());
    s = *shape;
    if (s.rank() != 3)
      return InvalidArgument(label + "input_tensor must be images [height, width, channels] per example, got shape " +
                             s.ToString());
  }
  if (s.rank() == 0) return Shape{m.default_size, m.default_size, 3};
  if (s.rank() != 3)
    return InvalidArgument(label + "input_shape must be [height, width, channels], got " + s.ToString());
  if (s[2] < 1) return InvalidArgument(label + "input_shape " + s.ToString() + " has no channels");
  if (s[0] < m.min_size || s[1] < m.min_size)
    return InvalidArgument(label + "input_shape " + s.ToString() + " is too small: height and width must be at least " +
                           std::to_string(m.min_size) + " (as Keras's " + m.function + ")");
  return s;
}

std::string ClassifierActivation(const Options& o) {
  return o.classifier_activation.empty() ? "linear" : o.classifier_activation;
}

LayerPtr Predictions(const Options& o, const std::string& kernel_initializer) {
  return layers::Dense(o.classes, {.activation = ClassifierActivation(o), .kernel_initializer = kernel_initializer,
                                   .name = "predictions"});
}

KTensor Top(const KTensor& x, const Options& o, const TopNames& names) {
  if (o.include_top) {
    KTensor y = Call(layers::GlobalAveragePooling2D(names.top_pool), x);
    if (names.dropout > 0) y = Call(layers::Dropout(names.dropout, names.dropout_name), y);
    return Call(Predictions(o, names.classifier_initializer), y);
  }
  if (o.pooling == "avg") return Call(layers::GlobalAveragePooling2D(names.avg_pool), x);
  if (o.pooling == "max") return Call(layers::GlobalMaxPooling2D(names.max_pool), x);
  return x;
}

KTensor ImageInput(const Options& o, const Shape& input_shape) {
  return o.input_tensor.node() ? o.input_tensor : Input(input_shape);
}

Result<std::unique_ptr<Model>> Finish(const KTensor& input, const KTensor& output, const Options& o,
                                      const std::string& keras_name) {
  std::vector<KTensor> inputs = o.input_tensor.node() ? SourceInputs(o.input_tensor) : std::vector<KTensor>{input};
  return Model::Functional(std::move(inputs), {output}, o.name.empty() ? keras_name : o.name);
}

int MakeDivisible(double v) {
  constexpr int kDivisor = 8;
  int rounded = std::max(kDivisor, static_cast<int>(v + kDivisor / 2.0) / kDivisor * kDivisor);
  if (rounded < 0.9 * v) rounded += kDivisor;
  return rounded;
}

std::string AutoName(const std::string& prefix, int index) {
  return index == 0 ? prefix : prefix + "_" + std::to_string(index);
}

KTensor InceptionConvBn(const KTensor& x, int filters, layers::KernelSize k, AutoNames* names, int strides,
                        const std::string& padding) {
  KTensor y = Call(layers::Conv2D(filters, k, {.strides = strides, .padding = padding, .use_bias = false,
                                               .name = names->Next("conv2d")}),
                   x);
  y = Call(layers::BatchNormalization({.scale = false, .name = names->Next("batch_normalization")}), y);
  return Call(layers::Activation("relu", names->Next("activation")), y);
}

KTensor InceptionStem(const KTensor& input, AutoNames* names) {
  auto max_pool = [names](const KTensor& x) {
    return Call(layers::MaxPooling2D({.pool_size = 3, .strides = 2, .name = names->Next("max_pooling2d")}), x);
  };
  KTensor x = InceptionConvBn(input, 32, 3, names, 2, "valid");
  x = InceptionConvBn(x, 32, 3, names, 1, "valid");
  x = max_pool(InceptionConvBn(x, 64, 3, names));
  x = InceptionConvBn(x, 80, 1, names, 1, "valid");
  return max_pool(InceptionConvBn(x, 192, 3, names, 1, "valid"));
}

KTensor EfficientNetSqueezeExcite(const KTensor& x, int filters, int filters_se, const std::string& prefix,
                                  const std::string& kernel_init) {
  auto conv = [&](int n, const std::string& activation, const std::string& name) {
    return layers::Conv2D(n, 1, {.padding = "same", .activation = activation, .kernel_initializer = kernel_init,
                                 .name = prefix + name});
  };
  KTensor se = Call(layers::GlobalAveragePooling2D(prefix + "se_squeeze"), x);
  se = Call(layers::Reshape({1, 1, filters}, prefix + "se_reshape"), se);
  se = Call(conv(filters_se, "swish", "se_reduce"), se);
  se = Call(conv(filters, "sigmoid", "se_expand"), se);
  return Call(layers::Multiply(prefix + "se_excite"), std::vector<KTensor>{x, se});
}

int RoundRepeats(int repeats, double depth) { return static_cast<int>(std::ceil(depth * repeats)); }

layers::ZeroPadding2DOptions CorrectPad(int64_t height, int64_t width, int kernel_size, const std::string& name) {
  const int correct = kernel_size / 2;
  const int adjust_h = height % 2 == 0 ? 1 : 0, adjust_w = width % 2 == 0 ? 1 : 0;
  return {.top = correct - adjust_h, .bottom = correct, .left = correct - adjust_w, .right = correct, .name = name};
}

}  // namespace internal

}  // namespace strata::keras::applications
