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
#include <vector>

#include "strata/core/shape.h"
#include "strata/core/status.h"
#include "strata/keras/model.h"

namespace strata::keras::applications {

struct Options {
  bool include_top = true;            // the classifier: pooling, (dropout,) Dense(classes)
  Shape input_shape;                  // [H, W, C] without the batch; empty: the model's default
  int classes = 1000;                 // with include_top
  std::string pooling;                // without include_top: "" (4-D features), "avg" or "max"
  std::string classifier_activation = "softmax";  // or "linear"/"" (logits)
  std::string name;                   // empty: Keras's model name ("resnet50", "xception", ...)
};

Result<std::unique_ptr<Model>> ResNet50(Options o = {});
Result<std::unique_ptr<Model>> MobileNetV2(Options o = {});   // alpha 1.0
Result<std::unique_ptr<Model>> EfficientNetB0(Options o = {});
Result<std::unique_ptr<Model>> Xception(Options o = {});
Result<std::unique_ptr<Model>> DenseNet121(Options o = {});

// The command-line names: "resnet50", "mobilenet_v2", "efficientnet_b0", "xception", "densenet121".
const std::vector<std::string>& Names();
bool IsApplication(const std::string& name);
// Builds the application called `name` (one of Names()); an unknown name is an error listing them.
Result<std::unique_ptr<Model>> ByName(const std::string& name, Options o = {});
// Keras's default input side (224; 299 for Xception) and the smallest side it accepts
// (32; 71 for Xception).
int DefaultSize(const std::string& name);
int MinimumSize(const std::string& name);

}  // namespace strata::keras::applications

#pragma GCC visibility pop
