#include "strata/keras/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "strata/graph/autodiff.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/checkpoint.h"

namespace strata::keras {

using graph::Value;

namespace internal {
struct KNode {
  LayerPtr layer;              // null: a model input
  std::vector<KTensor> inbound;
  Shape input_shape;           // inputs only: per-example shape
  DType dtype = DType::kF32;
  std::string input_name;
};
}  // namespace internal

struct Model::LayerEntry {
  LayerPtr layer;                               // null for an input
  const internal::KNode* input_node = nullptr;  // inputs only
  std::vector<const internal::KNode*> nodes;    // every call of the layer
  std::vector<std::string> output_shapes;       // per call, "(None, 28, 28, 32)"
  std::vector<std::string> connected_to;        // per call
  int64_t params = 0, trainable = 0;
};

namespace {

// An InputLayer inside a Sequential list: it only carries the shape.
class InputLayerImpl final : public Layer {
 public:
  InputLayerImpl(Shape s, DType d) : shape(std::move(s)), dtype(d) {}
  std::string class_name() const override { return "InputLayer"; }
  std::string default_name() const override { return "input"; }
  Result<Value> Call(BuildContext&, const std::vector<Value>&) override {
    return Internal("InputLayer is only valid as the first entry of a Sequential");
  }
  Shape shape;
  DType dtype;
};

std::string KerasShape(const Shape& s) {
  std::string r = "(None";
  for (int i = 1; i < s.rank(); ++i) r += ", " + std::to_string(s[i]);
  return r + (s.rank() == 1 ? ",)" : ")");
}

std::string WithCommas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// Lays out one summary row at the column positions, wrapping long fields onto more lines
// as Keras does.
void SummaryRow(std::string* out, const std::vector<std::string>& fields, const std::vector<int>& positions) {
  std::vector<std::string> rest = fields;
  bool first = true;
  while (first || std::any_of(rest.begin(), rest.end(), [](const std::string& s) { return !s.empty(); })) {
    first = false;
    std::string line;
    int start = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      const int width = positions[i] - start - (i == 0 ? 1 : 0);
      std::string cell = rest[i].substr(0, static_cast<size_t>(std::max(0, width - 1)));
      rest[i] = rest[i].substr(cell.size());
      if (i == 0) line += " ";
      line += cell;
      line.resize(static_cast<size_t>(positions[i]), ' ');
      start = positions[i];
    }
    *out += line + "\n";
  }
}

// Copies a batch component into a program input buffer of the same element count,
// converting integer/u8/bf16 data to the buffer's dtype. Rows beyond `rows` are zeroed.
Status CopyInto(const Tensor& src, Tensor& dst, int64_t rows, const std::string& what) {
  const int64_t per_row_dst = dst.shape()[0] ? dst.num_elements() / dst.shape()[0] : 0;
  const int64_t per_row_src = src.rank() ? (src.shape()[0] ? src.num_elements() / src.shape()[0] : 0) : 1;
  if (per_row_src != per_row_dst)
    return InvalidArgument(what + ": the batch has per-example shape " + src.shape().ToString() +
                           " but the model expects " + dst.shape().ToString() + " (batch dimension first)");
  Tensor s = src.Contiguous();
  const int64_t n = rows * per_row_dst;
  auto convert = [&](auto* out) {
    using Out = std::remove_pointer_t<decltype(out)>;
    switch (s.dtype()) {
      case DType::kF32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<float>()[i]); break;
      case DType::kBF16: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(ToF32(s.data<bf16>()[i])); break;
      case DType::kI32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<int32_t>()[i]); break;
      case DType::kI64: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<int64_t>()[i]); break;
      case DType::kU8: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<uint8_t>()[i]); break;
    }
  };
  if (dst.dtype() == s.dtype()) {
    std::memcpy(dst.raw_data(), s.raw_data(), static_cast<size_t>(n) * DTypeSize(s.dtype()));
  } else if (dst.dtype() == DType::kF32) {
    convert(dst.data<float>());
  } else if (dst.dtype() == DType::kI32) {
    convert(dst.data<int32_t>());
  } else if (dst.dtype() == DType::kI64) {
    convert(dst.data<int64_t>());
  } else {
    return InvalidArgument(what + ": cannot feed " + std::string(DTypeName(s.dtype())) + " into a " +
                           std::string(DTypeName(dst.dtype())) + " input");
  }
  const size_t tail = static_cast<size_t>(dst.num_elements() - n) * DTypeSize(dst.dtype());
  if (tail) std::memset(static_cast<char*>(dst.raw_data()) + (dst.nbytes() - tail), 0, tail);
  return Status::OK();
}

}  // namespace

