// The attention layers (MultiHeadAttention): the class, its factory (layers.h), how a Keras
// config builds it, and its registry entry.
//
// Keras's MultiHeadAttention projects with EinsumDense kernels: query and key [d, heads,
// key_dim], value [d, heads, value_dim], the output [heads, value_dim, out]. Here they keep those
// shapes (and names: "<layer>/query/kernel", ...) and are read as matrices ([d, heads x key_dim])
// by a reshape, so the projections are Dense products; the attention itself is a batched
// product of the heads [B, H, T, K] x [B, H, S, K]^T, a softmax over the keys (with a mask: the
// graph's MaskedSoftmax, Keras's masked softmax, masked positions pushed to -1e9 first), dropout
// on the probabilities in training,
// and a batched product with the values.
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "strata/keras/layer_config.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/layers_internal.h"

namespace strata::keras {
namespace layers {
namespace {

using graph::Value;

class MultiHeadAttentionLayer final : public Layer {
 public:
  explicit MultiHeadAttentionLayer(MultiHeadAttentionOptions o) : o_(std::move(o)) {}
  std::string class_name() const override { return "MultiHeadAttention"; }
  std::string default_name() const override { return "multi_head_attention"; }
  int num_inputs() const override { return -1; }  // query, value[, key[, attention_mask]]

  Result<Value> Build(BuildContext& ctx, const std::vector<Value>& in) override {
    graph::Graph& g = *ctx.graph;
    if (in.size() > 4)
      return InvalidArgument(Label() + ": takes query, value, key and attention_mask, got " +
                             std::to_string(in.size()) + " inputs");
    const Value query = in[0], value = in[1], key = in.size() > 2 ? in[2] : in[1];
    const int heads = o_.num_heads, kd = o_.key_dim, vd = o_.value_dim > 0 ? o_.value_dim : o_.key_dim;
    if (heads < 1 || kd < 1 || vd < 1)
      return InvalidArgument(Label() + ": num_heads, key_dim and value_dim must be positive");
    if (!(o_.dropout >= 0 && o_.dropout < 1))
      return InvalidArgument(Label() + ": dropout must be in [0, 1), got " + std::to_string(o_.dropout));
    for (const auto& [what, v] : {std::pair{"query", query}, std::pair{"value", value}, std::pair{"key", key}})
      if (v.shape().rank() != 3)
        return InvalidArgument(Label() + ": " + what + " must be [batch, tokens, features], got " +
                               v.shape().ToString());
    const int64_t batch = query.shape()[0], t = query.shape()[1], s = value.shape()[1];
    if (key.shape()[1] != s || key.shape()[0] != batch || value.shape()[0] != batch)
      return InvalidArgument(Label() + ": query " + query.shape().ToString() + ", value " + value.shape().ToString() +
                             " and key " + key.shape().ToString() + " must share the batch, key and value the tokens");
    const int64_t out_dim = o_.output_shape > 0 ? o_.output_shape : query.shape()[2];

    // Each projection: [B, T, d] -> [B, H, T, k] through the kernel [d, H, k] read as [d, H k].
    auto project = [&](Value x, const std::string& part, int64_t k) -> Result<Value> {
      const std::string layer = name() + "/" + part;
      const int64_t d = x.shape()[2], tokens = x.shape()[1];
      STRATA_ASSIGN_OR_RETURN(auto init, InitOptions(o_.kernel_initializer, static_cast<double>(heads * d),
                                                      static_cast<double>(k * d)));
      STRATA_ASSIGN_OR_RETURN(Value w, ctx.Variable(layer, "kernel", {d, heads, k}, init));
      STRATA_ASSIGN_OR_RETURN(Value w2, g.Reshape(w, Shape{d, heads * k}, layer + "/matrix"));
      // The bias row before the product, so the product's kernel can add it (graph/fusion.h).
      Value bias_row;
      if (o_.use_bias) {
        STRATA_ASSIGN_OR_RETURN(auto binit, InitOptions(o_.bias_initializer));
        STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(layer, "bias", {heads, k}, binit));
        STRATA_ASSIGN_OR_RETURN(bias_row, g.Reshape(b, Shape{heads * k}, layer + "/bias_row"));
      }
      STRATA_ASSIGN_OR_RETURN(Value rows, g.Reshape(x, Shape{batch * tokens, d}, layer + "/rows"));
      STRATA_ASSIGN_OR_RETURN(Value y, g.MatMul(rows, w2, false, false, layer));
      if (o_.use_bias) { STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, bias_row, layer + "/bias_add")); }
      STRATA_ASSIGN_OR_RETURN(y, g.Reshape(y, Shape{batch, tokens, heads, k}, layer + "/heads"));
      return g.Transpose(y, {0, 2, 1, 3}, layer + "/by_head");
    };
    // Keras's order of the weights: query, key, value, attention_output.
    STRATA_ASSIGN_OR_RETURN(Value q, project(query, "query", kd));
    STRATA_ASSIGN_OR_RETURN(Value k, project(key, "key", kd));
    STRATA_ASSIGN_OR_RETURN(Value v, project(value, "value", vd));
    STRATA_ASSIGN_OR_RETURN(q, g.Scale(q, static_cast<float>(1.0 / std::sqrt(static_cast<double>(kd))),
                                       name() + "/scaled_query"));
    STRATA_ASSIGN_OR_RETURN(Value scores, g.MatMul(q, k, false, true, name() + "/scores"));  // [B, H, T, S]
    Value probs;
    if (in.size() == 4) {
      Value mask = in[3];
      if (mask.shape() != Shape{batch, t, s})
        return InvalidArgument(Label() + ": attention_mask must be [batch, query tokens, key tokens] = " +
                               Shape{batch, t, s}.ToString() + ", got " + mask.shape().ToString());
      if (mask.dtype() != DType::kF32 && mask.dtype() != DType::kBF16) {
        STRATA_ASSIGN_OR_RETURN(mask, g.Cast(mask, DType::kF32, name() + "/mask_cast"));
      }
      // Keras's masked softmax: scores + (1 - mask) * -1e9, one mask for every head.
      STRATA_ASSIGN_OR_RETURN(probs, g.MaskedSoftmax(scores, mask, name() + "/softmax"));
    } else {
      STRATA_ASSIGN_OR_RETURN(probs, g.Softmax(scores, name() + "/softmax"));
    }
    if (ctx.training && o_.dropout > 0) {
      STRATA_ASSIGN_OR_RETURN(probs, g.Dropout(probs, o_.dropout, DropoutSeed(ctx, name(), 0), name() + "/dropout"));
    }
    STRATA_ASSIGN_OR_RETURN(Value ctxv, g.MatMul(probs, v, false, false, name() + "/context"));  // [B, H, T, vd]
    STRATA_ASSIGN_OR_RETURN(ctxv, g.Transpose(ctxv, {0, 2, 1, 3}, name() + "/by_token"));
    STRATA_ASSIGN_OR_RETURN(ctxv, g.Reshape(ctxv, Shape{batch * t, heads * vd}, name() + "/rows"));
    // The output projection: kernel [H, vd, out] read as [H vd, out].
    const std::string out_layer = name() + "/attention_output";
    STRATA_ASSIGN_OR_RETURN(auto init, InitOptions(o_.kernel_initializer, static_cast<double>(vd * heads),
                                                    static_cast<double>(out_dim * heads)));
    STRATA_ASSIGN_OR_RETURN(Value wo, ctx.Variable(out_layer, "kernel", {heads, vd, out_dim}, init));
    STRATA_ASSIGN_OR_RETURN(Value wo2, g.Reshape(wo, Shape{heads * vd, out_dim}, out_layer + "/matrix"));
    STRATA_ASSIGN_OR_RETURN(Value y, g.MatMul(ctxv, wo2, false, false, out_layer));
    if (o_.use_bias) {
      STRATA_ASSIGN_OR_RETURN(auto binit, InitOptions(o_.bias_initializer));
      STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(out_layer, "bias", {out_dim}, binit));
      STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, b, out_layer + "/bias_add"));
    }
    return g.Reshape(y, Shape{batch, t, out_dim}, name());
  }

 private:
  MultiHeadAttentionOptions o_;
};

