// Keras layers, with Keras's argument names and defaults.
//
//   using namespace strata::keras::layers;
//   Conv2D(32, 3, {.padding = "same", .use_bias = false}), BatchNormalization(), ReLU(),
//   MaxPooling2D(), Flatten(), Dense(128, {.activation = "relu"}), Dropout(0.3), Dense(10)
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>
#include <vector>

#include "strata/keras/layer.h"

namespace strata::keras::layers {

struct DenseOptions {
  std::string activation = "linear";
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
  float kernel_regularizer_l2 = 0;  // Keras's regularizers.l2(x)
  std::string name;
};
LayerPtr Dense(int units, DenseOptions o = {});

// A window's (height, width): Keras's kernel_size as an int (square) or a pair,
// Conv2D(128, {1, 7}) for Keras's Conv2D(128, (1, 7)).
struct KernelSize {
  KernelSize(int k) : h(k), w(k) {}  // NOLINT(google-explicit-constructor): Keras's int form
  KernelSize(int height, int width) : h(height), w(width) {}
  int h, w;
};

struct Conv2DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid" | "same"
  int dilation_rate = 1;
  int groups = 1;
  std::string activation = "linear";
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
  float kernel_regularizer_l2 = 0;
  std::string name;
};
LayerPtr Conv2D(int filters, KernelSize kernel_size, Conv2DOptions o = {});

struct DepthwiseConv2DOptions {
  int strides = 1;
  std::string padding = "valid";
  int depth_multiplier = 1;
  int dilation_rate = 1;
  std::string activation = "linear";
  bool use_bias = true;
  std::string depthwise_initializer = "glorot_uniform";
  float depthwise_regularizer_l2 = 0;
  std::string name;
};
LayerPtr DepthwiseConv2D(int kernel_size, DepthwiseConv2DOptions o = {});

struct SeparableConv2DOptions {
  int strides = 1;
  std::string padding = "valid";
  int depth_multiplier = 1;
  std::string activation = "linear";
  bool use_bias = true;
  std::string depthwise_initializer = "glorot_uniform";
  std::string pointwise_initializer = "glorot_uniform";
  std::string name;
};
LayerPtr SeparableConv2D(int filters, int kernel_size, SeparableConv2DOptions o = {});

struct BatchNormalizationOptions {
  float momentum = 0.99f;
  float epsilon = 1e-3f;
  bool center = true;  // beta
  bool scale = true;   // gamma
  // Keras 2.12's argument: training statistics over the global batch (every replica and
  // worker), the exact gradient of that backward; false: each replica's own shard (TPUStrategy).
  bool synchronized = false;
  std::string name;
};
LayerPtr BatchNormalization(BatchNormalizationOptions o = {});

// Keras's LayerNormalization over the last axis (the features of a token, the channels of a
// pixel): each row to mean 0 and variance 1, then gamma * x + beta per feature. Weights
// "gamma" [C] (scale) and "beta" [C] (center), each absent when off, as in Keras.
struct LayerNormalizationOptions {
  int axis = -1;  // -1 or rank - 1: the last axis only
  float epsilon = 1e-3f;
  bool center = true;  // beta
  bool scale = true;   // gamma
  std::string name;
};
LayerPtr LayerNormalization(LayerNormalizationOptions o = {});

// Keras's MultiHeadAttention (Vaswani et al. 2017), called on {query, value}, {query, value,
// key} or {query, value, key, attention_mask}: [batch, tokens, features] each, the mask
// [batch, query tokens, key tokens] of 1 (attend) and 0. Weights as Keras's EinsumDense kernels:
// "query/kernel" [d, num_heads, key_dim], "key/kernel", "value/kernel" [d, num_heads,
// value_dim], "attention_output/kernel" [num_heads, value_dim, output_shape], and their biases
// ([num_heads, key_dim], ..., [output_shape]) when use_bias. Attention over the token axis;
// return_attention_scores is not offered (a layer has one output here).
struct MultiHeadAttentionOptions {
  int num_heads = 0;
  int key_dim = 0;
  int value_dim = 0;         // 0: key_dim
  float dropout = 0;         // on the attention probabilities, in training
  bool use_bias = true;
  int64_t output_shape = 0;  // 0: the query's features
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
  std::string name;
};
LayerPtr MultiHeadAttention(MultiHeadAttentionOptions o);

// Keras's Embedding: the row of "embeddings" [input_dim, output_dim] at each id (int32, or
// float holding whole numbers, which Keras casts): [..., output_dim]. An id outside
// [0, input_dim) fails the step, naming the layer. mask_zero is not offered.
struct EmbeddingOptions {
  int input_dim = 0;
  int output_dim = 0;
  std::string embeddings_initializer = "uniform";  // Keras's RandomUniform(-0.05, 0.05)
  std::string name;
};
LayerPtr Embedding(EmbeddingOptions o);