double LogValue(const Logs& logs, const std::string& key, double fallback) {
  for (const auto& [k, v] : logs)
    if (k == key) return v;
  return fallback;
}

KTensor Input(Shape shape, DType dtype, std::string name) {
  auto n = std::make_shared<internal::KNode>();
  n->input_shape = std::move(shape);
  n->dtype = dtype;
  n->input_name = std::move(name);
  return KTensor(n);
}

KTensor Call(const LayerPtr& layer, const KTensor& x) { return Call(layer, std::vector<KTensor>{x}); }

KTensor Call(const LayerPtr& layer, const std::vector<KTensor>& xs) {
  auto n = std::make_shared<internal::KNode>();
  n->layer = layer;
  n->inbound = xs;
  return KTensor(n);
}

LayerPtr layers::InputLayer(Shape shape, DType dtype, std::string name) {
  auto l = std::make_shared<InputLayerImpl>(std::move(shape), dtype);
  l->set_name(std::move(name));
  return l;
}

Result<std::unique_ptr<Model>> Sequential(std::vector<LayerPtr> layer_list, std::string name) {
  if (layer_list.empty()) return InvalidArgument("Sequential " + name + ": no layers");
  auto* in = dynamic_cast<InputLayerImpl*>(layer_list[0].get());
  if (!in)
    return InvalidArgument("Sequential " + name + ": the first entry must be layers::InputLayer(shape) (got " +
                           layer_list[0]->class_name() + ")");
  KTensor x = Input(in->shape, in->dtype, in->name());
  KTensor input = x;
  for (size_t i = 1; i < layer_list.size(); ++i) {
    if (!layer_list[i]) return InvalidArgument("Sequential " + name + ": entry " + std::to_string(i) + " is null");
    if (dynamic_cast<InputLayerImpl*>(layer_list[i].get()))
      return InvalidArgument("Sequential " + name + ": InputLayer at position " + std::to_string(i) + "; only the first may be");
    x = Call(layer_list[i], x);
  }
  auto model = std::unique_ptr<Model>(new Model(std::move(name), {input}, {x}));
  STRATA_RETURN_IF_ERROR(model->Validate());
  return model;
}

Result<std::unique_ptr<Model>> Model::Functional(std::vector<KTensor> inputs, std::vector<KTensor> outputs,
                                                 std::string name) {
  auto model = std::unique_ptr<Model>(new Model(std::move(name), std::move(inputs), std::move(outputs)));
  STRATA_RETURN_IF_ERROR(model->Validate());
  return model;
}

Model::Model(std::string name, std::vector<KTensor> inputs, std::vector<KTensor> outputs)
    : name_(std::move(name)), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

Model::~Model() = default;

