// Evaluator: feeds the leaves, then runs the schedule, each node by the kernel its op family
// registered for its kind (ops.h), and rounds the bf16 outputs.
#include "strata/backend/reference/evaluator.h"

#include "strata/backend/reference/ops.h"
#include "strata/core/dtype.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: the evaluator is graph types throughout

namespace {

double RoundBF16(double v) { return ToF32(ToBF16(static_cast<float>(v))); }

// The one place the op families register their kernels (ops.h says why not at static
// initialization); built on first use, read-only after.
const KernelTable& Kernels() {
  static const KernelTable table = [] {
    KernelTable t("reference evaluator's op table");
    RegisterConvOps(t);
    RegisterMatMulOps(t);
    RegisterNormOps(t);
    RegisterPoolOps(t);
    RegisterActivationOps(t);
    RegisterElementwiseOps(t);
    RegisterReduceOps(t);
    RegisterShapeOps(t);
    RegisterLossOps(t);
    return t;
  }();
  return table;
}

}  // namespace

bool HasReferenceKernel(OpKind kind) { return IsLeaf(kind) || Kernels().Find(kind) != nullptr; }

Evaluator::Evaluator(const Graph& g, std::vector<Value> fetches) : g_(g), schedule_(MakeSchedule(g, fetches)) {}

const std::vector<double>& Evaluator::value(Value v) const {
  static const std::vector<double> kEmpty;
  auto it = values_.find({v.node, v.output});
  return it == values_.end() ? kEmpty : it->second;
}

const std::vector<double>& Evaluator::in(const Value& v, std::map<int, std::vector<double>>& leaves) {
  const Node& n = g_.node(v.node);
  if (n.kind == OpKind::kInput || n.kind == OpKind::kVariable) return leaves[v.node];
  return values_[{v.node, v.output}];
}

Status Evaluator::Run(std::map<int, std::vector<double>>& leaves, uint64_t step) {
  for (int i = 0; i < g_.num_nodes(); ++i) {
    const Node& n = g_.node(i);
    if (!schedule_.live[i]) continue;
    if (n.kind == OpKind::kConstant) {
      auto& v = out(i, 0);
      v.resize(static_cast<size_t>(n.out_shapes[0].num_elements()));
      for (size_t e = 0; e < v.size(); ++e) v[e] = graph::ConstantAt(n, static_cast<int64_t>(e));
    } else if (n.kind == OpKind::kInput || n.kind == OpKind::kVariable) {
      auto it = leaves.find(i);
      if (it == leaves.end() || static_cast<int64_t>(it->second.size()) != n.out_shapes[0].num_elements())
        return InvalidArgument(OpLabel(n.name, n.kind) + "no value of " + n.out_shapes[0].ToString() + " was fed");
      values_[{i, 0}] = it->second;
    }
  }
  for (int i : schedule_.order) STRATA_RETURN_IF_ERROR(RunNode(i, leaves, step));
  return Status::OK();
}

Status Evaluator::RunNode(int i, std::map<int, std::vector<double>>& leaves, uint64_t step) {
  const Node& n = g_.node(i);
  const std::string label = OpLabel(n.name, n.kind);
  std::vector<const Vec*> x;
  for (const Value& v : n.inputs) x.push_back(&in(v, leaves));
  std::vector<Vec*> y;
  for (size_t k = 0; k < n.out_shapes.size(); ++k) {
    Vec& o = out(i, static_cast<int>(k));
    o.assign(n.out_shapes[k].num_elements(), 0.0);
    y.push_back(&o);
  }
  const Kernel* kernel = Kernels().Find(n.kind);
  if (kernel == nullptr) return Unimplemented(label + "not supported by the reference evaluator");
  STRATA_RETURN_IF_ERROR((*kernel)({g_, n, i, std::move(x), std::move(y), leaves, step, label}));
  for (size_t k = 0; k < n.out_dtypes.size(); ++k)
    if (n.out_dtypes[k] == DType::kBF16)
      for (double& v : out(i, static_cast<int>(k))) v = RoundBF16(v);
  return Status::OK();
}

}  // namespace strata::backend::reference
