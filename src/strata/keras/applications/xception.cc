// Xception (Chollet 2017) as Keras builds it: a two-convolution stem, then blocks of 3x3
// separable convolutions with residual connections (keras.applications.xception).
#include <vector>

#include "strata/keras/applications/applications_internal.h"

namespace strata::keras::applications {
namespace {

using layers::BatchNormalization;
using layers::SeparableConv2D;

// One residual block: its separable convolutions, each ReLU -> SeparableConv2D(3x3) -> BN.
struct SeparableBlock {
  int id;                    // Keras's block number: names are "block<id>_sepconv<i>..."
  std::vector<int> filters;  // one separable convolution per entry
  bool relu_first;           // block 2 starts straight from the stem's ReLU
  bool downsample;           // 3x3/2 max pool, and a 1x1/2 convolution + BN on the residual;
                             // otherwise the residual is the block's input
};

std::vector<SeparableBlock> Blocks() {
  std::vector<SeparableBlock> blocks = {{2, {128, 128}, false, true},  // entry flow
                                        {3, {256, 256}, true, true},
                                        {4, {728, 728}, true, true}};
  for (int id = 5; id <= 12; ++id) blocks.push_back({id, {728, 728, 728}, true, false});  // middle flow
  blocks.push_back({13, {728, 1024}, true, true});                                        // exit flow
  return blocks;
}

}  // namespace

Result<std::unique_ptr<Model>> Xception(Options o) {
  const internal::ModelFacts facts{"Xception", "xception", 299, 71};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  KTensor input = internal::ImageInput(o, input_shape);
  // Stem: two 3x3 "valid" convolutions without bias, the first with stride 2.
  KTensor x = input;
  for (int i = 1; i <= 2; ++i) {
    const std::string n = "block1_conv" + std::to_string(i);
    x = Call(layers::Conv2D(i == 1 ? 32 : 64, 3, {.strides = i == 1 ? 2 : 1, .use_bias = false, .name = n}), x);
    x = Call(BatchNormalization({.name = n + "_bn"}), x);
    x = Call(layers::Activation("relu", n + "_act"), x);
  }
  // Keras leaves the residual convolutions, their batch norms and the adds unnamed; these are
  // the names it gives them.
  int residual = 0, adds = 0;
  for (const SeparableBlock& b : Blocks()) {
    const std::string prefix = "block" + std::to_string(b.id) + "_";
    KTensor shortcut = x;
    if (b.downsample) {
      shortcut = Call(layers::Conv2D(b.filters.back(), 1, {.strides = 2, .padding = "same", .use_bias = false,
                                                           .name = internal::AutoName("conv2d", residual)}),
                      x);
      shortcut = Call(BatchNormalization({.name = internal::AutoName("batch_normalization", residual)}), shortcut);
      ++residual;
    }
    for (size_t i = 0; i < b.filters.size(); ++i) {
      const std::string n = prefix + "sepconv" + std::to_string(i + 1);
      if (i > 0 || b.relu_first) x = Call(layers::Activation("relu", n + "_act"), x);
      x = Call(SeparableConv2D(b.filters[i], 3, {.padding = "same", .use_bias = false, .name = n}), x);
      x = Call(BatchNormalization({.name = n + "_bn"}), x);
    }
    if (b.downsample) x = Call(layers::MaxPooling2D({.pool_size = 3, .strides = 2, .padding = "same", .name = prefix + "pool"}), x);
    x = Call(layers::Add(internal::AutoName("add", adds++)), std::vector<KTensor>{x, shortcut});
  }
  // Block 14: separable convolutions without a residual, each followed by its ReLU.
  for (int i = 1; i <= 2; ++i) {
    const std::string n = "block14_sepconv" + std::to_string(i);
    x = Call(SeparableConv2D(i == 1 ? 1536 : 2048, 3, {.padding = "same", .use_bias = false, .name = n}), x);
    x = Call(BatchNormalization({.name = n + "_bn"}), x);
    x = Call(layers::Activation("relu", n + "_act"), x);
  }
  x = internal::Top(x, o, {.top_pool = "avg_pool"});
  return internal::Finish(input, x, o, facts.keras_name);
}

}  // namespace strata::keras::applications