Status Model::Validate() {
  if (inputs_.empty() || outputs_.empty()) return InvalidArgument("model " + name_ + ": needs inputs and outputs");
  // Topological order of the nodes reachable from the outputs (depth-first, inbound first).
  std::vector<const internal::KNode*> order;
  std::set<const internal::KNode*> done, active;
  std::set<const internal::KNode*> input_set;
  for (const auto& t : inputs_) {
    if (!t.node() || t.node()->layer) return InvalidArgument("model " + name_ + ": inputs must come from keras::Input()");
    input_set.insert(t.node().get());
  }
  std::function<Status(const internal::KNode*)> visit = [&](const internal::KNode* n) -> Status {
    if (done.count(n)) return Status::OK();
    if (active.count(n)) return InvalidArgument("model " + name_ + ": the layer graph has a cycle");
    active.insert(n);
    if (!n->layer && !input_set.count(n))
      return InvalidArgument("model " + name_ + ": an output depends on an Input that is not among the model's inputs");
    for (const auto& in : n->inbound) {
      if (!in.node()) return InvalidArgument("model " + name_ + ": a layer was called on an empty tensor");
      STRATA_RETURN_IF_ERROR(visit(in.node().get()));
    }
    active.erase(n);
    done.insert(n);
    order.push_back(n);
    return Status::OK();
  };
  for (const auto& t : inputs_) STRATA_RETURN_IF_ERROR(visit(t.node().get()));
  for (const auto& t : outputs_) {
    if (!t.node()) return InvalidArgument("model " + name_ + ": empty output");
    STRATA_RETURN_IF_ERROR(visit(t.node().get()));
  }

  // One entry per distinct layer (shared layers appear once), Keras-style unique names.
  layers_.clear();
  std::map<const Layer*, std::shared_ptr<LayerEntry>> by_layer;
  std::map<std::string, int> name_counts;
  std::set<std::string> used;
  auto unique_name = [&](const std::string& base) {
    std::string n = base;
    int& c = name_counts[base];
    while (used.count(n)) n = base + "_" + std::to_string(++c);
    used.insert(n);
    return n;
  };
  for (const auto& t : inputs_) if (!t.node()->input_name.empty()) used.insert(t.node()->input_name);
  for (const auto* n : order) {
    if (n->layer && !n->layer->name().empty() && !by_layer.count(n->layer.get())) {
      if (used.count(n->layer->name()))
        return InvalidArgument("model " + name_ + ": two layers are named \"" + n->layer->name() + "\"");
      used.insert(n->layer->name());
      by_layer[n->layer.get()] = nullptr;  // reserve
    }
  }
  by_layer.clear();
  int input_index = 0;
  for (const auto* n : order) {
    if (!n->layer) {
      auto e = std::make_shared<LayerEntry>();
      e->input_node = n;
      auto* node = const_cast<internal::KNode*>(n);
      if (node->input_name.empty()) node->input_name = unique_name(input_index == 0 ? "input_1" : "input_" + std::to_string(input_index + 1));
      ++input_index;
      e->nodes.push_back(n);
      layers_.push_back(e);
      continue;
    }
    auto it = by_layer.find(n->layer.get());
    if (it == by_layer.end()) {
      if (n->layer->name().empty()) n->layer->set_name(unique_name(n->layer->default_name()));
      auto e = std::make_shared<LayerEntry>();
      e->layer = n->layer;
      by_layer[n->layer.get()] = e;
      layers_.push_back(e);
      it = by_layer.find(n->layer.get());
    }
    it->second->nodes.push_back(n);
  }

  // Probe build at batch 1: checks every shape (errors name the layer) and records output
  // shapes and parameter counts for summary().
  graph::Graph g;
  BuildContext ctx;
  ctx.graph = &g;
  std::vector<Value> ins, outs;
  STRATA_RETURN_IF_ERROR(BuildForward(g, /*training=*/false, 1, &ins, &outs, &ctx));
  return Status::OK();
}

Status Model::BuildForward(graph::Graph& g, bool training, int64_t batch, std::vector<Value>* inputs,
                           std::vector<Value>* outputs, BuildContext* ctx) const {
  ctx->graph = &g;
  ctx->training = training;
  ctx->seed = compile_.seed;
  std::unordered_map<const internal::KNode*, Value> values;
  for (const auto& t : inputs_) {
    const auto* n = t.node().get();
    std::vector<int64_t> dims = {batch};
    dims.insert(dims.end(), n->input_shape.dims().begin(), n->input_shape.dims().end());
    // Integer and u8 inputs are fed converted to f32: layers compute in f32.
    Value v = g.Input(n->input_name, DType::kF32, Shape(std::move(dims)));
    values[n] = v;
    inputs->push_back(v);
  }
  for (const auto& e : layers_) {
    if (!e->layer) {
      e->output_shapes = {KerasShape(values[e->nodes[0]].shape())};
      continue;
    }
    e->output_shapes.clear();
    e->connected_to.clear();
    const size_t vars_before = ctx->variables.size();
    for (const auto* n : e->nodes) {
      std::vector<Value> args;
      std::string connected;
      for (const auto& in : n->inbound) {
        args.push_back(values.at(in.node().get()));
        const auto* src = in.node().get();
        std::string src_name = src->layer ? src->layer->name() : src->input_name;
        connected += (connected.empty() ? "" : ", ") + src_name + "[0][0]";
      }
      auto y = e->layer->Call(*ctx, args);
      if (!y.ok()) return y.status().WithContext("model " + name_);
      values[n] = *y;
      e->output_shapes.push_back(KerasShape(y->shape()));
      e->connected_to.push_back(connected);
    }
    if (batch == 1 && !training) {  // the probe: count parameters
      e->params = e->trainable = 0;
      for (size_t i = vars_before; i < ctx->variables.size(); ++i) {
        int64_t size = ctx->variables[i].value.shape().num_elements();
        e->params += size;
        if (ctx->variables[i].trainable) e->trainable += size;
      }
    }
  }
  for (const auto& t : outputs_) outputs->push_back(values.at(t.node().get()));
  return Status::OK();
}

