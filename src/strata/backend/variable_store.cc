#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "strata/backend/compile.h"

namespace strata::backend {

using graph::Init;

namespace {

void Fans(const Shape& s, double* fan_in, double* fan_out) {
  if (s.rank() == 0) { *fan_in = *fan_out = 1; return; }
  if (s.rank() == 1) { *fan_in = *fan_out = static_cast<double>(s[0]); return; }
  double receptive = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) receptive *= static_cast<double>(s[i]);
  *fan_in = static_cast<double>(s[-2]) * receptive;
  *fan_out = static_cast<double>(s[-1]) * receptive;
}

void InitializeValues(const VariableStore::Entry& e, float* out) {
  const graph::VariableOptions& o = e.init;
  std::mt19937_64 rng(o.seed != 0 ? o.seed : std::hash<std::string>{}(e.name));
  double fan_in, fan_out;
  Fans(e.shape, &fan_in, &fan_out);
  if (!o.values.empty()) {  // Graph::Variable checked the count
    std::copy(o.values.begin(), o.values.end(), out);
    return;
  }
  switch (o.init) {
    case Init::kZeros: std::fill(out, out + e.size, 0.0f); break;
    case Init::kOnes: std::fill(out, out + e.size, 1.0f); break;
    case Init::kConstant: std::fill(out, out + e.size, o.value); break;
    case Init::kGlorotUniform: {
      std::uniform_real_distribution<double> u(-1, 1);
      const double limit = std::sqrt(6.0 / (fan_in + fan_out));
      for (int64_t i = 0; i < e.size; ++i) out[i] = static_cast<float>(u(rng) * limit);
      break;
    }
    case Init::kHeNormal: {  // truncated at two standard deviations, as Keras
      std::normal_distribution<double> nd(0, 1);
      const double sd = std::sqrt(2.0 / fan_in) / 0.87962566103423978;
      for (int64_t i = 0; i < e.size; ++i) {
        double v;
        do v = nd(rng); while (std::fabs(v) > 2);
        out[i] = static_cast<float>(v * sd);
      }
      break;
    }
    case Init::kUniform: {
      std::uniform_real_distribution<double> u(-o.value, o.value);
      for (int64_t i = 0; i < e.size; ++i) out[i] = static_cast<float>(u(rng));
      break;
    }
    case Init::kNormal: {
      std::normal_distribution<double> nd(0, o.value);
      for (int64_t i = 0; i < e.size; ++i) out[i] = static_cast<float>(nd(rng));
      break;
    }
    case Init::kTruncatedNormal: {
      std::normal_distribution<double> nd(0, o.value);
      for (int64_t i = 0; i < e.size; ++i) {
        double v = nd(rng);
        while (std::fabs(v) > 2.0 * o.value) v = nd(rng);
        out[i] = static_cast<float>(v);
      }
      break;
    }
  }
}

}  // namespace

Result<std::shared_ptr<VariableStore>> VariableStore::Create(const graph::Graph& g) {
  auto store = std::make_shared<VariableStore>();
  int64_t trainable = 0, state = 0;
  // Trainable parameters first, then state, so params[0, num_trainable) lines up with grads.
  for (int pass = 0; pass < 2; ++pass) {
    for (int i : g.variable_nodes()) {
      const graph::Node& n = g.node(i);
      const bool tr = n.attrs.var.trainable;
      if (tr != (pass == 0)) continue;
      Entry e{n.name, n.out_shapes[0], n.attrs.role, tr, 0, n.out_shapes[0].num_elements(), n.attrs.var};
      int64_t& cursor = tr ? trainable : state;
      e.offset = tr ? cursor : trainable + cursor;
      cursor += e.size;
      store->entries_.push_back(std::move(e));
    }
  }
  store->num_trainable_ = trainable;
  store->params_ = Tensor(DType::kF32, Shape{std::max<int64_t>(trainable + state, 1)});
  store->grads_ = Tensor(DType::kF32, Shape{std::max<int64_t>(trainable, 1)});
  store->Initialize();
  return store;
}

void VariableStore::Initialize() {
  for (const Entry& e : entries_) InitializeValues(e, params_.data<float>() + e.offset);
  std::memset(grads_.raw_data(), 0, grads_.nbytes());
}

const VariableStore::Entry* VariableStore::Find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

Status VariableStore::CheckCompatible(const graph::Graph& g) const {
  for (int i : g.variable_nodes()) {
    const graph::Node& n = g.node(i);
    const Entry* e = Find(n.name);
    if (e == nullptr) return NotFound("variable " + n.name + " is not in the shared variable store");
    if (e->shape != n.out_shapes[0])
      return InvalidArgument("variable " + n.name + ": the shared store holds " + e->shape.ToString() +
                             ", the graph expects " + n.out_shapes[0].ToString());
    if (e->role != n.attrs.role) return InvalidArgument("variable " + n.name + ": role differs from the shared store");
  }
  return Status::OK();
}

static Result<Tensor> ViewOf(const Tensor& block, const VariableStore::Entry& e) {
  STRATA_ASSIGN_OR_RETURN(Tensor flat, block.Slice(0, e.offset, e.offset + e.size));
  return flat.Reshape(e.shape);
}

Result<Tensor> VariableStore::Value(const std::string& name) const {
  const Entry* e = Find(name);
  if (e == nullptr) return NotFound("no variable named " + name);
  return ViewOf(params_, *e);
}

Result<Tensor> VariableStore::Gradient(const std::string& name) const {
  const Entry* e = Find(name);
  if (e == nullptr) return NotFound("no variable named " + name);
  if (!e->trainable) return InvalidArgument("variable " + name + " is not trainable and has no gradient");
  return ViewOf(grads_, *e);
}

}  // namespace strata::backend
