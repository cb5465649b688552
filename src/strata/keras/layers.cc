#include "strata/keras/layers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "strata/keras/layers_internal.h"

namespace strata::keras {

using graph::Value;

Result<Value> BuildContext::Variable(const std::string& layer, const std::string& name, Shape shape,
                                     graph::VariableOptions options, bool trainable, float l2) {
  const std::string full = layer + "/" + name;
  Value existing = graph->FindVariable(full);
  if (existing.valid()) return existing;
  // A frozen layer's weights keep their role (a kernel is still a parameter: Keras's
  // non_trainable_weights, saved and loaded as such) but get no gradient.
  const graph::VariableRole role = trainable ? graph::VariableRole::kParameter : graph::VariableRole::kState;
  options.trainable = trainable && !frozen;
  // Each variable's initializer seed comes from the model seed and its name, so weights do
  // not depend on the order graphs are built in.
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : full) h = (h ^ c) * 1099511628211ull;
  options.seed = h;
  STRATA_ASSIGN_OR_RETURN(Value v, graph->Variable(full, std::move(shape), options, role));
  variables.push_back({layer, v, trainable, l2});
  return v;
}

Result<graph::Init> ParseInitializer(const std::string& name) {
  if (name == "glorot_uniform") return graph::Init::kGlorotUniform;
  if (name == "he_normal") return graph::Init::kHeNormal;
  if (name == "zeros") return graph::Init::kZeros;
  if (name == "ones") return graph::Init::kOnes;
  return InvalidArgument("unknown initializer '" + name +
                         "' (glorot_uniform, he_normal, zeros, ones; for kernels also variance_scaling(scale=S, "
                         "mode=M, distribution=D), he_uniform, lecun_normal, lecun_uniform, glorot_normal)");
}

Result<graph::Activation> ParseActivation(const std::string& name) {
  using graph::Activation;
  if (name.empty() || name == "linear") return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "relu6") return Activation::kRelu6;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_approximate") return Activation::kGeluTanh;  // keras.activations.gelu(approximate=True)
  if (name == "swish" || name == "silu") return Activation::kSwish;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "hard_swish" || name == "hard_silu") return Activation::kHardSwish;  // Keras 3's
  // Keras 3 redefined hard_sigmoid as relu6(x + 3) / 6; "hard_sigmoid" here is tf.keras 2's
  // (ApplyActivation), so Keras 3's takes a name of its own.
  if (name == "hard_sigmoid_keras3") return Activation::kHardSigmoid;
  return InvalidArgument("unknown activation '" + name +
                         "' (linear, relu, relu6, gelu, gelu_approximate, swish, silu, sigmoid, tanh, hard_sigmoid, "
                         "hard_sigmoid_keras3, hard_swish, hard_silu, softmax)");
}

Result<Value> Layer::Call(BuildContext& ctx, const std::vector<Value>& inputs) {
  const int n = num_inputs();
  if (n >= 0 && static_cast<int>(inputs.size()) != n)
    return InvalidArgument(Label() + ": expects " + std::to_string(n) + " input(s), got " + std::to_string(inputs.size()));
  if (n < 0 && inputs.size() < 2)
    return InvalidArgument(Label() + ": expects at least 2 inputs, got " + std::to_string(inputs.size()));
  return Build(ctx, inputs);
}

// Keras's generic_utils.to_snake_case: "DepthwiseConv2D" -> "depthwise_conv2d", "ReLU" -> "re_lu".
std::string Layer::default_name() const {
  const std::string cls = class_name();
  const auto at = [&](size_t j) { return j < cls.size() ? static_cast<unsigned char>(cls[j]) : '\0'; };
  std::string out;
  for (size_t i = 0; i < cls.size(); ++i) {
    // An underscore before an upper-case letter that starts a word ("Conv" in "DepthwiseConv2D")
    // or follows a lower-case one ("LU" in "ReLU").
    const bool starts_word = std::islower(at(i + 1)) || std::isdigit(at(i + 1));
    if (i > 0 && std::isupper(at(i)) && (starts_word || std::islower(at(i - 1)))) out += '_';
    out += static_cast<char>(std::tolower(at(i)));
  }
  return out;
}

