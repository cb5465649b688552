// ViTB16 and ViTS16 (Dosovitskiy et al. 2021), as KerasHub's ViTBackbone and ViTImageClassifier
// build them (keras_hub/src/models/vit): 16 x 16 patches embedded by a convolution, a class token
// in front, a learned position embedding added, pre-norm encoder blocks (layer normalization,
// multi-head self-attention, residual; layer normalization, a GELU MLP, residual), a final layer
// normalization, and the classifier on the class token.
//
// The layers and weights carry KerasHub's paths: vit_patching_and_embedding/{class_token,
// patch_embedding/kernel, patch_embedding/bias, position_embedding/embeddings},
// vit_encoder/transformer_block_<i>/{ln_1, mha/{query, key, value, attention_output}, ln_2,
// mlp/dense_1, mlp/dense_2}, vit_encoder/ln, and the classifier "predictions". KerasHub's nested
// layers are flat here, their names joined by "/"; its residual sums, unnamed operators there,
// are Add layers "<block>/add_1" and "<block>/add_2".
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/keras/applications/applications_internal.h"
#include "strata/keras/layers_internal.h"

namespace strata::keras::applications {
namespace {

using graph::Value;

struct Config {
  const char* function;
  const char* keras_name;
  int hidden, layers, heads, mlp;
};
constexpr Config kB16{"ViTB16", "vit_b16", 768, 12, 12, 3072};
constexpr Config kS16{"ViTS16", "vit_s16", 384, 12, 6, 1536};
constexpr int kPatch = 16;
constexpr float kEpsilon = 1e-6f;  // every layer normalization's

// The four source rows (edges clamped) and weights of each of `out` samples resampled from `in`
// by PyTorch's bicubic interpolation (cubic convolution with A = -0.75, align_corners false).
struct Taps {
  int64_t at[4];
  double w[4];
};
std::vector<Taps> BicubicTaps(int64_t in, int64_t out) {
  constexpr double A = -0.75;
  auto near = [](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double src = scale * (static_cast<double>(o) + 0.5) - 0.5;
    const double base = std::floor(src), t = src - base;
    const double w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      taps[o].at[k] = std::clamp<int64_t>(static_cast<int64_t>(base) - 1 + k, 0, in - 1);
      taps[o].w[k] = w[k];
    }
  }
  return taps;
}

// KerasHub's ViTPatchingAndEmbedding: the patches' convolution, flattened to tokens, the class
// token in front, the position embedding (one row per token) added.
class PatchingAndEmbedding final : public Layer {
 public:
  PatchingAndEmbedding(int hidden, int patch) : hidden_(hidden), patch_(patch) {}
  std::string class_name() const override { return "ViTPatchingAndEmbedding"; }

