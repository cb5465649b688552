// THE table of op cases: one row per op (and per interesting attribute), each with its
// builder, the finite-difference step and tolerance, and the exact matrix FLOP count of the
// forward op. tests/graph/op_gradient_test.cc runs every row in three modes (f64 gradient
// vs central differences on the reference evaluator; cpu backend vs reference; FLOP count)
// and bench/op_bench.cc times every row on the cpu backend.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "strata/graph/autodiff.h"
#include "strata/graph/graph.h"

namespace strata::testing {

using graph::Graph;
using graph::Value;

struct OpCase {
  std::string name;
  std::vector<Shape> inputs;  // f32 inputs, fed U(-1, 1); differentiated
  // Builds the op on `xs`; may add i32 label inputs (fed in [0, classes)) and variables
  // (fed U(0.5, 1.5)), which are not differentiated.
  std::function<Result<Value>(Graph&, const std::vector<Value>&)> build;
  double fd_tolerance = 1e-6;   // |analytic - numeric| <= tol * max(1, |numeric|), in f64
  double fd_step = 1e-5;
  int64_t matrix_flops = 0;     // of the forward op
  double cpu_tolerance = 1e-4;  // cpu (f32, oneDNN) vs reference, relative to max |value|
  bool finite_differences = true;  // false where the op is not differentiable (casts to bf16)
  int classes = 10;             // range of i32 label inputs
};

inline std::vector<OpCase> AllOpCases() {
  using graph::Activation;
  using graph::Padding;
  std::vector<OpCase> c;
  auto conv = [](graph::Conv2DOptions o) {
    return [o](Graph& g, const std::vector<Value>& x) { return g.Conv2D(x[0], x[1], o, "conv"); };
  };
  c.push_back({"conv2d_same_3x3", {{2, 6, 5, 3}, {3, 3, 3, 4}}, conv({.padding = Padding::kSame}), 1e-6, 1e-5,
               2LL * 2 * 6 * 5 * 4 * 3 * 3 * 3});
  c.push_back({"conv2d_valid_stride2", {{2, 7, 7, 2}, {3, 3, 2, 3}}, conv({.stride_h = 2, .stride_w = 2}), 1e-6, 1e-5,
               2LL * 2 * 3 * 3 * 3 * 3 * 3 * 2});
  c.push_back({"conv2d_same_stride2", {{1, 6, 6, 2}, {3, 3, 2, 2}},
               conv({.stride_h = 2, .stride_w = 2, .padding = Padding::kSame}), 1e-6, 1e-5, 2LL * 1 * 3 * 3 * 2 * 3 * 3 * 2});
  c.push_back({"conv2d_dilated", {{1, 7, 7, 2}, {3, 3, 2, 3}},
               conv({.padding = Padding::kSame, .dilation_h = 2, .dilation_w = 2}), 1e-6, 1e-5,
               2LL * 1 * 7 * 7 * 3 * 3 * 3 * 2});
  // InceptionV3's and InceptionResNetV2's factorized kernels (1x7, 7x1, 1x3, 3x1).
  c.push_back({"conv2d_same_1x7", {{2, 5, 8, 3}, {1, 7, 3, 4}}, conv({.padding = Padding::kSame}), 1e-6, 1e-5,
               2LL * 2 * 5 * 8 * 4 * 1 * 7 * 3});
  c.push_back({"conv2d_valid_7x1_stride2", {{1, 9, 6, 2}, {7, 1, 2, 3}}, conv({.stride_h = 2, .stride_w = 2}), 1e-6,
               1e-5, 2LL * 1 * 2 * 3 * 3 * 7 * 1 * 2});
  c.push_back({"conv2d_grouped", {{2, 5, 5, 4}, {3, 3, 2, 6}}, conv({.padding = Padding::kSame, .groups = 2}), 1e-6,
               1e-5, 2LL * 2 * 5 * 5 * 6 * 3 * 3 * 2});
  c.push_back({"conv2d_depthwise", {{2, 5, 5, 3}, {3, 3, 1, 3}}, conv({.padding = Padding::kSame, .groups = 3}), 1e-6,
               1e-5, 2LL * 2 * 5 * 5 * 3 * 3 * 3 * 1});
  // MobileNetV2's and EfficientNet's stride-2 depthwise convolutions, Xception's multipliers.
  c.push_back({"conv2d_depthwise_stride2_multiplier2_same", {{2, 7, 7, 3}, {3, 3, 1, 6}},
               conv({.stride_h = 2, .stride_w = 2, .padding = Padding::kSame, .groups = 3}), 1e-6, 1e-5,
               2LL * 2 * 4 * 4 * 6 * 3 * 3 * 1});
  c.push_back({"conv2d_depthwise_stride2_multiplier2_valid", {{2, 7, 7, 3}, {3, 3, 1, 6}},
               conv({.stride_h = 2, .stride_w = 2, .groups = 3}), 1e-6, 1e-5, 2LL * 2 * 3 * 3 * 6 * 3 * 3 * 1});
  c.push_back({"conv2d_depthwise_5x5_stride2_same_even", {{1, 6, 6, 2}, {5, 5, 1, 4}},
               conv({.stride_h = 2, .stride_w = 2, .padding = Padding::kSame, .groups = 2}), 1e-6, 1e-5,
               2LL * 1 * 3 * 3 * 4 * 5 * 5 * 1});
  c.push_back({"matmul", {{4, 5}, {5, 3}}, [](Graph& g, const std::vector<Value>& x) { return g.MatMul(x[0], x[1]); },
               1e-6, 1e-5, 2LL * 4 * 3 * 5});
  c.push_back({"matmul_transpose_a", {{5, 4}, {5, 3}},
               [](Graph& g, const std::vector<Value>& x) { return g.MatMul(x[0], x[1], true, false); }, 1e-6, 1e-5,
               2LL * 4 * 3 * 5});
  c.push_back({"matmul_transpose_b", {{4, 5}, {3, 5}},
               [](Graph& g, const std::vector<Value>& x) { return g.MatMul(x[0], x[1], false, true); }, 1e-6, 1e-5,
               2LL * 4 * 3 * 5});
  c.push_back({"bias_add", {{2, 3, 3, 4}, {4}},
               [](Graph& g, const std::vector<Value>& x) { return g.BiasAdd(x[0], x[1]); }});
  c.push_back({"batch_norm_training", {{4, 3, 3, 5}, {5}, {5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value mm, g.Variable("bn/moving_mean", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 STRATA_ASSIGN_OR_RETURN(Value mv, g.Variable("bn/moving_variance", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 return g.BatchNorm(x[0], x[1], x[2], mm, mv, {}, "bn");
               },
               1e-5, 1e-5, 0, 2e-4});
  // Synchronized batch norm with one replica (no cross-replica sum): strata's own kernels
  // instead of oneDNN's, the same function.
  c.push_back({"batch_norm_training_synchronized", {{4, 3, 3, 5}, {5}, {5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value mm, g.Variable("bn/moving_mean", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 STRATA_ASSIGN_OR_RETURN(Value mv, g.Variable("bn/moving_variance", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 return g.BatchNorm(x[0], x[1], x[2], mm, mv, {.synchronized = true}, "bn");
               },
               1e-5, 1e-5, 0, 2e-4});
  // Batch norm + ReLU6, one kernel each way on the cpu backend (norm_act_kernels.h); beta
  // scaled so that channels reach both of ReLU6's kinks.
  c.push_back({"batch_norm_training_relu6", {{4, 3, 3, 5}, {5}, {5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value mm, g.Variable("bn/moving_mean", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 STRATA_ASSIGN_OR_RETURN(Value mv, g.Variable("bn/moving_variance", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 STRATA_ASSIGN_OR_RETURN(Value beta, g.Scale(x[2], 6.0f));
                 STRATA_ASSIGN_OR_RETURN(Value y, g.BatchNorm(x[0], x[1], beta, mm, mv, {}, "bn"));
                 return g.Act(Activation::kRelu6, y);
               },
               1e-5, 1e-5, 0, 2e-4});
  // ZeroPadding2D before a 'valid' convolution (Keras's correct_pad): folded into the
  // convolution's padding on the cpu backend (graph/fusion.h).
  c.push_back({"zero_pad_conv_valid_stride2", {{2, 6, 6, 3}, {3, 3, 3, 4}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value p, g.ZeroPad2D(x[0], 0, 1, 0, 1, "pad"));
                 return g.Conv2D(p, x[1], {.stride_h = 2, .stride_w = 2}, "conv");
               },
               1e-6, 1e-5, 2LL * 2 * 3 * 3 * 4 * 3 * 3 * 3});
  c.push_back({"zero_pad_depthwise_valid_stride2", {{2, 5, 5, 3}, {3, 3, 1, 3}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value p, g.ZeroPad2D(x[0], 1, 1, 1, 1, "pad"));
                 return g.Conv2D(p, x[1], {.stride_h = 2, .stride_w = 2, .groups = 3}, "conv");
               },
               1e-6, 1e-5, 2LL * 2 * 3 * 3 * 3 * 3 * 3 * 1});
  c.push_back({"batch_norm_inference_relu", {{4, 3, 3, 5}, {5}, {5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value mm, g.Variable("bn/moving_mean", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 STRATA_ASSIGN_OR_RETURN(Value mv, g.Variable("bn/moving_variance", {5}, {.trainable = false},
                                                              graph::VariableRole::kState));
                 STRATA_ASSIGN_OR_RETURN(Value y, g.BatchNormInference(x[0], x[1], x[2], mm, mv, {}, "bn"));
                 return g.Relu(y);
               },
               1e-6, 1e-5, 0, 1e-4, false});  // no gradient rule for inference batch norm
  // Layer normalization over the last axis: a row of 6 (a transformer's tokens) and the
  // channels of [N, H, W, C].
  c.push_back({"layer_norm_rows", {{4, 6}, {6}, {6}},
               [](Graph& g, const std::vector<Value>& x) { return g.LayerNorm(x[0], x[1], x[2], {}, "ln"); }, 1e-5,
               1e-5, 0, 2e-4});
  c.push_back({"layer_norm_channels", {{2, 3, 3, 5}, {5}, {5}},
               [](Graph& g, const std::vector<Value>& x) {
                 return g.LayerNorm(x[0], x[1], x[2], {.epsilon = 1e-6f}, "ln");
               },
               1e-5, 1e-5, 0, 2e-4});
  for (Activation a : {Activation::kRelu, Activation::kRelu6, Activation::kGelu, Activation::kGeluTanh, Activation::kSwish,
                       Activation::kSigmoid, Activation::kTanh, Activation::kHardSigmoid, Activation::kHardSwish}) {
    c.push_back({std::string("activation_") + graph::ActivationName(a), {{3, 4, 5}},
                 [a](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                   // Scaled so relu6 and the hard sigmoid and swish see both of their kinks' sides.
                   STRATA_ASSIGN_OR_RETURN(Value s, g.Scale(x[0], 8.0f));
                   return g.Act(a, s);
                 },
                 1e-6, 1e-6});
  }
  c.push_back({"softmax", {{3, 6}}, [](Graph& g, const std::vector<Value>& x) { return g.Softmax(x[0]); }});
  // Attention's: [batch 2, heads 3, queries 4, keys 19] (a 16-lane block and a remainder) under a
  // [2, 4, 19] mask of ones and zeros. (A row masked everywhere comes out uniform in f32, as
  // Keras's, x drowned in -1e9; the f64 reference keeps x there, so the case has no such row.)
  c.push_back({"masked_softmax_heads", {{2, 3, 4, 19}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 std::vector<float> mask(2 * 4 * 19);
                 for (size_t e = 0; e < mask.size(); ++e) mask[e] = (e * 7) % 5 < 3 ? 1.0f : 0.0f;
                 STRATA_ASSIGN_OR_RETURN(Value m, g.ConstantValues(std::move(mask), Shape{2, 4, 19}, "mask"));
                 return g.MaskedSoftmax(x[0], m);
               },
               1e-6, 1e-5});
  c.push_back({"max_pool_valid", {{2, 6, 6, 3}},
               [](Graph& g, const std::vector<Value>& x) { return g.MaxPool(x[0], {}); }});
  c.push_back({"max_pool_same_3x3_stride2", {{1, 5, 5, 2}},
               [](Graph& g, const std::vector<Value>& x) {
                 return g.MaxPool(x[0], {.window_h = 3, .window_w = 3, .stride_h = 2, .stride_w = 2,
                                         .padding = Padding::kSame});
               }});
  c.push_back({"avg_pool_same_3x3", {{2, 5, 5, 2}},
               [](Graph& g, const std::vector<Value>& x) {
                 return g.AvgPool(x[0], {.window_h = 3, .window_w = 3, .stride_h = 1, .stride_w = 1,
                                         .padding = Padding::kSame});
               }});
  c.push_back({"global_avg_pool", {{2, 4, 3, 5}},
               [](Graph& g, const std::vector<Value>& x) { return g.GlobalAvgPool(x[0]); }});
  c.push_back({"global_max_pool", {{2, 4, 3, 5}},
               [](Graph& g, const std::vector<Value>& x) { return g.GlobalMaxPool(x[0]); }});
  c.push_back({"add", {{2, 3, 4}, {2, 3, 4}}, [](Graph& g, const std::vector<Value>& x) { return g.Add(x[0], x[1]); }});
  c.push_back({"sub", {{2, 3, 4}, {2, 3, 4}}, [](Graph& g, const std::vector<Value>& x) { return g.Sub(x[0], x[1]); }});
  c.push_back({"multiply", {{2, 3, 2, 4}, {2, 3, 2, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.Multiply(x[0], x[1]); }});
  // Composites (graph.h): emitted as the ops above, checked end to end the same way.
  c.push_back({"multiply_broadcast_squeeze_excitation", {{2, 3, 3, 4}, {2, 1, 1, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.Multiply(x[0], x[1]); }});
  c.push_back({"multiply_broadcast_both_sides", {{2, 1, 3, 4}, {2, 3, 1, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.Multiply(x[0], x[1]); }});
  c.push_back({"zero_pad2d_asymmetric", {{2, 3, 4, 2}},
               [](Graph& g, const std::vector<Value>& x) { return g.ZeroPad2D(x[0], 1, 0, 2, 1); }});
  c.push_back({"clipped_relu_max_value", {{3, 4, 5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value s, g.Scale(x[0], 8.0f));
                 return g.ClippedRelu(s, 4.0f, 0.0f);
               },
               1e-6, 1e-6});
  c.push_back({"clipped_relu_max_value_negative_slope", {{3, 4, 5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value s, g.Scale(x[0], 8.0f));
                 return g.ClippedRelu(s, 2.5f, 0.1f);
               },
               1e-6, 1e-6});
  c.push_back({"hard_sigmoid", {{3, 4, 5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value s, g.Scale(x[0], 4.0f));  // both kinks (+-2.5)
                 return g.HardSigmoid(s);
               },
               1e-6, 1e-6});
  c.push_back({"dropout_noise_shape_per_example", {{4, 3, 3, 2}},
               [](Graph& g, const std::vector<Value>& x) { return g.Dropout(x[0], 0.3f, 7, Shape{4, 1, 1, 1}); }});
  c.push_back({"concat_channels", {{2, 3, 3, 2}, {2, 3, 3, 3}},
               [](Graph& g, const std::vector<Value>& x) { return g.Concat({x[0], x[1]}, 3); }});
  c.push_back({"concat_rows", {{2, 3}, {4, 3}},
               [](Graph& g, const std::vector<Value>& x) { return g.Concat({x[0], x[1]}, 0); }});
  c.push_back({"slice", {{3, 6}}, [](Graph& g, const std::vector<Value>& x) { return g.Slice(x[0], 1, 2, 5); }});
  c.push_back({"flatten", {{2, 3, 3, 2}}, [](Graph& g, const std::vector<Value>& x) { return g.Flatten(x[0]); }});
  c.push_back({"reshape", {{4, 6}}, [](Graph& g, const std::vector<Value>& x) { return g.Reshape(x[0], {2, -1, 3}); }});
  c.push_back({"dropout", {{4, 8}}, [](Graph& g, const std::vector<Value>& x) { return g.Dropout(x[0], 0.3f, 7); }});
  c.push_back({"reduce_sum_axes", {{2, 3, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.ReduceSum(x[0], {0, 2}); }});
  c.push_back({"reduce_mean_all", {{2, 3, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.ReduceMean(x[0]); }});
  c.push_back({"softmax_cross_entropy", {{4, 5}},
               [](Graph& g, const std::vector<Value>& x) {
                 return g.SoftmaxCrossEntropy(x[0], g.Input("labels", DType::kI32, {4}));
               },
               1e-6, 1e-5, 0, 1e-4, true, 5});
  c.push_back({"softmax_cross_entropy_smoothing", {{4, 5}},
               [](Graph& g, const std::vector<Value>& x) {
                 return g.SoftmaxCrossEntropy(x[0], g.Input("labels", DType::kI32, {4}), 0.1f);
               },
               1e-6, 1e-5, 0, 1e-4, true, 5});
  c.push_back({"mean_squared_error", {{3, 4}, {3, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.MeanSquaredError(x[0], x[1]); }});
  c.push_back({"identity", {{3, 4}}, [](Graph& g, const std::vector<Value>& x) { return g.Identity(x[0]); }});
  c.push_back({"cast_f32", {{3, 4}}, [](Graph& g, const std::vector<Value>& x) { return g.Cast(x[0], DType::kF32); }});
  c.push_back({"cast_bf16_round_trip", {{3, 4}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value b, g.Cast(x[0], DType::kBF16));
                 return g.Cast(b, DType::kF32);
               },
               1e-6, 1e-5, 0, 1e-6, false});
  // Attention's batched products: [B, H, T, K] x [B, H, S, K]^T and the probabilities times the
  // values, and the heads' transposes around them.
  c.push_back({"matmul_batched_transpose_b", {{2, 3, 4, 5}, {2, 3, 6, 5}},
               [](Graph& g, const std::vector<Value>& x) { return g.MatMul(x[0], x[1], false, true); }, 1e-6, 1e-5,
               2LL * 2 * 3 * 4 * 6 * 5});
  c.push_back({"matmul_batched_transpose_a", {{3, 5, 4}, {3, 5, 2}},
               [](Graph& g, const std::vector<Value>& x) { return g.MatMul(x[0], x[1], true, false); }, 1e-6, 1e-5,
               2LL * 3 * 4 * 2 * 5});
  // An embedding's lookup: rows of a [10, 4] table at int32 ids (fed in [0, 10), repeats
  // included, so the gradient adds rows).
  c.push_back({"gather_embedding", {{10, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.Gather(x[0], g.Input("ids", DType::kI32, {3, 5})); }});
  c.push_back({"transpose_heads", {{2, 3, 4, 5}},
               [](Graph& g, const std::vector<Value>& x) { return g.Transpose(x[0], {0, 2, 1, 3}); }});
  c.push_back({"transpose_rank3_reversed", {{2, 3, 4}},
               [](Graph& g, const std::vector<Value>& x) { return g.Transpose(x[0], {2, 1, 0}); }});
  c.push_back({"dense_bias_relu_chain", {{4, 6}, {6, 5}, {5}},
               [](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value y, g.MatMul(x[0], x[1]));
                 STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, x[2]));
                 return g.Act(graph::Activation::kTanh, y);
               },
               1e-6, 1e-5, 2LL * 4 * 5 * 6});
  // MobileNetV3's hard sigmoid gate and hard swish fused into a convolution's epilogue on the
  // cpu backend (oneDNN post-ops: x / 6 + 1/2 clipped to [0, 1]; hardswish); scaled inputs reach
  // both kinks.
  for (Activation a : {Activation::kHardSigmoid, Activation::kHardSwish}) {
    c.push_back({std::string("conv_bias_") + graph::ActivationName(a), {{2, 4, 4, 3}, {1, 1, 3, 5}, {5}},
                 [a](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                   STRATA_ASSIGN_OR_RETURN(Value s, g.Scale(x[0], 6.0f));
                   STRATA_ASSIGN_OR_RETURN(Value y, g.Conv2D(s, x[1], {}, "conv"));
                   STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, x[2]));
                   return g.Act(a, y);
                 },
                 1e-6, 1e-5, 2LL * 2 * 4 * 4 * 5 * 3});
  }
  // 24 channels fill one and a half of oneDNN's 16-channel blocks (MobileNetV3's 184, 72, 88,
  // ...): the activations' gradients run on the padded blocked buffer as one flat vector.
  for (Activation a : {Activation::kHardSwish, Activation::kGelu, Activation::kSwish, Activation::kRelu}) {
    c.push_back({std::string("conv_partial_block_") + graph::ActivationName(a), {{2, 3, 3, 8}, {1, 1, 8, 24}},
                 [a](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                   STRATA_ASSIGN_OR_RETURN(Value y, g.Conv2D(x[0], x[1], {}, "conv"));
                   STRATA_ASSIGN_OR_RETURN(y, g.Scale(y, 4.0f));  // both sides of the kinks; no fusion
                   return g.Act(a, y);
                 },
                 1e-6, 1e-5, 2LL * 2 * 3 * 3 * 24 * 8});
  }
  // EfficientNet's squeeze-and-excitation and drop-connect (broadcast_kernels.h): on a 1x1
  // convolution's 32 channels the cpu backend keeps oneDNN's channel-blocked layout (nChw16c,
  // nChw8c under AVX2) through the broadcast multiply, the global pool's gradient and the sum
  // over H and W; 37 channels run the plain path with a vector remainder.
  auto conv1x1 = [](Graph& g, const std::vector<Value>& x) {
    return g.Conv2D(x[0], x[1], {.padding = graph::Padding::kSame}, "conv");
  };
  c.push_back({"squeeze_excitation_on_conv_blocked", {{2, 3, 4, 8}, {1, 1, 8, 32}, {2, 1, 1, 32}},
               [conv1x1](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value y, conv1x1(g, x));
                 STRATA_ASSIGN_OR_RETURN(Value m, g.GlobalAvgPool(y));  // the factor's gradient flows back too
                 STRATA_ASSIGN_OR_RETURN(m, g.Reshape(m, {2, 1, 1, 32}));
                 STRATA_ASSIGN_OR_RETURN(Value f, g.Multiply(m, x[2]));
                 return g.Multiply(y, f);
               },
               1e-6, 1e-5, 2LL * 2 * 3 * 4 * 32 * 8});
  c.push_back({"drop_connect_on_conv_blocked", {{2, 3, 3, 8}, {1, 1, 8, 32}},
               [conv1x1](Graph& g, const std::vector<Value>& x) -> Result<Value> {
                 STRATA_ASSIGN_OR_RETURN(Value y, conv1x1(g, x));
                 return g.Dropout(y, 0.3f, 7, Shape{2, 1, 1, 1});
               },
               1e-6, 1e-5, 2LL * 2 * 3 * 3 * 32 * 8});
  c.push_back({"multiply_broadcast_squeeze_excitation_37_channels", {{2, 3, 2, 37}, {2, 1, 1, 37}},
               [](Graph& g, const std::vector<Value>& x) { return g.Multiply(x[0], x[1]); }});
  c.push_back({"global_avg_pool_37_channels", {{2, 3, 5, 37}},
               [](Graph& g, const std::vector<Value>& x) { return g.GlobalAvgPool(x[0]); }});
  return c;
}

// The graph of one case: the op, projected to a scalar loss by a fixed random weighting so
// that every output element's gradient matters: loss = sum(y * r).
struct CaseGraph {
  Graph g;
  std::vector<Value> xs;
  Value y, loss;
  std::vector<Value> grads;
  int first_grad_node = 0;
  int forward_nodes = 0;
};

inline Status BuildCase(const OpCase& c, CaseGraph& cg) {
  for (size_t i = 0; i < c.inputs.size(); ++i)
    cg.xs.push_back(cg.g.Input("x" + std::to_string(i), DType::kF32, c.inputs[i]));
  const int before = cg.g.num_nodes();
  STRATA_ASSIGN_OR_RETURN(cg.y, c.build(cg.g, cg.xs));
  cg.forward_nodes = cg.g.num_nodes() - before;
  if (cg.y.dtype() != DType::kF32) return InvalidArgument("case output must be f32");
  if (cg.y.shape() == Shape{}) {
    cg.loss = cg.y;
  } else {
    Value r = cg.g.Input("projection", DType::kF32, cg.y.shape());
    STRATA_ASSIGN_OR_RETURN(Value prod, cg.g.Multiply(cg.y, r, "project"));
    STRATA_ASSIGN_OR_RETURN(cg.loss, cg.g.ReduceSum(prod, {}, "loss"));
  }
  cg.first_grad_node = cg.g.num_nodes();
  if (c.finite_differences) {
    STRATA_ASSIGN_OR_RETURN(cg.grads, graph::Gradients(cg.g, cg.loss, cg.xs));
  }
  return Status::OK();
}

}  // namespace strata::testing