namespace layers {
namespace {

std::string Trim(std::string t) {
  const size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
}

// Keras's VarianceScaling family, with the fans Keras computes for the kernel (its own kernel
// layout: a depthwise kernel is [k, k, C, multiplier]):
//   "variance_scaling" or "variance_scaling(scale=2.0, mode=fan_out, distribution=truncated_normal)"
//   (defaults scale 1, fan_in, truncated_normal; "normal" means truncated_normal, as tf.keras 2.x),
//   "he_uniform", "lecun_normal", "lecun_uniform", "glorot_normal".
// nullopt: not of the family (the other names go through ParseInitializer).
Result<std::optional<graph::VariableOptions>> VarianceScaling(const std::string& spec, double fan_in, double fan_out) {
  const size_t paren = spec.find('(');
  const std::string name = Trim(spec.substr(0, paren));
  double scale = 1;
  std::string mode = "fan_in", distribution = "truncated_normal";
  if (name == "he_uniform") {
    scale = 2, distribution = "uniform";
  } else if (name == "lecun_uniform") {
    distribution = "uniform";
  } else if (name == "glorot_normal") {
    mode = "fan_avg";
  } else if (name != "lecun_normal" && name != "variance_scaling") {
    return std::optional<graph::VariableOptions>();
  }
  const std::string bad = "initializer '" + spec + "': expected variance_scaling(scale=S, mode=fan_in|fan_out|fan_avg, "
                          "distribution=truncated_normal|untruncated_normal|uniform)";
  if (paren != std::string::npos) {
    if (name != "variance_scaling" || spec.back() != ')') return InvalidArgument(bad);
    std::string args = spec.substr(paren + 1, spec.size() - paren - 2);
    size_t pos = 0;
    while (pos <= args.size()) {
      size_t comma = args.find(',', pos);
      if (comma == std::string::npos) comma = args.size();
      const std::string kv = Trim(args.substr(pos, comma - pos));
      pos = comma + 1;
      if (kv.empty()) continue;
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) return InvalidArgument(bad);
      const std::string k = Trim(kv.substr(0, eq)), v = Trim(kv.substr(eq + 1));
      if (k == "scale") {
        char* end = nullptr;
        scale = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(scale > 0)) return InvalidArgument(bad);
      } else if (k == "mode") {
        mode = v;
      } else if (k == "distribution") {
        distribution = v;
      } else if (k != "seed") {
        return InvalidArgument(bad);
      }
    }
  }
  double n = mode == "fan_in" ? fan_in : mode == "fan_out" ? fan_out : mode == "fan_avg" ? (fan_in + fan_out) / 2 : -1;
  if (n < 0) return InvalidArgument(bad);
  n = std::max(1.0, n);
  graph::VariableOptions o;
  if (distribution == "truncated_normal" || distribution == "normal") {
    o.init = graph::Init::kTruncatedNormal;  // stddev corrected for the truncation, as Keras
    o.value = static_cast<float>(std::sqrt(scale / n) / 0.87962566103423978);
  } else if (distribution == "untruncated_normal") {
    o.init = graph::Init::kNormal;
    o.value = static_cast<float>(std::sqrt(scale / n));
  } else if (distribution == "uniform") {
    o.init = graph::Init::kUniform;
    o.value = static_cast<float>(std::sqrt(3 * scale / n));
  } else {
    return InvalidArgument(bad);
  }
  return std::optional<graph::VariableOptions>(o);
}

}  // namespace

Result<graph::Padding> ParsePadding(const std::string& p, const std::string& label) {
  if (p == "valid") return graph::Padding::kValid;
  if (p == "same") return graph::Padding::kSame;
  return InvalidArgument(label + ": padding must be \"valid\" or \"same\", got \"" + p + "\"");
}

Result<Value> ApplyActivation(graph::Graph& g, const std::string& activation, Value x, const std::string& name) {
  if (activation == "softmax") return g.Softmax(x, name + "/softmax");
  if (activation == "hard_sigmoid") return g.HardSigmoid(x, name);
  STRATA_ASSIGN_OR_RETURN(graph::Activation a, ParseActivation(activation));
  if (a == graph::Activation::kLinear) return x;
  return g.Act(a, x, name);
}

Result<graph::VariableOptions> InitOptions(const std::string& initializer, double fan_in, double fan_out) {
  STRATA_ASSIGN_OR_RETURN(auto vs, VarianceScaling(initializer, fan_in, fan_out));
  if (vs) return *vs;
  // Keras's RandomUniform(-0.05, 0.05) (an Embedding's "uniform") and RandomNormal(0, 0.05).
  if (initializer == "uniform" || initializer == "random_uniform")
    return graph::VariableOptions{.init = graph::Init::kUniform, .value = 0.05f};
  if (initializer == "random_normal") return graph::VariableOptions{.init = graph::Init::kNormal, .value = 0.05f};
  STRATA_ASSIGN_OR_RETURN(graph::Init init, ParseInitializer(initializer));
  graph::VariableOptions o;
  o.init = init;
  return o;
}

uint64_t DropoutSeed(const BuildContext& ctx, const std::string& name, uint64_t seed) {
  if (seed == 0) seed = ctx.seed;
  seed = (seed + static_cast<uint64_t>(ctx.replica) * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
  for (unsigned char c : name) seed = (seed ^ c) * 1099511628211ull;
  return seed;
}

Result<Value> BiasAndActivation(BuildContext& ctx, const std::string& layer, Value y, int64_t units, bool use_bias,
                                const std::string& bias_initializer, const std::string& activation) {
  if (use_bias) {
    STRATA_ASSIGN_OR_RETURN(auto binit, InitOptions(bias_initializer, static_cast<double>(units), static_cast<double>(units)));
    STRATA_ASSIGN_OR_RETURN(Value b, ctx.Variable(layer, "bias", {units}, binit));
    STRATA_ASSIGN_OR_RETURN(y, ctx.graph->BiasAdd(y, b, layer + "/bias_add"));
  }
  return ApplyActivation(*ctx.graph, activation, y, layer + "/" + activation);
}

}  // namespace layers
}  // namespace strata::keras
