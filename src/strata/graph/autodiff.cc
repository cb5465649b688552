#include "strata/graph/autodiff.h"

#include <map>

namespace strata::graph {
namespace {

// Appends a gradient node without the builders' checks (its shapes follow from the forward
// node, which was checked).
Value Emit(Graph& g, OpKind kind, const std::string& name, std::vector<Value> inputs, std::vector<Shape> shapes,
           std::vector<DType> dtypes, Attrs attrs = {}) {
  Node n{kind, name, std::move(inputs), std::move(shapes), std::move(dtypes), std::move(attrs), false};
  return g.AddNode(std::move(n));
}

bool ActivationGradUsesOutput(Activation a) {
  return a == Activation::kRelu || a == Activation::kRelu6 || a == Activation::kSigmoid || a == Activation::kTanh;
}

class Differentiator {
 public:
  Differentiator(Graph& g) : g_(g) {}

  // Adds `dy` to the gradient accumulated for `v`.
  Status Accumulate(Value v, Value dy) {
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

  // Emits the gradient nodes of node `i` given the gradients of its outputs (dys; invalid
  // Values where an output has no gradient), accumulating into its inputs' gradients
  // for those inputs in `needs`.
  Status Backprop(int i, const std::vector<bool>& needs) {
    const Node n = g_.node(i);  // copy: AddNode may reallocate the node vector
    const std::string gname = n.name + "/grad";
    const std::string label = OpLabel(n.name, n.kind);
    auto need = [&](int k) { return needs[n.inputs[k].node]; };
    std::vector<Value> dys(n.out_shapes.size());
    for (size_t k = 0; k < dys.size(); ++k)
      if (Has(g_.output(i, static_cast<int>(k)))) dys[k] = Get(g_.output(i, static_cast<int>(k)));
    const Value dy = dys.empty() ? Value{} : dys[0];
    if (!dy.valid()) {
      if (n.kind == OpKind::kBatchNorm && (dys[1].valid() || dys[2].valid()))
        return Unimplemented(label + "gradients through the batch statistics outputs are not supported");
      return Status::OK();
    }
    const Value x = n.inputs.empty() ? Value{} : n.inputs[0];
    switch (n.kind) {
      case OpKind::kConv2D: {
        Attrs a;
        a.conv = n.attrs.conv;
        a.forward_node = i;
        if (need(0)) {
          a.input_shape = x.shape();
          Value dx = Emit(g_, OpKind::kConv2DBackpropInput, gname + "/input", {dy, n.inputs[1]}, {x.shape()},
                          {x.dtype()}, a);
          STRATA_RETURN_IF_ERROR(Accumulate(x, dx));
        }
        if (need(1)) {
          a.input_shape = n.inputs[1].shape();
          Value dw = Emit(g_, OpKind::kConv2DBackpropFilter, gname + "/kernel", {x, dy}, {n.inputs[1].shape()},
                          {n.inputs[1].dtype()}, a);
          STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[1], dw));
        }
        return Status::OK();
      }
      case OpKind::kMatMul: {
        const Value A = n.inputs[0], B = n.inputs[1];
        const bool ta = n.attrs.transpose_a, tb = n.attrs.transpose_b;
        if (need(0)) {
          Result<Value> da = !ta ? (!tb ? g_.MatMul(dy, B, false, true, gname + "/a") : g_.MatMul(dy, B, false, false, gname + "/a"))
                                 : (!tb ? g_.MatMul(B, dy, false, true, gname + "/a") : g_.MatMul(B, dy, true, true, gname + "/a"));
          if (!da.ok()) return da.status();
          STRATA_RETURN_IF_ERROR(Accumulate(A, *da));
        }
        if (need(1)) {
          Result<Value> db = !tb ? (!ta ? g_.MatMul(A, dy, true, false, gname + "/b") : g_.MatMul(A, dy, false, false, gname + "/b"))
                                 : (!ta ? g_.MatMul(dy, A, true, false, gname + "/b") : g_.MatMul(dy, A, true, true, gname + "/b"));
          if (!db.ok()) return db.status();
          STRATA_RETURN_IF_ERROR(Accumulate(B, *db));
        }
        return Status::OK();
      }
      case OpKind::kBiasAdd: {
        if (need(0)) STRATA_RETURN_IF_ERROR(Accumulate(x, dy));
        if (need(1)) {
          Attrs a;
          a.forward_node = i;
          Value db = Emit(g_, OpKind::kBiasAddGrad, gname + "/bias", {dy}, {n.inputs[1].shape()}, {DType::kF32}, a);
          STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[1], db));
        }
        return Status::OK();
      }
      case OpKind::kBatchNorm: {
        if (dys[1].valid() || dys[2].valid())
          return Unimplemented(label + "gradients through the batch statistics outputs are not supported");
        Attrs a;
        a.bn = n.attrs.bn;
        a.forward_node = i;
        const Shape c{x.shape()[-1]};
        Value r = Emit(g_, OpKind::kBatchNormGrad, gname,
                       {x, n.inputs[1], g_.output(i, 1), g_.output(i, 2), dy}, {x.shape(), c, c},
                       {x.dtype(), DType::kF32, DType::kF32}, a);
        if (need(0)) STRATA_RETURN_IF_ERROR(Accumulate(x, r));
        if (need(1)) STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[1], g_.output(r.node, 1)));
        if (need(2)) STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[2], g_.output(r.node, 2)));
        return Status::OK();
      }
      case OpKind::kActivation: {
        if (!need(0)) return Status::OK();
        Attrs a;
        a.activation = n.attrs.activation;
        a.forward_node = i;
        Value src = ActivationGradUsesOutput(n.attrs.activation) ? g_.output(i, 0) : x;
        Value dx = Emit(g_, OpKind::kActivationGrad, gname, {src, dy}, {x.shape()}, {x.dtype()}, a);
        return Accumulate(x, dx);
      }
      case OpKind::kSoftmax: {
        if (!need(0)) return Status::OK();
        Attrs a;
        a.forward_node = i;
        Value dx = Emit(g_, OpKind::kSoftmaxGrad, gname, {g_.output(i, 0), dy}, {x.shape()}, {x.dtype()}, a);
        return Accumulate(x, dx);
      }
      case OpKind::kMaxPool: {
        if (!need(0)) return Status::OK();
        Attrs a;
        a.pool = n.attrs.pool;
        a.forward_node = i;
        Value dx = Emit(g_, OpKind::kMaxPoolGrad, gname, {x, dy}, {x.shape()}, {x.dtype()}, a);
        return Accumulate(x, dx);
      }
      case OpKind::kAvgPool: {
        if (!need(0)) return Status::OK();
        Attrs a;
        a.pool = n.attrs.pool;
        a.forward_node = i;
        a.input_shape = x.shape();
        Value dx = Emit(g_, OpKind::kAvgPoolGrad, gname, {dy}, {x.shape()}, {x.dtype()}, a);
        return Accumulate(x, dx);
      }
      case OpKind::kAdd:
        if (need(0)) STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[0], dy));
        if (need(1)) STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[1], dy));
        return Status::OK();
      case OpKind::kSub: {
        if (need(0)) STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[0], dy));
        if (need(1)) {
          STRATA_ASSIGN_OR_RETURN(Value neg, g_.Scale(dy, -1.0f, gname + "/neg"));
          STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[1], neg));
        }
        return Status::OK();
      }
      case OpKind::kMultiply: {
        if (need(0)) {
          STRATA_ASSIGN_OR_RETURN(Value d, g_.Multiply(dy, n.inputs[1], gname + "/a"));
          STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[0], d));
        }
        if (need(1)) {
          STRATA_ASSIGN_OR_RETURN(Value d, g_.Multiply(dy, n.inputs[0], gname + "/b"));
          const Value b = n.inputs[1];
          if (b.shape() != x.shape()) {  // b broadcast along its size-1 dimensions: sum over them
            std::vector<int> axes;
            for (int k = 0; k < x.shape().rank(); ++k)
              if (b.shape()[k] != x.shape()[k]) axes.push_back(k);
            if (d.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(d, g_.Cast(d, DType::kF32, gname + "/b_f32")); }
            STRATA_ASSIGN_OR_RETURN(d, g_.ReduceSum(d, axes, gname + "/b_sum"));
            STRATA_ASSIGN_OR_RETURN(d, g_.Reshape(d, b.shape(), gname + "/b_shape"));
            if (b.dtype() != DType::kF32) { STRATA_ASSIGN_OR_RETURN(d, g_.Cast(d, b.dtype(), gname + "/b_cast")); }
          }
          STRATA_RETURN_IF_ERROR(Accumulate(b, d));
        }
        return Status::OK();
      }
      case OpKind::kScale: {
        if (!need(0)) return Status::OK();
        STRATA_ASSIGN_OR_RETURN(Value d, g_.Scale(dy, n.attrs.scalar, gname));
        return Accumulate(x, d);
      }
      case OpKind::kConcat: {
        int64_t begin = 0;
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          const int64_t len = n.inputs[k].shape()[n.attrs.axis];
          if (need(static_cast<int>(k))) {
            STRATA_ASSIGN_OR_RETURN(Value d, g_.Slice(dy, n.attrs.axis, begin, begin + len,
                                                      gname + "/" + std::to_string(k)));
            STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[k], d));
          }
          begin += len;
        }
        return Status::OK();
      }
      case OpKind::kSlice: {
        if (!need(0)) return Status::OK();
        // dx = [zeros, dy, zeros] along the axis.
        std::vector<Value> parts;
        const int axis = n.attrs.axis;
        std::vector<int64_t> dims = x.shape().dims();
        if (n.attrs.begin > 0) {
          dims[axis] = n.attrs.begin;
          parts.push_back(g_.Constant(0, Shape(dims), gname + "/zeros_before"));
        }
        parts.push_back(dy);
        if (n.attrs.end < x.shape()[axis]) {
          dims[axis] = x.shape()[axis] - n.attrs.end;
          parts.push_back(g_.Constant(0, Shape(dims), gname + "/zeros_after"));
        }
        if (parts.size() == 1) return Accumulate(x, dy);
        STRATA_ASSIGN_OR_RETURN(Value d, g_.Concat(parts, axis, gname));
        return Accumulate(x, d);
      }
      case OpKind::kReshape: {
        if (!need(0)) return Status::OK();
        STRATA_ASSIGN_OR_RETURN(Value d, g_.Reshape(dy, x.shape(), gname));
        return Accumulate(x, d);
      }
      case OpKind::kIdentity:
        return need(0) ? Accumulate(x, dy) : Status::OK();
      case OpKind::kDropout: {
        if (!need(0)) return Status::OK();
        STRATA_ASSIGN_OR_RETURN(Value d, g_.Multiply(dy, g_.output(i, 1), gname));
        return Accumulate(x, d);
      }
      case OpKind::kCast: {
        if (!need(0)) return Status::OK();
        STRATA_ASSIGN_OR_RETURN(Value d, g_.Cast(dy, x.dtype(), gname));
        return Accumulate(x, d);
      }
      case OpKind::kReduceSum:
      case OpKind::kReduceMean: {
        if (!need(0)) return Status::OK();
        STRATA_ASSIGN_OR_RETURN(Value d, g_.Broadcast(dy, x.shape(), n.attrs.axes, gname));
        if (n.kind == OpKind::kReduceMean) {
          int64_t count = 1;
          for (int a : n.attrs.axes) count *= x.shape()[a];
          STRATA_ASSIGN_OR_RETURN(d, g_.Scale(d, 1.0f / static_cast<float>(count), gname + "/mean"));
        }
        return Accumulate(x, d);
      }
      case OpKind::kBroadcast: {
        if (!need(0)) return Status::OK();
        STRATA_ASSIGN_OR_RETURN(Value d, g_.ReduceSum(dy, n.attrs.axes, gname));
        return Accumulate(x, d);
      }
      case OpKind::kSoftmaxCrossEntropy: {
        if (need(1)) return InvalidArgument(label + "labels are integers and have no gradient");
        if (dys[1].valid()) return Unimplemented(label + "gradient through the probabilities output");
        if (!need(0)) return Status::OK();
        Attrs a;
        a.label_smoothing = n.attrs.label_smoothing;
        a.forward_node = i;
        Value d = Emit(g_, OpKind::kSoftmaxCrossEntropyGrad, gname, {g_.output(i, 1), n.inputs[1], dy}, {x.shape()},
                       {DType::kF32}, a);
        return Accumulate(x, d);
      }
      case OpKind::kMeanSquaredError: {
        Attrs a;
        a.forward_node = i;
        if (need(0)) {
          Value d = Emit(g_, OpKind::kMeanSquaredErrorGrad, gname + "/prediction", {n.inputs[0], n.inputs[1], dy},
                         {x.shape()}, {DType::kF32}, a);
          STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[0], d));
        }
        if (need(1)) {
          Value d = Emit(g_, OpKind::kMeanSquaredErrorGrad, gname + "/target", {n.inputs[1], n.inputs[0], dy},
                         {x.shape()}, {DType::kF32}, a);
          STRATA_RETURN_IF_ERROR(Accumulate(n.inputs[1], d));
        }
        return Status::OK();
      }
      case OpKind::kInput: case OpKind::kVariable: case OpKind::kConstant:
        return Status::OK();
      default:
        return Unimplemented(label + "no gradient rule (batch-norm inference and gradient ops are not "
                             "differentiable here)");
    }
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