  // A position embedding of another grid (weights for another input size, square as published):
  // the class token's row as it is, the grid's rows resampled bicubically to this model's grid,
  // as timm's resample_abs_pos_embed does (PyTorch's bicubic: A = -0.75, align_corners false,
  // edges clamped; no antialiasing when shrinking).
  bool ResampleWeight(const std::string& weight, const Shape& from, const std::vector<float>& in, const Shape& to,
                      std::vector<float>* out) const override {
    if (weight != "position_embedding/embeddings" || from.rank() != 2 || to.rank() != 2 || from[1] != to[1])
      return false;
    const int64_t g0 = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(from[0] - 1))));
    if (g0 < 1 || g0 * g0 + 1 != from[0] || grid_h_ * grid_w_ + 1 != to[0]) return false;
    if (out == nullptr) return true;
    const int64_t d = to[1];
    out->assign(static_cast<size_t>(to.num_elements()), 0.0f);
    std::copy(in.begin(), in.begin() + d, out->begin());  // the class token's row
    const std::vector<Taps> ys = BicubicTaps(g0, grid_h_), xs = BicubicTaps(g0, grid_w_);
    for (int64_t y = 0; y < grid_h_; ++y)
      for (int64_t x = 0; x < grid_w_; ++x)
        for (int64_t c = 0; c < d; ++c) {
          double sum = 0;
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j)
              sum += ys[y].w[i] * xs[x].w[j] * in[(1 + ys[y].at[i] * g0 + xs[x].at[j]) * d + c];
          (*out)[(1 + y * grid_w_ + x) * d + c] = static_cast<float>(sum);
        }
    return true;
  }

  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    graph::Graph& g = *ctx.graph;
    const Value x = in[0];
    const Shape& xs = x.shape();
    if (xs.rank() != 4) return InvalidArgument(Label() + ": expects images [N, H, W, C], got " + xs.ToString());
    if (xs[1] % patch_ != 0 || xs[2] % patch_ != 0)
      return InvalidArgument(Label() + ": the image's height and width must be multiples of the patch size " +
                             std::to_string(patch_) + ", got " + xs.ToString());
    grid_h_ = xs[1] / patch_;
    grid_w_ = xs[2] / patch_;
    const int64_t batch = xs[0], channels = xs[3], tokens = grid_h_ * grid_w_ + 1;
    const std::string& n = name();
    // KerasHub's order of the weights: class_token, the patch convolution, the position embedding.
    STRATA_ASSIGN_OR_RETURN(Value cls, ctx.Variable(n, "class_token", {1, 1, hidden_},
                                                    {.init = graph::Init::kNormal, .value = 0.05f}));
    const double fan = static_cast<double>(patch_) * patch_;
    STRATA_ASSIGN_OR_RETURN(auto kinit, layers::InitOptions("glorot_uniform", fan * channels, fan * hidden_));
    STRATA_ASSIGN_OR_RETURN(Value kernel,
                            ctx.Variable(n, "patch_embedding/kernel", {patch_, patch_, channels, hidden_}, kinit));
    STRATA_ASSIGN_OR_RETURN(Value bias, ctx.Variable(n, "patch_embedding/bias", {hidden_}, {}));
    STRATA_ASSIGN_OR_RETURN(Value pos, ctx.Variable(n, "position_embedding/embeddings", {tokens, hidden_},
                                                    {.init = graph::Init::kNormal, .value = 0.02f}));
    const int p = static_cast<int>(patch_);
    STRATA_ASSIGN_OR_RETURN(Value y, g.Conv2D(x, kernel, {.stride_h = p, .stride_w = p}, n + "/patch_embedding"));
    STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, bias, n + "/patch_embedding/bias_add"));
    STRATA_ASSIGN_OR_RETURN(y, g.Reshape(y, Shape{batch, tokens - 1, hidden_}, n + "/tokens"));
    STRATA_ASSIGN_OR_RETURN(Value cls_rows, g.BroadcastTo(cls, Shape{batch, 1, hidden_}, n + "/class_tokens"));
    STRATA_ASSIGN_OR_RETURN(y, g.Concat({cls_rows, y}, 1, n + "/with_class_token"));
    STRATA_ASSIGN_OR_RETURN(Value pos_rows, g.Reshape(pos, Shape{1, tokens, hidden_}, n + "/position_rows"));
    STRATA_ASSIGN_OR_RETURN(pos_rows, g.BroadcastTo(pos_rows, Shape{batch, tokens, hidden_}, n + "/positions"));
    return g.Add(y, pos_rows, n);
  }

 private:
  int64_t hidden_, patch_;
  int64_t grid_h_ = 0, grid_w_ = 0;  // the patches' grid of the input it was built on
};

// KerasHub's ViTImageClassifier pooling="token": the class token's features, x[:, 0].
class ClassTokenPooling final : public Layer {
 public:
  std::string class_name() const override { return "ClassTokenPooling"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    const Value x = in[0];
    if (x.shape().rank() != 3)
      return InvalidArgument(Label() + ": expects tokens [N, T, D], got " + x.shape().ToString());
    STRATA_ASSIGN_OR_RETURN(Value first, ctx.graph->Slice(x, 1, 0, 1, name() + "/first"));
    return ctx.graph->Reshape(first, Shape{x.shape()[0], x.shape()[2]}, name());
  }
};

