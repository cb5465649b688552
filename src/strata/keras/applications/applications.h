// keras::applications: the Keras applications Strata builds, with Keras's options, layer names,
// weight names, weight shapes and order (so Keras weight files load by name).
//
//   auto model = keras::applications::ResNet50({.input_shape = {192, 192, 3}, .classes = 104});
//   auto backbone = keras::applications::Xception({.include_top = false, .pooling = "avg"});
//
// The structure reference is Keras's own definitions (keras_applications / tf.keras.applications);
// each model is written here from its block table, not translated line by line.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/shape.h"
#include "strata/core/status.h"
#include "strata/keras/model.h"

namespace strata::keras::applications {

struct Options {
  bool include_top = true;            // the classifier: pooling, (dropout,) Dense(classes)
  Shape input_shape;                  // [H, W, C] without the batch; empty: the model's default
  // Keras's input_tensor: the model is built on this symbolic tensor (an Input, or layers on one,
  // such as augmentation) and takes its source inputs (SourceInputs) as its own. Its shape is the
  // input shape; input_shape, if given too, must equal it.
  KTensor input_tensor;
  int classes = 1000;                 // with include_top
  std::string pooling;                // without include_top: "" (4-D features), "avg" or "max"
  std::string classifier_activation = "softmax";  // or "linear"/"" (logits)
  std::string name;                   // empty: Keras's model name ("resnet50", "xception", ...)
  double alpha = 1.0;                 // MobileNet, MobileNetV2: the width multiplier
  int depth_multiplier = 1;           // MobileNet: depthwise channel multiplier
  double dropout = 1e-3;              // MobileNet: the top's dropout rate
  // ConvNeXt, EfficientNetV2 and MobileNetV3: the preprocessing as the model's first layers
  // (ConvNeXt's ImageNet normalization, Keras's PreStem; EfficientNetV2B*'s Rescaling and ImageNet
  // Normalization, EfficientNetV2S/M/L's and MobileNetV3's Rescaling to [-1, 1]), so it takes
  // [0, 255] pixels; false: the caller does it. Only the models that take it may set false.
  bool include_preprocessing = true;
  // MobileNetV3: 3x3 kernels, ReLU and no squeeze-and-excite (Keras's minimalistic models).
  bool minimalistic = false;
  double dropout_rate = 0.2;          // MobileNetV3: the top's dropout rate (0: no Dropout layer)
};

Result<std::unique_ptr<Model>> VGG16(Options o = {});
Result<std::unique_ptr<Model>> VGG19(Options o = {});
Result<std::unique_ptr<Model>> ResNet50(Options o = {});
Result<std::unique_ptr<Model>> ResNet101(Options o = {});
Result<std::unique_ptr<Model>> ResNet152(Options o = {});
Result<std::unique_ptr<Model>> ResNet50V2(Options o = {});
Result<std::unique_ptr<Model>> ResNet101V2(Options o = {});
Result<std::unique_ptr<Model>> ResNet152V2(Options o = {});
Result<std::unique_ptr<Model>> MobileNet(Options o = {});     // any alpha and depth_multiplier
Result<std::unique_ptr<Model>> MobileNetV2(Options o = {});   // any alpha (Keras has weights for 0.35 to 1.4)
Result<std::unique_ptr<Model>> MobileNetV3Small(Options o = {});  // any alpha; minimalistic
Result<std::unique_ptr<Model>> MobileNetV3Large(Options o = {});
Result<std::unique_ptr<Model>> EfficientNetB0(Options o = {});
Result<std::unique_ptr<Model>> EfficientNetB1(Options o = {});  // default input 240
Result<std::unique_ptr<Model>> EfficientNetB2(Options o = {});  // 260
Result<std::unique_ptr<Model>> EfficientNetB3(Options o = {});  // 300
Result<std::unique_ptr<Model>> EfficientNetB4(Options o = {});  // 380
Result<std::unique_ptr<Model>> EfficientNetB5(Options o = {});  // 456
Result<std::unique_ptr<Model>> EfficientNetB6(Options o = {});  // 528
Result<std::unique_ptr<Model>> EfficientNetB7(Options o = {});  // 600
Result<std::unique_ptr<Model>> EfficientNetV2B0(Options o = {});  // fused MBConv stages, then MBConv
Result<std::unique_ptr<Model>> EfficientNetV2B1(Options o = {});  // default input 240
Result<std::unique_ptr<Model>> EfficientNetV2B2(Options o = {});  // 260
Result<std::unique_ptr<Model>> EfficientNetV2B3(Options o = {});  // 300
Result<std::unique_ptr<Model>> EfficientNetV2S(Options o = {});   // 384
Result<std::unique_ptr<Model>> EfficientNetV2M(Options o = {});   // 480
Result<std::unique_ptr<Model>> EfficientNetV2L(Options o = {});   // 480
Result<std::unique_ptr<Model>> InceptionV3(Options o = {});        // default input 299, at least 75
Result<std::unique_ptr<Model>> InceptionResNetV2(Options o = {});  // default input 299, at least 75
Result<std::unique_ptr<Model>> Xception(Options o = {});
Result<std::unique_ptr<Model>> NASNetMobile(Options o = {});  // default input 224
Result<std::unique_ptr<Model>> NASNetLarge(Options o = {});   // default input 331
Result<std::unique_ptr<Model>> DenseNet121(Options o = {});
Result<std::unique_ptr<Model>> DenseNet169(Options o = {});
Result<std::unique_ptr<Model>> DenseNet201(Options o = {});
Result<std::unique_ptr<Model>> ConvNeXtTiny(Options o = {});    // depths 3-3-9-3, widths 96-768
Result<std::unique_ptr<Model>> ConvNeXtSmall(Options o = {});   // 3-3-27-3, 96-768
Result<std::unique_ptr<Model>> ConvNeXtBase(Options o = {});    // 3-3-27-3, 128-1024
Result<std::unique_ptr<Model>> ConvNeXtLarge(Options o = {});   // 3-3-27-3, 192-1536
Result<std::unique_ptr<Model>> ConvNeXtXLarge(Options o = {});  // 3-3-27-3, 256-2048
// The Vision Transformer as KerasHub builds it (ViTBackbone + ViTImageClassifier): 16 x 16
// patches, 12 encoder blocks of 768 features and 12 heads (B/16) or 384 and 6 (S/16). The input's
// sides must be multiples of 16. Without the top: the tokens [T, D] (pooling "avg" / "max": [D]).
Result<std::unique_ptr<Model>> ViTB16(Options o = {});
Result<std::unique_ptr<Model>> ViTS16(Options o = {});

// The command-line names, in Keras's order of the families: "vgg16", ..., "resnet50",
// "resnet101_v2", ..., "mobilenet", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
// "efficientnet_b0" ... "efficientnet_b7", "efficientnet_v2_b0" ... "efficientnet_v2_b3",
// "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l", "xception",
// "densenet121", "densenet169", "densenet201", "convnext_tiny" ... "convnext_xlarge", "vit_b16",
// "vit_s16".
const std::vector<std::string>& Names();
// Names() joined by ", ": for help texts and errors.
std::string NameList();
bool IsApplication(const std::string& name);
// Builds the application called `name` (one of Names()); an unknown name is an error listing them.
Result<std::unique_ptr<Model>> ByName(const std::string& name, Options o = {});
// Keras's preprocess_input for the model `name` (one of Names()), as each family's module
// (keras.applications.<family>.preprocess_input) calls imagenet_utils.preprocess_input: its
// mode, "caffe" (VGG, ResNet), "tf" (ResNetV2, MobileNet, MobileNetV2, Xception), "torch"
// (DenseNet), or "" (EfficientNet(V2), ConvNeXt and MobileNetV3, which normalize inside the model).
Result<std::string> PreprocessMode(const std::string& name);
// Keras's imagenet_utils.preprocess_input in place on float32 images [..., 3], channels last,
// RGB with values in [0, 255], computed in float32 in Keras's order of operations:
//   "caffe": to BGR, then minus the ImageNet mean per channel (103.939, 116.779, 123.68 in BGR);
//   "tf":    x / 127.5 - 1;
//   "torch": x / 255, minus the mean (0.485, 0.456, 0.406), over the deviation (0.229, 0.224,
//            0.225) per RGB channel;
//   "" (or "none"): unchanged.
// Another mode, or images whose last dimension is not 3 for caffe and torch, is InvalidArgument.
Status PreprocessInput(Tensor* images, const std::string& mode);

// One of Keras's 1000 ImageNet classes: its WordNet id ("n01440764") and name ("tench").
struct ImagenetClass {
  std::string id, name;
};
// The classes of Keras's imagenet_class_index.json, by class number.
const std::vector<ImagenetClass>& ImagenetClasses();
// The file itself, byte for byte (Keras's MD5 c2c37ea517e94d9795004a39431a14cb).
std::string_view ImagenetClassIndexJson();

// A class and its score, as Keras's decode_predictions gives them: (id, name, score).
struct Prediction {
  std::string class_id, name;
  float score;
};
// Keras's imagenet_utils.decode_predictions(preds, top): for each row of float32 predictions
// [samples, 1000], the `top` classes by score, highest first; equal scores: the higher class
// number first (Keras's argsort()[-top:][::-1] under a stable sort; NumPy's default sort may
// order ties otherwise, which Python's decode_predictions follows). Another shape or top < 1 is
// InvalidArgument.
Result<std::vector<std::vector<Prediction>>> DecodePredictions(const Tensor& preds, int top = 5);

// Keras's published ImageNet weight file for a configuration (Keras's utils.get_file
// arguments; io::GetFile fetches it): the URL, the name Keras caches it under and its hash (MD5,
// SHA-256 for ConvNeXt; ""
// for MobileNet and MobileNetV2, whose files Keras publishes without one).
struct WeightsSource {
  std::string url, fname, file_hash;
};
// The file for the model `name` built with `o`: the with-top file for include_top, else the
// no-top one. Keras's rules: with the top, 1000 classes and the default input size; MobileNet's
// alpha 0.25-1.0 and MobileNetV2's 0.35-1.4, at a square input of a size Keras publishes (else,
// without the top, the 224 px file with a warning). Anything else is InvalidArgument naming it.
Result<WeightsSource> ImagenetWeights(const std::string& name, const Options& o = {});

// Keras's default input side (224; 299 for Xception, 240 to 600 for EfficientNetB1-B7) and the
// smallest side it accepts (32; 71 for Xception).
int DefaultSize(const std::string& name);
int MinimumSize(const std::string& name);

}  // namespace strata::keras::applications

#pragma GCC visibility pop
