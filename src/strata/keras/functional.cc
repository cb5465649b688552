// The functional API: Input() and Call() build a graph of layer calls, Sequential() a chain of
// them; Validate() orders and names the calls and BuildForward() turns them into graph ops.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "strata/keras/model.h"
#include "strata/keras/model_internal.h"

namespace strata::keras {

using graph::Value;

namespace {

// An InputLayer inside a Sequential list: it only carries the shape.
class InputLayerImpl final : public Layer {
 public:
  InputLayerImpl(Shape s, DType d) : shape(std::move(s)), dtype(d) {}
  std::string class_name() const override { return "InputLayer"; }
  std::string default_name() const override { return "input"; }
  Result<Value> Build(BuildContext&, const std::vector<Value>&) override {
    return Internal("InputLayer is only valid as the first entry of a Sequential");
  }
  Shape shape;
  DType dtype;
};

}  // namespace

std::string KerasShape(const Shape& s) {
  std::string r = "(None";
  for (int i = 1; i < s.rank(); ++i) r += ", " + std::to_string(s[i]);
  return r + (s.rank() == 1 ? ",)" : ")");
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

namespace {
// Calls `visit` once on each tensor `t` is computed from (itself included), depth first, a
// tensor before its inbound ones.
void ForEachUpstream(const KTensor& t, const std::function<void(const KTensor&)>& visit) {
  std::set<const internal::KNode*> seen;
  std::function<void(const KTensor&)> walk = [&](const KTensor& x) {
    if (!x.node() || !seen.insert(x.node().get()).second) return;
    visit(x);
    for (const auto& in : x.node()->inbound) walk(in);
  };
  walk(t);
}
}  // namespace

std::vector<KTensor> SourceInputs(const KTensor& t) {
  std::vector<KTensor> sources;
  ForEachUpstream(t, [&](const KTensor& x) {
    if (!x.node()->layer) sources.push_back(x);
  });
  return sources;
}

Result<Shape> ShapeOf(const KTensor& t) {
  if (!t.node()) return InvalidArgument("ShapeOf: an empty tensor");
  if (!t.node()->layer) return t.node()->input_shape;
  // A probe model from the sources to t infers the shape; it names the unnamed layers it meets,
  // which is undone so the model the user builds next names them in its own order.
  std::vector<LayerPtr> unnamed;
  ForEachUpstream(t, [&](const KTensor& x) {
    if (x.node()->layer && x.node()->layer->name().empty()) unnamed.push_back(x.node()->layer);
  });
  std::vector<KTensor> sources = SourceInputs(t);
  std::vector<std::string> input_names;
  for (const auto& s : sources) input_names.push_back(s.node()->input_name);
  auto probe = Model::Functional(sources, {t}, "shape_of");
  for (const auto& l : unnamed) l->set_name("");
  for (size_t i = 0; i < sources.size(); ++i) const_cast<internal::KNode*>(sources[i].node().get())->input_name = input_names[i];
  if (!probe.ok()) return probe.status();
  return (*probe)->output_shape(0);
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
  model->MarkSequential();
  STRATA_RETURN_IF_ERROR(model->Validate());
  return model;
}

Result<std::unique_ptr<Model>> Model::Functional(std::vector<KTensor> inputs, std::vector<KTensor> outputs,
                                                 std::string name) {
  auto model = std::unique_ptr<Model>(new Model(std::move(name), std::move(inputs), std::move(outputs)));
  STRATA_RETURN_IF_ERROR(model->Validate());
  return model;
}

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
  ctx->seed = compile_.seed;  // ctx->replica is set by the caller
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
    ctx->frozen = !e->layer->trainable;
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
      ctx->frozen = false;
      if (!y.ok()) return y.status().WithContext("model " + name_);
      ctx->frozen = !e->layer->trainable;
      values[n] = *y;
      e->output_shapes.push_back(KerasShape(y->shape()));
      e->connected_to.push_back(connected);
    }
    ctx->frozen = false;
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

Status Model::BuildInferenceGraph(graph::Graph& g, int64_t batch, std::vector<Value>* inputs,
                                  std::vector<Value>* outputs) const {
  BuildContext ctx;
  return BuildForward(g, /*training=*/false, batch, inputs, outputs, &ctx);
}

// The inference graph at batch 1: what the model's outputs are.
Status Model::ProbeForward(graph::Graph& g, std::vector<Value>* outputs) const {
  BuildContext ctx;
  std::vector<Value> inputs;
  STRATA_RETURN_IF_ERROR(BuildForward(g, /*training=*/false, 1, &inputs, outputs, &ctx));
  if (outputs->empty()) return InvalidArgument("model " + name_ + " has no outputs");
  return Status::OK();
}

bool Model::ends_in_softmax() const {
  graph::Graph g;
  std::vector<Value> outputs;
  return ProbeForward(g, &outputs).ok() && g.node(outputs[0].node).kind == graph::OpKind::kSoftmax;
}

Result<Shape> Model::input_shape(size_t i) const {
  if (i >= inputs_.size())
    return InvalidArgument("model " + name_ + " has " + std::to_string(inputs_.size()) + " input(s); no input " + std::to_string(i));
  return inputs_[i].node()->input_shape;
}

Result<Shape> Model::output_shape(size_t i) const {
  graph::Graph g;
  std::vector<Value> outputs;
  STRATA_RETURN_IF_ERROR(ProbeForward(g, &outputs));
  if (i >= outputs.size())
    return InvalidArgument("model " + name_ + " has " + std::to_string(outputs.size()) + " output(s); no output " + std::to_string(i));
  const auto& d = outputs[i].shape().dims();
  return Shape(std::vector<int64_t>(d.begin() + 1, d.end()));
}

// Keras's map_graph: a depth-first walk from the outputs numbers the layers as it first meets
// them; a node's depth is its longest distance to an output, a layer's the largest of its
// calls'; layers come deepest first, ties by that number.
std::vector<LayerPtr> Model::layers() const {
  std::map<const void*, int> first_seen;  // layer (or input node) -> walk index
  std::vector<const internal::KNode*> post_order;
  std::set<const internal::KNode*> finished;
  std::function<void(const internal::KNode*)> walk = [&](const internal::KNode* n) {
    if (finished.count(n)) return;
    const void* op = n->layer ? static_cast<const void*>(n->layer.get()) : n;
    first_seen.emplace(op, static_cast<int>(first_seen.size()));
    if (n->layer)
      for (const auto& in : n->inbound) walk(in.node().get());
    finished.insert(n);
    post_order.push_back(n);
  };
  for (const auto& t : outputs_) walk(t.node().get());
  std::map<const internal::KNode*, int> node_depth;
  std::map<const Layer*, int> layer_depth;
  for (auto it = post_order.rbegin(); it != post_order.rend(); ++it) {
    const internal::KNode* n = *it;
    int depth = node_depth[n];
    if (n->layer) {
      depth = std::max(depth, layer_depth[n->layer.get()]);
      layer_depth[n->layer.get()] = depth;
    }
    node_depth[n] = depth;
    if (n->layer)
      for (const auto& in : n->inbound) {
        int& d = node_depth[in.node().get()];
        d = std::max(d, depth + 1);
      }
  }
  std::vector<LayerPtr> result;
  for (const auto& e : layers_)
    if (e->layer) result.push_back(e->layer);
  std::stable_sort(result.begin(), result.end(), [&](const LayerPtr& a, const LayerPtr& b) {
    const int da = layer_depth[a.get()], db = layer_depth[b.get()];
    if (da != db) return da > db;
    return first_seen[a.get()] < first_seen[b.get()];
  });
  return result;
}

}  // namespace strata::keras