int64_t Model::count_params() const {
  int64_t total = 0;
  for (const auto& e : layers_) total += e->params;
  return total;
}

std::string Model::Summary(int line_length) const {
  const bool sequential_like = inputs_.size() == 1 && outputs_.size() == 1 &&
                               std::all_of(layers_.begin(), layers_.end(), [](const auto& e) {
                                 return e->nodes.size() == 1 && (!e->layer || e->nodes[0]->inbound.size() == 1);
                               });
  std::vector<int> positions;
  std::vector<std::string> header;
  if (sequential_like) {
    positions = {static_cast<int>(line_length * 0.45), static_cast<int>(line_length * 0.85), line_length};
    header = {"Layer (type)", "Output Shape", "Param #"};
  } else {
    line_length = std::max(line_length, 98);
    positions = {static_cast<int>(line_length * 0.33), static_cast<int>(line_length * 0.55),
                 static_cast<int>(line_length * 0.67), line_length};
    header = {"Layer (type)", "Output Shape", "Param #", "Connected to"};
  }
  std::string out = "Model: \"" + name_ + "\"\n" + std::string(line_length, '_') + "\n";
  SummaryRow(&out, header, positions);
  out += std::string(line_length, '=') + "\n";
  int64_t total = 0, trainable = 0;
  bool first = true;
  for (const auto& e : layers_) {
    if (sequential_like && !e->layer) continue;  // Keras hides the InputLayer of a Sequential
    if (!first) out += std::string(line_length, ' ') + "\n";
    first = false;
    std::string name = e->layer ? e->layer->name() + " (" + e->layer->class_name() + ")"
                                : e->input_node->input_name + " (InputLayer)";
    for (size_t i = 0; i < std::max<size_t>(1, e->output_shapes.size()); ++i) {
      std::vector<std::string> row = {i == 0 ? name : "", i < e->output_shapes.size() ? e->output_shapes[i] : "",
                                      i == 0 ? std::to_string(e->params) : ""};
      if (!sequential_like) {
        std::string conn = e->layer && i < e->connected_to.size() ? e->connected_to[i] : "[]";
        if (e->layer) conn = "['" + conn + "']";
        row.push_back(conn);
      }
      SummaryRow(&out, row, positions);
    }
    total += e->params;
    trainable += e->trainable;
  }
  out += std::string(line_length, '=') + "\n";
  out += "Total params: " + WithCommas(total) + "\n";
  out += "Trainable params: " + WithCommas(trainable) + "\n";
  out += "Non-trainable params: " + WithCommas(total - trainable) + "\n";
  out += std::string(line_length, '_') + "\n";
  return out;
}

void Model::summary() const { std::fputs(Summary().c_str(), stdout); }

// ---- compile --------------------------------------------------------------------------------

namespace {

struct TrainGraph {
  std::vector<Value> inputs, outputs;
  Value labels, lr, loss;
};

// The loss's logits: from_logits = false models end in softmax, whose input is used, so the
// fused, numerically stable cross-entropy op applies (what Keras does internally too).
Result<Value> LogitsFor(const graph::Graph& g, Value output, const Loss& loss) {
  if (loss.from_logits) return output;
  const graph::Node& n = g.node(output.node);
  if (n.kind == graph::OpKind::kSoftmax) return n.inputs[0];
  return InvalidArgument(loss.name() + " with from_logits=false needs the model to end in a softmax; " +
                         g.Describe(output) + " is not one (or pass from_logits=true)");
}

}  // namespace

Status Model::compile(CompileOptions options) {
  compile_ = std::move(options);
  if (compile_.precision != "float32" && compile_.precision != "mixed_bfloat16")
    return InvalidArgument("compile: precision must be \"float32\" or \"mixed_bfloat16\", got \"" + compile_.precision + "\"");
  for (const auto& m : compile_.metrics) {
    auto metric = MakeMetric(m, compile_.loss);
    if (!metric.ok()) return metric.status().WithContext("compile");
  }
  train_ = Compiled{};
  eval_ = Compiled{};
  // The variable layout (parameters, state, optimizer slots) comes from the training graph
  // and does not depend on the batch size: build it at batch 1 now so weights can be loaded
  // before the first fit.
  Compiled probe;
  probe.graph = std::make_unique<graph::Graph>();
  STRATA_RETURN_IF_ERROR(BuildTrainGraph(probe, 1));
  STRATA_ASSIGN_OR_RETURN(store_, backend::VariableStore::Create(*probe.graph));
  compiled_ = true;
  return Status::OK();
}

