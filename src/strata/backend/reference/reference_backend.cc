// The "reference" backend: a Program over the f64 Evaluator. Same interface and variable
// store as the cpu backend, so tests run one graph on both and compare.
#include <cmath>
#include <map>

#include "strata/backend/backend.h"
#include "strata/backend/reference/evaluator.h"

namespace strata::backend {
namespace {

using graph::OpKind;
using graph::Value;

double Load(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[i];
    case DType::kBF16: return ToF32(t.data<bf16>()[i]);
    case DType::kI32: return t.data<int32_t>()[i];
    case DType::kI64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kU8: return t.data<uint8_t>()[i];
  }
  return 0;
}

void Store(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
    case DType::kBF16: t.data<bf16>()[i] = ToBF16(static_cast<float>(v)); break;
    case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
  }
}

class ReferenceProgram : public Program {
 public:
  ReferenceProgram(const graph::Graph& g, const CompileOptions& o, std::shared_ptr<VariableStore> vars)
      : g_(g), fetch_values_(o.fetches) {
    vars_ = std::move(vars);
    std::vector<Value> all = o.fetches;
    for (int i = 0; i < g.num_nodes(); ++i) {
      if (g.node(i).kind == OpKind::kInput) inputs_[i] = Tensor(g.node(i).out_dtypes[0], g.node(i).out_shapes[0]);
      for (int k = 0; k < static_cast<int>(g.node(i).out_shapes.size()); ++k)
        if (g.GradientOf(g.output(i, k)) >= 0) {
          grads_.push_back(g.output(i, k));
          all.push_back(g.output(i, k));
        }
    }
    for (const Value& f : o.fetches) fetches_[{f.node, f.output}] = Tensor(f.dtype(), f.shape());
    eval_ = std::make_unique<reference::Evaluator>(g, all);
    for (int i = 0; i < g.num_nodes(); ++i)
      if (g.node(i).kind != OpKind::kInput && g.node(i).kind != OpKind::kVariable && !graph::IsLeaf(g.node(i).kind))
        kernels_.push_back({g.node(i).name, graph::OpKindName(g.node(i).kind), "reference:f64", "",
                            g.MatrixFlops(i), g.OtherFlops(i)});
  }

  uint64_t step() const override { return step_; }
  void set_step(uint64_t step) override { step_ = step; }
  Status Run() override {
    std::map<int, std::vector<double>> leaves;
    for (auto& [node, t] : inputs_) {
      auto& v = leaves[node];
      v.resize(t.num_elements());
      for (int64_t e = 0; e < t.num_elements(); ++e) v[e] = Load(t, e);
    }
    for (int i : g_.variable_nodes()) {
      STRATA_ASSIGN_OR_RETURN(Tensor t, vars_->Value(g_.node(i).name));
      auto& v = leaves[i];
      v.resize(t.num_elements());
      for (int64_t e = 0; e < t.num_elements(); ++e) v[e] = Load(t, e);
    }
    STRATA_RETURN_IF_ERROR(eval_->Run(leaves, step_++));
    for (int i : g_.variable_nodes()) {
      STRATA_ASSIGN_OR_RETURN(Tensor t, vars_->Value(g_.node(i).name));
      for (int64_t e = 0; e < t.num_elements(); ++e) Store(t, e, leaves[i][e]);
    }
    for (const Value& gv : grads_) {
      STRATA_ASSIGN_OR_RETURN(Tensor t, vars_->Gradient(g_.node(g_.GradientOf(gv)).name));
      const auto& v = eval_->value(gv);
      for (int64_t e = 0; e < t.num_elements(); ++e) Store(t, e, v[e]);
    }
    for (auto& [key, t] : fetches_) {
      const Value fv = g_.output(key.first, key.second);
      const auto& v = graph::IsLeaf(g_.node(key.first).kind) && g_.node(key.first).kind != OpKind::kConstant
                          ? leaves[key.first] : eval_->value(fv);
      for (int64_t e = 0; e < t.num_elements(); ++e) Store(t, e, v[e]);
    }
    return Status::OK();
  }

  const std::vector<KernelInfo>& kernels() const override { return kernels_; }
  int64_t arena_bytes() const override { return 0; }
  int64_t total_bytes() const override { return 0; }

 private:
  const graph::Graph& g_;
  std::vector<Value> fetch_values_, grads_;
  std::unique_ptr<reference::Evaluator> eval_;
  std::vector<KernelInfo> kernels_;
  uint64_t step_ = 0;
};

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Result<std::unique_ptr<Program>> Compile(const graph::Graph& g, const CompileOptions& o,
                                           std::shared_ptr<VariableStore> vars) override {
    return std::unique_ptr<Program>(new ReferenceProgram(g, o, std::move(vars)));
  }
  // The rules written out in f64 per element, the oracle the cpu backend's vector kernels
  // are compared against.
  void ApplyUpdate(const UpdateRule& r, const UpdateBuffers& b) const override {
    const double lr = r.lr;
    for (int64_t e = 0; e < b.n; ++e) {
      double w = b.w[e];
      const double g = b.g[e];
      switch (r.kind) {
        case UpdateRule::Kind::kSgd:
          if (r.momentum == 0) {
            w -= lr * g;
          } else {
            const double v = r.momentum * static_cast<double>(b.s0[e]) - lr * g;
            b.s0[e] = static_cast<float>(v);
            w += r.nesterov ? r.momentum * v - lr * g : v;
          }
          break;
        case UpdateRule::Kind::kAdam: {
          const double t = r.step;
          const double lr_t = lr * std::sqrt(1 - std::pow(double{r.beta_2}, t)) / (1 - std::pow(double{r.beta_1}, t));
          if (r.weight_decay > 0) w -= lr * r.weight_decay * w;
          const double m = r.beta_1 * static_cast<double>(b.s0[e]) + (1 - double{r.beta_1}) * g;
          const double v = r.beta_2 * static_cast<double>(b.s1[e]) + (1 - double{r.beta_2}) * g * g;
          b.s0[e] = static_cast<float>(m);
          b.s1[e] = static_cast<float>(v);
          w -= lr_t * m / (std::sqrt(v) + r.epsilon);
          break;
        }
        case UpdateRule::Kind::kRmsProp: {
          const double rms = r.rho * static_cast<double>(b.s0[e]) + (1 - double{r.rho}) * g * g;
          b.s0[e] = static_cast<float>(rms);
          const double inc = lr * g / std::sqrt(rms + r.epsilon);
          if (r.momentum != 0) {
            const double mom = r.momentum * static_cast<double>(b.s1[e]) + inc;
            b.s1[e] = static_cast<float>(mom);
            w -= mom;
          } else {
            w -= inc;
          }
          break;
        }
      }
      b.w[e] = static_cast<float>(w);
    }
  }
};

}  // namespace

std::unique_ptr<Backend> NewReferenceBackend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace strata::backend
