// The graph itself: nodes, names, leaves and variables. The ops are defined by family in
// graph/ops/ (op_registry.h).
#include "strata/graph/graph.h"

#include <algorithm>
#include <sstream>

#include "strata/graph/op_checks.h"

namespace strata::graph {

using namespace checks;  // NOLINT: the shared argument checks (op_checks.h)

const Shape& Value::shape() const { return graph->node(node).out_shapes[output]; }
DType Value::dtype() const { return graph->node(node).out_dtypes[output]; }
const std::string& Value::name() const { return graph->node(node).name; }

std::string OpLabel(const std::string& name, OpKind kind) {
  return name + " (" + OpKindName(kind) + "): ";
}

WindowDim ComputeWindow(int64_t in, int64_t window, int stride, int dilation, Padding padding) {
  WindowDim d;
  const int64_t eff = (window - 1) * dilation + 1;
  if (padding == Padding::kValid) {
    d.out = in >= eff ? (in - eff) / stride + 1 : 0;
  } else {
    d.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((d.out - 1) * stride + eff - in, 0);
    d.pad_before = total / 2;
    d.pad_after = total - d.pad_before;
  }
  return d;
}

Value Graph::AddNode(Node n) {
  nodes_.push_back(std::move(n));
  return Value{this, static_cast<int32_t>(nodes_.size() - 1), 0};
}

std::string Graph::UniqueName(const std::string& name, OpKind kind) {
  if (!name.empty()) return name;
  std::string base = OpKindName(kind);
  std::transform(base.begin(), base.end(), base.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  return base + "_" + std::to_string(unnamed_++);
}

Result<Value> Graph::Finish(Node n) { return AddNode(std::move(n)); }

Result<Graph::NewOp> Graph::Begin(OpKind kind, const std::string& name, const std::vector<Value>& inputs,
                                  InputCheck check) {
  NewOp op;
  op.name = UniqueName(name, kind);
  op.label = OpLabel(op.name, kind);
  STRATA_RETURN_IF_ERROR(CheckValid(op.label, inputs, this));
  if (check == kFloatInput && !inputs.empty()) STRATA_RETURN_IF_ERROR(CheckFloat(op.label, "input", inputs[0]));
  return op;
}

Value Graph::Input(const std::string& name, DType dtype, Shape shape) {
  Node n{OpKind::kInput, UniqueName(name, OpKind::kInput), {}, {shape}, {dtype}, {}, false};
  return AddNode(std::move(n));
}

Result<Value> Graph::Variable(const std::string& name, Shape shape, VariableOptions options, VariableRole role) {
  if (name.empty()) return InvalidArgument("Variable: a variable needs a name");
  if (FindVariable(name).valid()) return InvalidArgument(OpLabel(name, OpKind::kVariable) + "duplicate variable name");
  for (int64_t d : shape.dims())
    if (d <= 0) return InvalidArgument(OpLabel(name, OpKind::kVariable) + "non-positive extent in " + S(shape));
  if (!options.values.empty() && static_cast<int64_t>(options.values.size()) != shape.num_elements())
    return InvalidArgument(OpLabel(name, OpKind::kVariable) + std::to_string(options.values.size()) +
                           " initial values for " + S(shape) + " (" + std::to_string(shape.num_elements()) +
                           " elements)");
  Node n{OpKind::kVariable, name, {}, {shape}, {DType::kF32}, {}, false};
  n.attrs.var = options;
  n.attrs.role = role;
  if (role != VariableRole::kParameter) n.attrs.var.trainable = false;
  Value v = AddNode(std::move(n));
  variables_.push_back(v.node);
  return v;
}

Value Graph::Constant(float value, Shape shape, const std::string& name) {
  Node n{OpKind::kConstant, UniqueName(name, OpKind::kConstant), {}, {shape}, {DType::kF32}, {}, false};
  n.attrs.scalar = value;
  return AddNode(std::move(n));
}

Result<Value> Graph::ConstantValues(std::vector<float> values, Shape shape, const std::string& name) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements())
    return InvalidArgument(OpLabel(name, OpKind::kConstant) + std::to_string(values.size()) + " values for shape " +
                           shape.ToString());
  Node n{OpKind::kConstant, UniqueName(name, OpKind::kConstant), {}, {shape}, {DType::kF32}, {}, false};
  n.attrs.var.values = std::move(values);
  return AddNode(std::move(n));
}

float ConstantAt(const Node& n, int64_t i) {
  return n.attrs.var.values.empty() ? n.attrs.scalar : n.attrs.var.values[static_cast<size_t>(i)];
}

Value Graph::FindVariable(const std::string& name) const {
  for (int i : variables_)
    if (nodes_[i].name == name) return Value{this, i, 0};
  return Value{};
}

void Graph::SetGradientOf(Value grad, Value var) { grad_of_.push_back({grad, var.node}); }

int Graph::GradientOf(Value v) const {
  for (const auto& [g, var] : grad_of_)
    if (g == v) return var;
  return -1;
}

std::string Graph::Describe(Value v) const {
  const Node& n = nodes_[v.node];
  std::ostringstream os;
  os << n.name << " (" << OpKindName(n.kind) << ")";
  if (v.output < static_cast<int>(n.out_shapes.size()))
    os << " " << DTypeName(n.out_dtypes[v.output]) << n.out_shapes[v.output].ToString();
  return os.str();
}

}  // namespace strata::graph