Status Model::BuildTrainGraph(Compiled& c, int64_t batch) {
  graph::Graph& g = *c.graph;
  BuildContext ctx;
  STRATA_RETURN_IF_ERROR(BuildForward(g, /*training=*/true, batch, &c.inputs, &c.outputs, &ctx));
  if (c.outputs.size() != 1)
    return Unimplemented("model " + name_ + ": training supports one output (this model has " +
                         std::to_string(c.outputs.size()) + ")");
  const Loss& loss = compile_.loss;
  Value out = c.outputs[0];
  Value loss_value;
  if (loss.kind == Loss::Kind::kSparseCategoricalCrossentropy || loss.kind == Loss::Kind::kCategoricalCrossentropy) {
    if (out.shape().rank() != 2)
      return InvalidArgument(loss.name() + ": the model output must be [batch, classes], got " + g.Describe(out));
    c.labels = g.Input("labels", DType::kI32, {batch});
    STRATA_ASSIGN_OR_RETURN(Value logits, LogitsFor(g, out, loss));
    STRATA_ASSIGN_OR_RETURN(loss_value, g.SoftmaxCrossEntropy(logits, c.labels, loss.label_smoothing, "loss"));
  } else if (loss.kind == Loss::Kind::kMeanSquaredError) {
    c.labels = g.Input("labels", DType::kF32, out.shape());
    STRATA_ASSIGN_OR_RETURN(loss_value, g.MeanSquaredError(out, c.labels, "loss"));
  } else {
    return Unimplemented(loss.name() + " is evaluated but not yet trainable in the compiled step");
  }
  // L2 regularizers: loss += l2 * sum(w^2).
  for (const auto& v : ctx.variables) {
    if (v.l2 <= 0) continue;
    STRATA_ASSIGN_OR_RETURN(Value sq, g.Multiply(v.value, v.value, v.layer + "/l2/square"));
    STRATA_ASSIGN_OR_RETURN(Value sum, g.ReduceSum(sq, {}, v.layer + "/l2/sum"));
    STRATA_ASSIGN_OR_RETURN(Value pen, g.Scale(sum, v.l2, v.layer + "/l2"));
    STRATA_ASSIGN_OR_RETURN(loss_value, g.Add(loss_value, pen, v.layer + "/l2/add"));
  }
  c.loss = loss_value;
  c.lr = g.Input("learning_rate", DType::kF32, {});

  std::vector<Value> vars = graph::TrainableVariables(g);
  STRATA_ASSIGN_OR_RETURN(std::vector<Value> grads, graph::Gradients(g, loss_value, vars));
  const Optimizer& opt = compile_.optimizer;
  for (size_t i = 0; i < vars.size(); ++i) {
    Value grad = grads[i];
    if (opt.weight_decay > 0 && opt.kind != Optimizer::Kind::kAdamW) {
      const std::string& vn = g.node(vars[i].node).name;
      STRATA_ASSIGN_OR_RETURN(Value decay, g.Scale(vars[i], static_cast<float>(opt.weight_decay), vn + "/weight_decay"));
      STRATA_ASSIGN_OR_RETURN(grad, g.Add(grad, decay, vn + "/decayed_grad"));
    }
    switch (opt.kind) {
      case Optimizer::Kind::kSGD: {
        graph::SgdOptions o;
        o.momentum = static_cast<float>(opt.momentum);
        o.nesterov = opt.nesterov;
        STRATA_RETURN_IF_ERROR(g.SgdUpdate(vars[i], grad, c.lr, o));
        break;
      }
      case Optimizer::Kind::kAdam:
      case Optimizer::Kind::kAdamW: {
        graph::AdamOptions o;
        o.beta_1 = static_cast<float>(opt.beta_1);
        o.beta_2 = static_cast<float>(opt.beta_2);
        o.epsilon = static_cast<float>(opt.epsilon);
        if (opt.kind == Optimizer::Kind::kAdamW) o.weight_decay = static_cast<float>(opt.weight_decay);
        STRATA_RETURN_IF_ERROR(g.AdamUpdate(vars[i], grad, c.lr, o));
        break;
      }
      case Optimizer::Kind::kRMSprop: {
        graph::RmsPropOptions o;
        o.rho = static_cast<float>(opt.rho);
        o.momentum = static_cast<float>(opt.momentum);
        o.epsilon = static_cast<float>(opt.epsilon);
        STRATA_RETURN_IF_ERROR(g.RmsPropUpdate(vars[i], grad, c.lr, o));
        break;
      }
    }
  }
  c.batch = batch;
  return Status::OK();
}