// Averages or takes the maximum over the tokens (the no-top model's pooling="avg" / "max").
class TokenPooling final : public Layer {
 public:
  explicit TokenPooling(bool average) : average_(average) {}
  std::string class_name() const override { return average_ ? "GlobalAveragePooling1D" : "GlobalMaxPooling1D"; }
  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    const Value x = in[0];
    if (x.shape().rank() != 3)
      return InvalidArgument(Label() + ": expects tokens [N, T, D], got " + x.shape().ToString());
    // As images of one row: the 2-D global pools over [N, 1, T, D].
    STRATA_ASSIGN_OR_RETURN(Value row, ctx.graph->Reshape(x, Shape{x.shape()[0], 1, x.shape()[1], x.shape()[2]},
                                                          name() + "/row"));
    return average_ ? ctx.graph->GlobalAvgPool(row, name()) : ctx.graph->GlobalMaxPool(row, name());
  }

 private:
  bool average_;
};

template <typename T, typename... Args>
LayerPtr Make(const std::string& name, Args&&... args) {
  auto l = std::make_shared<T>(std::forward<Args>(args)...);
  l->set_name(name);
  return l;
}

LayerPtr Norm(const std::string& name) { return layers::LayerNormalization({.epsilon = kEpsilon, .name = name}); }

// KerasHub's ViTEncoderBlock "vit_encoder/transformer_block_<i>".
KTensor EncoderBlock(const KTensor& in, const Config& c, const std::string& block) {
  KTensor x = Call(Norm(block + "/ln_1"), in);
  x = Call(layers::MultiHeadAttention({.num_heads = c.heads, .key_dim = c.hidden / c.heads, .name = block + "/mha"}),
           std::vector<KTensor>{x, x});
  x = Call(layers::Add(block + "/add_1"), std::vector<KTensor>{x, in});
  KTensor y = Call(Norm(block + "/ln_2"), x);
  y = Call(layers::Dense(c.mlp, {.activation = "gelu", .name = block + "/mlp/dense_1"}), y);
  y = Call(layers::Dense(c.hidden, {.name = block + "/mlp/dense_2"}), y);
  return Call(layers::Add(block + "/add_2"), std::vector<KTensor>{x, y});
}

Result<std::unique_ptr<Model>> Build(const Config& c, Options o) {
  const internal::ModelFacts facts{.function = c.function, .keras_name = c.keras_name};
  STRATA_ASSIGN_OR_RETURN(Shape input_shape, internal::CheckOptions(o, facts));
  if (input_shape[0] % kPatch != 0 || input_shape[1] % kPatch != 0)
    return InvalidArgument(std::string(c.function) + ": input_shape " + input_shape.ToString() +
                           ": height and width must be multiples of the patch size 16 (as KerasHub's ViT)");
  KTensor input = internal::ImageInput(o, input_shape);
  KTensor x = Call(Make<PatchingAndEmbedding>("vit_patching_and_embedding", c.hidden, kPatch), input);
  for (int i = 1; i <= c.layers; ++i) x = EncoderBlock(x, c, "vit_encoder/transformer_block_" + std::to_string(i));
  x = Call(Norm("vit_encoder/ln"), x);
  if (o.include_top) {
    x = Call(Make<ClassTokenPooling>("class_token"), x);
    x = Call(internal::Predictions(o), x);
  } else {
    if (o.pooling == "avg") x = Call(Make<TokenPooling>("avg_pool", true), x);
    if (o.pooling == "max") x = Call(Make<TokenPooling>("max_pool", false), x);
  }
  return internal::Finish(input, x, o, c.keras_name);
}

}  // namespace

Result<std::unique_ptr<Model>> ViTB16(Options o) { return Build(kB16, std::move(o)); }
Result<std::unique_ptr<Model>> ViTS16(Options o) { return Build(kS16, std::move(o)); }

}  // namespace strata::keras::applications