namespace strata::keras {

void Model::set_trainable(bool trainable) {
  for (const auto& e : layers_)
    if (e->layer) e->layer->trainable = trainable;
}

bool Model::trainable() const {
  for (const auto& e : layers_)
    if (e->layer && e->layer->trainable) return true;
  return false;
}

Status Model::freeze_until(const std::string& layer_name) {
  const std::vector<LayerPtr> ordered = layers();
  size_t k = 0;
  while (k < ordered.size() && ordered[k]->name() != layer_name) ++k;
  if (k == ordered.size())
    return NotFound("freeze_until: model " + name_ + " has no layer named \"" + layer_name + "\"");
  for (size_t i = 0; i < ordered.size(); ++i) ordered[i]->trainable = i > k;
  return Status::OK();
}

std::vector<std::pair<const Layer*, bool>> Model::TrainableFlags() const {
  std::vector<std::pair<const Layer*, bool>> flags;
  for (const auto& e : layers_)
    if (e->layer) flags.emplace_back(e->layer.get(), e->layer->trainable);
  return flags;
}

Status Model::CheckTrainableUnchanged() const {
  for (const auto& [layer, trainable] : compiled_trainable_)
    if (layer->trainable != trainable)
      return InvalidArgument("model " + name_ + ": layer " + layer->name() + " was made " +
                                (layer->trainable ? "trainable" : "non-trainable") +
                                " after compile(); call compile() again for the change to take effect (as Keras requires)");
  return Status::OK();
}

}  // namespace strata::keras