backend::CompileOptions Model::BackendOptions(std::vector<Value> fetches) const {
  backend::CompileOptions o;
  o.fetches = std::move(fetches);
  o.threads = compile_.threads;
  o.precision = compile_.precision == "mixed_bfloat16" ? backend::Precision::kBF16 : backend::Precision::kF32;
  o.variables = store_;
  return o;
}

Status Model::EnsureTrainProgram(int64_t batch) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before fit()");
  if (train_.program) {
    if (batch != train_.batch)
      return InvalidArgument("model " + name_ + ": a batch of " + std::to_string(batch) + " rows, but the step was compiled for " +
                             std::to_string(train_.batch) + " (static shapes: batch the training data with drop_remainder=true)");
    return Status::OK();
  }
  train_.graph = std::make_unique<graph::Graph>();
  STRATA_RETURN_IF_ERROR(BuildTrainGraph(train_, batch));
  STRATA_ASSIGN_OR_RETURN(train_.program, backend::Compile(*train_.graph, BackendOptions({train_.loss, train_.outputs[0]})));
  return Status::OK();
}

Status Model::EnsureEvalProgram(int64_t batch) {
  if (!compiled_) return InvalidArgument("model " + name_ + ": call compile() before evaluate() or predict()");
  if (eval_.program && eval_.batch == batch) return Status::OK();
  eval_ = Compiled{};
  eval_.graph = std::make_unique<graph::Graph>();
  BuildContext ctx;
  STRATA_RETURN_IF_ERROR(BuildForward(*eval_.graph, /*training=*/false, batch, &eval_.inputs, &eval_.outputs, &ctx));
  STRATA_ASSIGN_OR_RETURN(eval_.program, backend::Compile(*eval_.graph, BackendOptions(eval_.outputs)));
  eval_.batch = batch;
  return Status::OK();
}

// Copies a dataset element (x..., y) into the program's inputs; labels also land in
// label_scratch_ (i64) or the dense label input for the host metrics.
Status Model::FeedInputs(Compiled& c, const data::Element& batch, int64_t rows, bool with_labels) {
  const size_t nx = c.inputs.size();
  if (batch.size() < nx + (with_labels ? 1 : 0))
    return InvalidArgument("model " + name_ + ": a dataset element " + batch.DebugString() + " has " +
                           std::to_string(batch.size()) + " components; expected " + std::to_string(nx) +
                           (with_labels ? " input(s) and the labels" : " input(s)"));
  for (size_t i = 0; i < nx; ++i) {
    STRATA_RETURN_IF_ERROR(CopyInto(batch[i], c.program->input(c.inputs[i]), rows,
                                    "model " + name_ + " input " + std::to_string(i)));
  }
  if (!with_labels) return Status::OK();
  const Tensor& y = batch[nx];
  if (compile_.loss.sparse_labels() || compile_.loss.kind == Loss::Kind::kCategoricalCrossentropy) {
    label_scratch_.assign(static_cast<size_t>(rows), 0);
    Tensor yc = y.Contiguous();
    const int64_t k = c.outputs[0].shape()[-1];
    if (compile_.loss.sparse_labels()) {
      if (yc.num_elements() != rows)
        return InvalidArgument("labels: expected " + std::to_string(rows) + " class indices, got " + yc.shape().ToString());
      for (int64_t i = 0; i < rows; ++i) {
        int64_t v = yc.dtype() == DType::kI64 ? yc.data<int64_t>()[i]
                    : yc.dtype() == DType::kI32 ? yc.data<int32_t>()[i]
                    : yc.dtype() == DType::kU8  ? yc.data<uint8_t>()[i]
                                                : static_cast<int64_t>(yc.data<float>()[i]);
        if (v < 0 || v >= k)
          return InvalidArgument("labels: class " + std::to_string(v) + " of example " + std::to_string(i) +
                                 " is outside [0, " + std::to_string(k) + ")");
        label_scratch_[static_cast<size_t>(i)] = v;
      }
    } else {
      // One-hot labels: the fused op takes the class index; smoothing is applied in the op.
      if (yc.dtype() != DType::kF32 || yc.num_elements() != rows * k)
        return InvalidArgument("labels: categorical_crossentropy expects f32 one-hot [" + std::to_string(rows) + ", " +
                               std::to_string(k) + "], got " + yc.DebugString());
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = yc.data<float>() + i * k;
        label_scratch_[static_cast<size_t>(i)] = std::max_element(row, row + k) - row;
      }
    }
    if (c.labels.valid()) {
      int32_t* dst = c.program->input(c.labels).data<int32_t>();
      for (int64_t i = 0; i < c.batch; ++i) dst[i] = i < rows ? static_cast<int32_t>(label_scratch_[static_cast<size_t>(i)]) : 0;
    }
  } else if (c.labels.valid()) {
    STRATA_RETURN_IF_ERROR(CopyInto(y, c.program->input(c.labels), rows, "labels"));
  }
  return Status::OK();
}

