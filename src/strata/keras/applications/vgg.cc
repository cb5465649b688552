// VGG16 and VGG19 (Simonyan & Zisserman 2014) as Keras builds them (keras.applications.vgg16,
// .vgg19): five blocks of 3x3 "same" convolutions with ReLU, each ending in a 2x2 max pool, and
// a classifier of two 4096-unit dense layers on the flattened features (no global pooling).
#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

struct Depth {
  const char* function;
  const char* keras_name;
  int convs[5];  // convolutions per block
};
constexpr Depth kVgg16{"VGG16", "vgg16", {2, 2, 3, 3, 3}};
constexpr Depth kVgg19{"VGG19", "vgg19", {2, 2, 4, 4, 4}};
constexpr int kFilters[] = {64, 128, 256, 512, 512};

Result<std::unique_ptr<Model>> Build(const Depth& d, Options o) {
  const internal::ModelFacts facts{d.function, d.keras_name, 224, 32};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = input;
  for (int b = 0; b < 5; ++b) {
    const std::string block = "block" + std::to_string(b + 1);
    for (int c = 1; c <= d.convs[b]; ++c)
      x = Call(layers::Conv2D(kFilters[b], 3, {.padding = "same", .activation = "relu",
                                               .name = block + "_conv" + std::to_string(c)}),
               x);
    x = Call(layers::MaxPooling2D({.pool_size = 2, .strides = 2, .name = block + "_pool"}), x);
  }
  if (o.include_top) {
    x = Call(layers::Flatten("flatten"), x);
    x = Call(layers::Dense(4096, {.activation = "relu", .name = "fc1"}), x);
    x = Call(layers::Dense(4096, {.activation = "relu", .name = "fc2"}), x);
    x = Call(internal::Predictions(o), x);
  } else {
    // Keras leaves the pooling unnamed: its automatic names.
    x = internal::Top(x, o, {.avg_pool = "global_average_pooling2d", .max_pool = "global_max_pooling2d"});
  }
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> VGG16(Options o) { return Build(kVgg16, std::move(o)); }
Result<std::unique_ptr<Model>> VGG19(Options o) { return Build(kVgg19, std::move(o)); }

}  // namespace strata::keras::applications