Result<LayerPtr> MultiHeadAttentionFromConfig(LayerConfig& c, const std::string& name) {
  MultiHeadAttentionOptions o;
  o.name = name;
  STRATA_ASSIGN_OR_RETURN(o.num_heads, c.Size("num_heads", 0));
  STRATA_ASSIGN_OR_RETURN(o.key_dim, c.Size("key_dim", 0));
  if (c.Raw("value_dim") && !c.Raw("value_dim")->is_null()) {
    STRATA_ASSIGN_OR_RETURN(o.value_dim, c.Size("value_dim", 0));
  }
  STRATA_ASSIGN_OR_RETURN(double dropout, c.Number("dropout", 0));
  o.dropout = static_cast<float>(dropout);
  STRATA_ASSIGN_OR_RETURN(o.use_bias, c.Bool("use_bias", true));
  if (const nlohmann::json* out = c.Raw("output_shape"); out && !out->is_null()) {
    if (out->is_number_integer()) o.output_shape = out->get<int64_t>();
    else if (out->is_array() && out->size() == 1 && (*out)[0].is_number_integer()) o.output_shape = (*out)[0].get<int64_t>();
    else return InvalidArgument(c.label() + ": output_shape must be one integer (the last axis), got " + out->dump());
  }
  STRATA_ASSIGN_OR_RETURN(o.kernel_initializer, c.String("kernel_initializer", "glorot_uniform"));
  STRATA_ASSIGN_OR_RETURN(o.bias_initializer, c.String("bias_initializer", "zeros"));
  if (const nlohmann::json* axes = c.Raw("attention_axes"); axes && !axes->is_null())
    return InvalidArgument(c.label() + ": attention_axes other than the tokens' are not supported");
  if (o.num_heads < 1 || o.key_dim < 1) return InvalidArgument(c.label() + ": needs num_heads and key_dim >= 1");
  return MultiHeadAttention(o);
}

}  // namespace

LayerPtr MultiHeadAttention(MultiHeadAttentionOptions o) {
  std::string n = o.name;
  return Named<MultiHeadAttentionLayer>(n, std::move(o));
}

}  // namespace layers

std::vector<LayerClass> AttentionLayerClasses() {
  return {{"MultiHeadAttention", layers::MultiHeadAttentionFromConfig}};
}

}  // namespace strata::keras