std::vector<std::unique_ptr<Metric>> Model::MakeMetrics() const {
  std::vector<std::unique_ptr<Metric>> m;
  for (const auto& name : compile_.metrics) m.push_back(std::move(MakeMetric(name, compile_.loss).value()));
  return m;
}

double Model::learning_rate() const {
  if (lr_override_ >= 0) return lr_override_ * lr_scale_;
  return compile_.optimizer.learning_rate(global_step_) * lr_scale_;
}

Result<Logs> Model::train_on_batch(const std::vector<Tensor>& x, const Tensor& y) {
  data::Element e;
  e.tensors = x;
  e.tensors.push_back(y);
  if (x.empty() || x[0].rank() == 0) return InvalidArgument("train_on_batch: x needs a batch dimension");
  const int64_t rows = x[0].shape()[0];
  STRATA_RETURN_IF_ERROR(EnsureTrainProgram(rows));
  STRATA_RETURN_IF_ERROR(FeedInputs(train_, e, rows, true));
  *train_.program->input(train_.lr).data<float>() = static_cast<float>(learning_rate());
  STRATA_RETURN_IF_ERROR(train_.program->Run());
  ++global_step_;
  Logs logs = {{"loss", *train_.program->fetch(train_.loss).data<float>()}};
  const Tensor& out = train_.program->fetch(train_.outputs[0]);
  MetricBatch mb{out.data<float>(), rows, out.shape()[-1], label_scratch_.data(), nullptr};
  for (auto& m : MakeMetrics()) {
    m->Update(mb);
    logs.emplace_back(m->name(), m->Result());
  }
  return logs;
}

// ---- evaluate / predict -----------------------------------------------------------------------

