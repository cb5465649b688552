#include "common/reference_cnn_graph.h"

#include "strata/backend/update_rule.h"
#include "strata/graph/autodiff.h"

namespace strata::testing {

using namespace graph;  // NOLINT: a graph builder

namespace {

Result<Value> ConvBnRelu(Graph& g, Value x, int64_t filters, const std::string& name, const ReferenceCnnOptions& o,
                         uint64_t seed) {
  const int64_t c = x.shape()[3];
  STRATA_ASSIGN_OR_RETURN(Value k, g.Variable(name + "/kernel", {3, 3, c, filters},
                                              {.init = Init::kGlorotUniform, .seed = seed}));
  STRATA_ASSIGN_OR_RETURN(Value b, g.Variable(name + "/bias", {filters}));
  STRATA_ASSIGN_OR_RETURN(Value gamma, g.Variable(name + "_bn/gamma", {filters}, {.init = Init::kOnes}));
  STRATA_ASSIGN_OR_RETURN(Value beta, g.Variable(name + "_bn/beta", {filters}));
  STRATA_ASSIGN_OR_RETURN(Value mm, g.Variable(name + "_bn/moving_mean", {filters}, {.trainable = false},
                                               VariableRole::kState));
  STRATA_ASSIGN_OR_RETURN(Value mv, g.Variable(name + "_bn/moving_variance", {filters},
                                               {.init = Init::kOnes, .trainable = false}, VariableRole::kState));
  STRATA_ASSIGN_OR_RETURN(Value y, g.Conv2D(x, k, {.padding = Padding::kSame}, name));
  STRATA_ASSIGN_OR_RETURN(y, g.BiasAdd(y, b, name + "/bias_add"));
  if (o.training) {
    STRATA_ASSIGN_OR_RETURN(y, g.BatchNorm(y, gamma, beta, mm, mv, {}, name + "_bn"));
  } else {
    STRATA_ASSIGN_OR_RETURN(y, g.BatchNormInference(y, gamma, beta, mm, mv, {}, name + "_bn"));
  }
  return g.Relu(y, name + "_relu");
}

}  // namespace

Result<ReferenceCnn> BuildReferenceCnn(Graph& g, const ReferenceCnnOptions& o) {
  ReferenceCnn m;
  m.images = g.Input("images", DType::kF32, {o.batch, o.height, o.width, o.channels});
  m.labels = g.Input("labels", DType::kI32, {o.batch});
  Value x = m.images;
  STRATA_ASSIGN_OR_RETURN(x, ConvBnRelu(g, x, 32, "conv2d", o, o.seed + 1));
  STRATA_ASSIGN_OR_RETURN(x, ConvBnRelu(g, x, 32, "conv2d_1", o, o.seed + 2));
  STRATA_ASSIGN_OR_RETURN(x, g.MaxPool(x, {}, "max_pooling2d"));
  STRATA_ASSIGN_OR_RETURN(x, ConvBnRelu(g, x, 64, "conv2d_2", o, o.seed + 3));
  STRATA_ASSIGN_OR_RETURN(x, ConvBnRelu(g, x, 64, "conv2d_3", o, o.seed + 4));
  STRATA_ASSIGN_OR_RETURN(x, g.MaxPool(x, {}, "max_pooling2d_1"));
  STRATA_ASSIGN_OR_RETURN(x, g.Flatten(x, "flatten"));
  const int64_t features = x.shape()[1];
  STRATA_ASSIGN_OR_RETURN(Value w1, g.Variable("dense/kernel", {features, 128},
                                               {.init = Init::kGlorotUniform, .seed = o.seed + 5}));
  STRATA_ASSIGN_OR_RETURN(Value b1, g.Variable("dense/bias", {128}));
  STRATA_ASSIGN_OR_RETURN(x, g.MatMul(x, w1, false, false, "dense"));
  STRATA_ASSIGN_OR_RETURN(x, g.BiasAdd(x, b1, "dense/bias_add"));
  STRATA_ASSIGN_OR_RETURN(x, g.Relu(x, "dense_relu"));
  if (o.training && o.dropout > 0) {
    STRATA_ASSIGN_OR_RETURN(x, g.Dropout(x, o.dropout, o.seed + 7, "dropout"));
  }
  STRATA_ASSIGN_OR_RETURN(Value w2, g.Variable("dense_1/kernel", {128, o.classes},
                                               {.init = Init::kGlorotUniform, .seed = o.seed + 6}));
  STRATA_ASSIGN_OR_RETURN(Value b2, g.Variable("dense_1/bias", {o.classes}));
  STRATA_ASSIGN_OR_RETURN(x, g.MatMul(x, w2, false, false, "dense_1"));
  STRATA_ASSIGN_OR_RETURN(m.logits, g.BiasAdd(x, b2, "dense_1/bias_add"));
  STRATA_ASSIGN_OR_RETURN(m.loss, g.SoftmaxCrossEntropy(m.logits, m.labels, 0, "loss"));
  if (!o.training) return m;
  STRATA_ASSIGN_OR_RETURN(m.grads, Gradients(g, m.loss, TrainableVariables(g)));
  return m;
}

void ApplyReferenceSgd(const backend::Backend& backend, backend::VariableStore& vars, float lr,
                       std::vector<float>* velocity, float momentum) {
  const int64_t n = vars.num_trainable();
  velocity->resize(static_cast<size_t>(n), 0.0f);
  backend::UpdateRule rule;
  rule.kind = backend::UpdateRule::Kind::kSgd;
  rule.lr = lr;
  rule.momentum = momentum;
  rule.nesterov = true;
  backend.ApplyUpdate(rule, {vars.params().data<float>(), vars.grads().data<float>(), velocity->data(), nullptr, n});
}

}  // namespace strata::testing