LayerPtr Activation(const std::string& activation, const std::string& name = "");  // incl. "softmax"
LayerPtr ReLU(const std::string& name = "");
// Keras ReLU(max_value, negative_slope, threshold); max_value < 0: none. ReLU(6.) is relu6:
//   y = max_value          where x >= max_value
//   y = x                  where threshold <= x < max_value
//   y = negative_slope * (x - threshold) otherwise.
// threshold must be 0 where negative_slope != 0 (the other cases compose from relu ops).
struct ReLUOptions {
  float max_value = -1;
  float negative_slope = 0;
  float threshold = 0;
  std::string name;
};
LayerPtr ReLU(ReLUOptions o);

struct Pool2DOptions {
  int pool_size = 2;
  int strides = 0;  // 0: pool_size, as Keras's None
  std::string padding = "valid";
  std::string name;
};
LayerPtr MaxPooling2D(Pool2DOptions o = {});
LayerPtr AveragePooling2D(Pool2DOptions o = {});
LayerPtr GlobalAveragePooling2D(const std::string& name = "");
LayerPtr GlobalMaxPooling2D(const std::string& name = "");
// keepdims: [N, 1, 1, C] instead of [N, C], as Keras's keepdims=True.
struct GlobalPool2DOptions {
  bool keepdims = false;
  std::string name;
};
LayerPtr GlobalAveragePooling2D(GlobalPool2DOptions o);
LayerPtr GlobalMaxPooling2D(GlobalPool2DOptions o);
LayerPtr Flatten(const std::string& name = "");
LayerPtr Dropout(float rate, const std::string& name = "");
// Dropout with Keras's noise_shape: one entry per dimension incl. batch; 0 = None (that dim of the
// input), 1 = the mask is shared (broadcast) along it. EfficientNet's drop-connect: {0, 1, 1, 1}.
// seed 0: derived from the model's seed and the layer's name, as Dropout(rate).
struct DropoutOptions {
  std::vector<int64_t> noise_shape;
  uint64_t seed = 0;
  std::string name;
};
LayerPtr Dropout(float rate, DropoutOptions o);
LayerPtr Add(const std::string& name = "");
// Element-wise product of 2+ inputs; size-1 dimensions broadcast (squeeze-and-excitation:
// [N, H, W, C] * [N, 1, 1, C]), as Keras's Multiply.
LayerPtr Multiply(const std::string& name = "");
LayerPtr Concatenate(int axis = -1, const std::string& name = "");
// InceptionResNetV2's scaled residual: inputs [shortcut, residual] -> shortcut + residual * scale.
LayerPtr CustomScaleLayer(float scale, const std::string& name = "");
// y = x * scale + offset (Keras's Rescaling(1/255.)).
LayerPtr Rescaling(float scale, float offset = 0, const std::string& name = "");
// ConvNeXt's LayerScale (Touvron et al. 2021, keras.applications.convnext): y = x * gamma along
// the last axis; one trainable weight "gamma" [projection_dim], every entry init_values at first.
LayerPtr LayerScale(float init_values, int projection_dim, const std::string& name = "");
// Stochastic depth (Huang et al. 2016; ConvNeXt's StochasticDepth, timm's DropPath), on a residual
// branch: in training each example's branch is dropped whole with probability drop_path_rate and
// kept ones are scaled by 1 / (1 - rate), one draw per example (seeded as Dropout); the identity
// at inference.
LayerPtr StochasticDepth(float drop_path_rate, const std::string& name = "");
// target_shape excludes the batch dimension; one entry may be -1.
LayerPtr Reshape(std::vector<int64_t> target_shape, const std::string& name = "");

// ((top, bottom), (left, right)) zeros, as Keras's ZeroPadding2D(padding=((t, b), (l, r))).
struct ZeroPadding2DOptions {
  int top = 1, bottom = 1, left = 1, right = 1;
  std::string name;
};
LayerPtr ZeroPadding2D(ZeroPadding2DOptions o = {});
LayerPtr ZeroPadding2D(int padding, const std::string& name = "");  // symmetric

// Keras's Cropping2D: removes rows from the top and bottom, columns from the left and right.
struct Cropping2DOptions {
  int top = 0, bottom = 0, left = 0, right = 0;
  std::string name;
};
LayerPtr Cropping2D(Cropping2DOptions o = {});

// Keras's Normalization(axis=-1): y = (x - mean) / max(sqrt(variance), 1e-7); weights "mean" [C],
// "variance" [C] and "count" [] (non-trainable state; Keras counts all three: 2C + 1 params).
// Empty mean/variance: 0 and 1 (what an un-adapted Keras layer holds). Only the last axis.
struct NormalizationOptions {
  int axis = -1;
  std::vector<float> mean, variance;
  std::string name;
};
LayerPtr Normalization(NormalizationOptions o = {});

}  // namespace strata::keras::layers

#pragma GCC visibility pop
