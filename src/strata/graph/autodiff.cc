#include "strata/graph/autodiff.h"

#include <map>

#include "strata/graph/op_registry.h"

namespace strata::graph {
namespace {

class Differentiator : public GradientContext::Sink {
 public:
  explicit Differentiator(Graph& g) : g_(g) {}

  // Adds `dy` to the gradient accumulated for `v`.
  Status Accumulate(Value v, Value dy) override {
    auto key = std::make_pair(v.node, v.output);
    auto it = grads_.find(key);
    if (it == grads_.end()) {
      grads_[key] = dy;
      return Status::OK();
    }
    STRATA_ASSIGN_OR_RETURN(Value sum, g_.Add(it->second, dy, g_.node(v.node).name + "/grad_sum"));
    it->second = sum;
    return Status::OK();
  }
  bool Has(Value v) const { return grads_.count({v.node, v.output}) > 0; }
  Value Get(Value v) const { return grads_.at({v.node, v.output}); }

  // Runs node i's gradient rule (op_registry.h) when some output of it has a gradient; the
  // rule accumulates into the gradients of its inputs in `needs`.
  Status Backprop(int i, const std::vector<bool>& needs) {
    const Node& n = g_.node(i);
    std::vector<Value> dys(n.out_shapes.size());
    bool any = false;
    for (size_t k = 0; k < dys.size(); ++k)
      if (Has(g_.output(i, static_cast<int>(k)))) {
        dys[k] = Get(g_.output(i, static_cast<int>(k)));
        any = true;
      }
    if (!any) return Status::OK();
    const OpDef& op = Op(n.kind);
    if (op.gradient == nullptr)
      return Unimplemented(OpLabel(n.name, n.kind) + "no gradient (" + (op.no_gradient ? op.no_gradient : "none registered") +
                           ")");
    GradientContext c(g_, i, std::move(dys), needs, *this);
    return op.gradient(c);
  }

 private:
  Graph& g_;
  std::map<std::pair<int, int>, Value> grads_;
};

}  // namespace

std::vector<Value> TrainableVariables(const Graph& g) {
  std::vector<Value> out;
  for (int i : g.variable_nodes())
    if (g.node(i).attrs.var.trainable) out.push_back(g.output(i));
  return out;
}

Result<std::vector<Value>> Gradients(Graph& g, Value loss, const std::vector<Value>& xs) {
  if (!loss.valid() || loss.graph != &g) return InvalidArgument("Gradients: the loss is not a value of this graph");
  if (loss.shape() != Shape{} || loss.dtype() != DType::kF32)
    return InvalidArgument("Gradients: the loss must be a scalar f32, found " + g.Describe(loss));
  const int n = g.num_nodes();
  const int last = loss.node;
  // depends[i]: node i depends on some x (gradients flow into it).
  std::vector<bool> depends(n, false);
  for (const Value& x : xs) {
    if (!x.valid() || x.graph != &g) return InvalidArgument("Gradients: a value is not of this graph");
    depends[x.node] = true;
  }
  for (int i = 0; i <= last; ++i)
    for (const Value& in : g.node(i).inputs)
      if (depends[in.node]) depends[i] = true;
  // reaches[i]: node i is on a path to the loss.
  std::vector<bool> reaches(n, false);
  reaches[last] = true;
  for (int i = last; i >= 0; --i)
    if (reaches[i])
      for (const Value& in : g.node(i).inputs) reaches[in.node] = true;
  std::vector<bool> needs(n, false);
  for (int i = 0; i <= last; ++i) needs[i] = depends[i] && reaches[i];

  // x's gradient is final once the backward pass has passed its first consumer (nodes are
  // differentiated from the last down): that is where its copy, if it needs one, is emitted, so
  // that the schedule (node order) computes it there and not after the whole backward pass. A
  // batch norm's gamma and beta gradients are such copies; at the end, each made its own tiny
  // all-reduce bucket that waited for the whole backward pass (docs/scaling.md).
  std::vector<std::vector<size_t>> xs_of_node(n), final_after(last + 1);
  for (size_t j = 0; j < xs.size(); ++j) xs_of_node[xs[j].node].push_back(j);
  std::vector<int> first_consumer(xs.size(), -1);
  for (int i = 0; i <= last; ++i)
    if (needs[i])
      for (const Value& in : g.node(i).inputs)
        for (size_t j : xs_of_node[in.node])
          if (first_consumer[j] < 0 && in.output == xs[j].output) first_consumer[j] = i;
  for (size_t j = 0; j < xs.size(); ++j)
    if (first_consumer[j] >= 0) final_after[first_consumer[j]].push_back(j);

  Differentiator d(g);
  std::vector<Value> out(xs.size());
  std::vector<bool> taken(g.num_nodes() + xs.size() * 2, false);
  auto finish = [&](size_t j) -> Status {
    const Value& x = xs[j];
    Value gx;
    if (!d.Has(x)) {
      gx = g.Constant(0.0f, x.shape(), g.node(x.node).name + "/zero_grad");
    } else {
      gx = d.Get(x);
      const OpKind k = g.node(gx.node).kind;
      // A gradient that is a leaf, shared with another x, or a value also used elsewhere in
      // the backward pass gets its own copy, so the compiler can place it in the gradient block.
      if (static_cast<size_t>(gx.node) >= taken.size()) taken.resize(gx.node + 1, false);
      if (k == OpKind::kConstant || k == OpKind::kInput || k == OpKind::kVariable || taken[gx.node] ||
          gx.output != 0 || gx.node <= last) {
        STRATA_ASSIGN_OR_RETURN(gx, g.Identity(gx, g.node(x.node).name + "/grad"));
      }
    }
    if (static_cast<size_t>(gx.node) >= taken.size()) taken.resize(gx.node + 1, false);
    taken[gx.node] = true;
    if (g.node(x.node).kind == OpKind::kVariable && g.node(x.node).attrs.var.trainable) g.SetGradientOf(gx, x);
    out[j] = gx;
    return Status::OK();
  };
  STRATA_RETURN_IF_ERROR(d.Accumulate(loss, g.Constant(1.0f, Shape{}, "gradients/seed")));
  for (int i = last; i >= 0; --i) {
    if (!needs[i]) continue;
    STRATA_RETURN_IF_ERROR(d.Backprop(i, needs));
    for (size_t j : final_after[i]) STRATA_RETURN_IF_ERROR(finish(j));
  }
  for (size_t j = 0; j < xs.size(); ++j)
    if (first_consumer[j] < 0) STRATA_RETURN_IF_ERROR(finish(j));  // not on a path to the loss: zero, or the loss itself
  return out;
}

}  // namespace strata::graph