Result<Logs> Model::RunEvaluation(const data::Dataset& ds, int64_t steps, Tensor* predictions) {
  STRATA_ASSIGN_OR_RETURN(auto it, ds.make_iterator());
  auto metrics = MakeMetrics();
  Mean loss_mean;
  std::vector<float> per_example;
  std::vector<float> collected;
  Shape per_row;
  int64_t total_rows = 0;
  const bool with_labels = predictions == nullptr;
  for (int64_t step = 0; steps < 0 || step < steps; ++step) {
    data::Element batch;
    bool end = false;
    STRATA_RETURN_IF_ERROR(it->GetNext(&batch, &end));
    if (end) break;
    if (batch.size() == 0 || batch[0].rank() == 0) return InvalidArgument("evaluate: elements must be batches");
    const int64_t rows = batch[0].shape()[0];
    if (!eval_.program || rows > eval_.batch) STRATA_RETURN_IF_ERROR(EnsureEvalProgram(rows));
    const bool has_labels = batch.size() > eval_.inputs.size();
    STRATA_RETURN_IF_ERROR(FeedInputs(eval_, batch, rows, with_labels && has_labels));
    STRATA_RETURN_IF_ERROR(eval_.program->Run());
    const Tensor& out = eval_.program->fetch(eval_.outputs[0]);
    const int64_t k = out.num_elements() / eval_.batch;
    if (predictions) {
      collected.insert(collected.end(), out.data<float>(), out.data<float>() + rows * k);
      std::vector<int64_t> dims(out.shape().dims().begin() + 1, out.shape().dims().end());
      per_row = Shape(dims);
      total_rows += rows;
      continue;
    }
    if (!has_labels) return InvalidArgument("evaluate: elements need labels (x, y); got " + batch.DebugString());
    per_example.resize(static_cast<size_t>(rows));
    const Tensor& y = batch[eval_.inputs.size()];
    Tensor yc = y.Contiguous();
    const float* dense = compile_.loss.sparse_labels() ? nullptr : (yc.dtype() == DType::kF32 ? yc.data<float>() : nullptr);
    std::vector<int64_t> sparse_from_dense;
    if (!compile_.loss.sparse_labels() && !dense) {
      return InvalidArgument("evaluate: " + compile_.loss.name() + " expects f32 labels, got " + yc.DebugString());
    }
    STRATA_RETURN_IF_ERROR(HostLoss(compile_.loss, out.data<float>(), rows, k,
                                    compile_.loss.sparse_labels() ? label_scratch_.data() : nullptr, dense,
                                    per_example.data()));
    for (int64_t i = 0; i < rows; ++i) loss_mean.Update(per_example[static_cast<size_t>(i)]);
    MetricBatch mb{out.data<float>(), rows, k, compile_.loss.sparse_labels() || compile_.loss.kind == Loss::Kind::kCategoricalCrossentropy ? label_scratch_.data() : nullptr,
                   compile_.loss.sparse_labels() ? nullptr : dense};
    if (mb.sparse_labels) mb.dense_labels = nullptr;
    for (auto& m : metrics) m->Update(mb);
  }
  if (predictions) {
    std::vector<int64_t> dims = {total_rows};
    dims.insert(dims.end(), per_row.dims().begin(), per_row.dims().end());
    *predictions = Tensor(DType::kF32, Shape(dims));
    if (!collected.empty()) std::memcpy(predictions->raw_data(), collected.data(), collected.size() * sizeof(float));
    return Logs{};
  }
  Logs logs = {{"loss", loss_mean.Result()}};
  for (auto& m : metrics) logs.emplace_back(m->name(), m->Result());
  return logs;
}

Result<Logs> Model::evaluate(const data::Dataset& ds, EvaluateOptions options) {
  STRATA_ASSIGN_OR_RETURN(Logs logs, RunEvaluation(ds, options.steps, nullptr));
  if (options.verbose) {
    std::string line;
    for (const auto& [k, v] : logs) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%s%s: %.4f", line.empty() ? "" : " - ", k.c_str(), v);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
  return logs;
}

Result<Tensor> Model::predict(const data::Dataset& ds, int64_t steps) {
  Tensor out;
  STRATA_RETURN_IF_ERROR(RunEvaluation(ds, steps, &out).status());
  return out;
}

// ---- state ----------------------------------------------------------------------------------

Result<std::vector<float>> Model::get_state() const {
  if (!store_) return InvalidArgument("model " + name_ + ": not compiled");
  std::vector<float> v;
  auto& s = *store_;
  v.insert(v.end(), s.params().data<float>(), s.params().data<float>() + s.params().num_elements());
  v.insert(v.end(), s.slots().data<float>(), s.slots().data<float>() + s.slots().num_elements());
  return v;
}

Status Model::set_state(const std::vector<float>& v) {
  if (!store_) return InvalidArgument("model " + name_ + ": not compiled");
  auto& s = *store_;
  const size_t np = static_cast<size_t>(s.params().num_elements()), ns = static_cast<size_t>(s.slots().num_elements());
  if (v.size() != np + ns)
    return InvalidArgument("set_state: " + std::to_string(v.size()) + " values for " + std::to_string(np + ns));
  std::memcpy(s.params().raw_data(), v.data(), np * sizeof(float));
  std::memcpy(s.slots().raw_data(), v.data() + np, ns * sizeof(float));
  return Status::OK();
}

Status Model::save_weights(const std::string& path) const {
  if (!store_) return InvalidArgument("save_weights: model " + name_ + " is not compiled");
  CheckpointState st;
  st.global_step = global_step_;
  st.epoch = epoch_;
  return WriteCheckpoint(path, *store_, st);
}

Status Model::load_weights(const std::string& path) {
  if (!store_) return InvalidArgument("load_weights: compile model " + name_ + " first");
  CheckpointState st;
  STRATA_RETURN_IF_ERROR(ReadCheckpoint(path, store_.get(), &st));
  global_step_ = st.global_step;
  epoch_ = static_cast<int>(st.epoch);
  return Status::OK();
}

}  // namespace strata::keras
