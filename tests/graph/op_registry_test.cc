// The op registry (graph/op_registry.h), walked kind by kind: every OpKind has its entry in
// every layer (graph: name, family, gradient rule or a listed reason, FLOP counts; the
// reference evaluator; the cpu backend; the ONNX exporter or a listed reason), every op is
// reached by a row of the op table (op_cases.h: differentiated by central differences where
// it has a gradient, run on the cpu backend against the reference), and every op's FLOP
// count matches a hand count on one small case.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "op_cases.h"
#include "strata/backend/cpu/planner.h"
#include "strata/backend/reference/evaluator.h"
#include "strata/graph/op_registry.h"
#include "strata/keras/onnx_export.h"

namespace strata::testing {
namespace {

using graph::Op;
using graph::OpDef;
using graph::OpKind;

std::vector<OpKind> AllKinds() {
  std::vector<OpKind> kinds;
  for (int k = 0; k < graph::kNumOpKinds; ++k) kinds.push_back(static_cast<OpKind>(k));
  return kinds;
}

// The ops with no gradient rule, on purpose: the gradient ops (no second derivatives) and
// inference batch norm (a trained model's batch norm is BatchNorm). Any other op must have one.
const std::set<std::string> kNoGradient = {
    "Conv2DBackpropInput", "Conv2DBackpropFilter", "BatchNormInference", "BatchNormGrad",
    "ActivationGrad",      "SoftmaxGrad",          "MaxPoolGrad",        "AvgPoolGrad",
    "BiasAddGrad",         "SoftmaxCrossEntropyGrad", "MeanSquaredErrorGrad", "LayerNormGrad", "GatherGrad"};

// The ops an inference model never holds, so the ONNX exporter does not translate them: the
// gradient ops, training batch norm, dropout (identity at inference) and the losses.
const std::set<std::string> kNotExported = {
    "Conv2DBackpropInput", "Conv2DBackpropFilter", "BatchNorm",         "BatchNormGrad",
    "ActivationGrad",      "SoftmaxGrad",          "MaxPoolGrad",       "AvgPoolGrad",
    "BiasAddGrad",         "Dropout",              "SoftmaxCrossEntropy", "SoftmaxCrossEntropyGrad", "GatherGrad",
    "MeanSquaredError",    "MeanSquaredErrorGrad", "LayerNormGrad"};

TEST(OpRegistry, EveryKindHasItsGraphEntry) {
  std::set<std::string> names;
  for (OpKind k : AllKinds()) {
    const OpDef& op = Op(k);
    ASSERT_NE(op.name, nullptr) << "OpKind " << static_cast<int>(k) << " is registered by no family (graph/ops/)";
    EXPECT_EQ(op.kind, k) << op.name;
    EXPECT_STREQ(graph::OpKindName(k), op.name);
    EXPECT_TRUE(names.insert(op.name).second) << op.name << " twice";
    EXPECT_NE(op.family, nullptr) << op.name;
    EXPECT_NE(op.matrix_flops, nullptr) << op.name << " has no matrix FLOP count";
    EXPECT_NE(op.other_flops, nullptr) << op.name << " has no FLOP count";
  }
}

TEST(OpRegistry, EveryOpHasAGradientRuleOrIsListedWithout) {
  for (OpKind k : AllKinds()) {
    const OpDef& op = Op(k);
    if (kNoGradient.count(op.name)) {
      EXPECT_EQ(op.gradient, nullptr) << op.name << " is listed as having no gradient, but has a rule";
      EXPECT_TRUE(op.no_gradient != nullptr && *op.no_gradient) << op.name << " does not say why it has no gradient";
    } else {
      EXPECT_NE(op.gradient, nullptr) << op.name << " has no gradient rule and is not listed in kNoGradient";
    }
  }
}

TEST(OpRegistry, EveryOpHasAReferenceEvaluationAndACpuLowering) {
  for (OpKind k : AllKinds()) {
    EXPECT_TRUE(backend::reference::HasReferenceKernel(k)) << Op(k).name << ": no reference evaluation";
    EXPECT_TRUE(backend::cpu::HasCpuKernel(k)) << Op(k).name << ": no cpu lowering";
  }
}

TEST(OpRegistry, EveryOpIsExportedToOnnxOrListedAsTrainingOnly) {
  for (OpKind k : AllKinds()) {
    const char* why = nullptr;
    const keras::OnnxSupport support = keras::OnnxSupportOf(k, &why);
    if (kNotExported.count(Op(k).name)) {
      EXPECT_EQ(support, keras::OnnxSupport::kTrainingOnly) << Op(k).name << " is listed as not exported";
      EXPECT_TRUE(why != nullptr && *why) << Op(k).name << " does not say why it is not exported";
    } else {
      EXPECT_EQ(support, keras::OnnxSupport::kTranslated) << Op(k).name << ": no ONNX translation";
    }
  }
}

// Every op is in some row's graph; an op with a gradient rule is in the forward part of a row
// checked by central differences (so its rule is), a gradient op in some row's backward part
// (so its reference and cpu kernels are compared there).
TEST(OpRegistry, EveryOpIsCheckedByARowOfTheOpTable) {
  std::set<OpKind> forward_checked, anywhere;
  for (const OpCase& c : AllOpCases()) {
    CaseGraph cg;
    ASSERT_TRUE(BuildCase(c, cg).ok()) << c.name;
    for (int i = 0; i < cg.g.num_nodes(); ++i) {
      anywhere.insert(cg.g.node(i).kind);
      if (c.finite_differences && i < cg.first_grad_node) forward_checked.insert(cg.g.node(i).kind);
    }
  }
  for (OpKind k : AllKinds()) {
    const OpDef& op = Op(k);
    if (op.gradient != nullptr && op.family != std::string("leaf")) {
      EXPECT_TRUE(forward_checked.count(k)) << op.name << ": no row of op_cases.h differentiates it";
    }
    EXPECT_TRUE(anywhere.count(k)) << op.name << ": no row of op_cases.h reaches it";
  }
}

// FLOPs of one node of each kind, counted by hand: the first node of that kind in the named
// row's graph (forward, then backward). 2 per multiply-add for the matrix ops.
struct HandCount {
  const char* op;
  const char* row;
  int64_t matrix, other;
};
const HandCount kHandCounts[] = {
    {"Input", "add", 0, 0},
    {"Variable", "batch_norm_training", 0, 0},
    {"Constant", "slice", 0, 0},  // the zeros of the slice's gradient
    // conv2d_same_3x3: x [2, 6, 5, 3], kernel [3, 3, 3, 4], y [2, 6, 5, 4]: 240 outputs x 27 taps.
    {"Conv2D", "conv2d_same_3x3", 2 * 240 * 27, 0},
    {"Conv2DBackpropInput", "conv2d_same_3x3", 2 * 240 * 27, 0},
    {"Conv2DBackpropFilter", "conv2d_same_3x3", 2 * 240 * 27, 0},
    {"MatMul", "matmul", 2 * 4 * 3 * 5, 0},  // [4, 5] . [5, 3]
    {"BiasAdd", "bias_add", 0, 2 * 3 * 3 * 4},
    {"BiasAddGrad", "bias_add", 0, 2 * 3 * 3 * 4},  // a sum over every dy element
    // [4, 3, 3, 5]: 4 per element forward (subtract, scale, multiply, add), 6 backward.
    {"BatchNorm", "batch_norm_training", 0, 4 * 180},
    {"BatchNormGrad", "batch_norm_training", 0, 6 * 180},
    {"BatchNormInference", "batch_norm_inference_relu", 0, 4 * 180},
    // [4, 6]: a pass for the rows' statistics (4 per element) and one to normalise (4); backward 10.
    {"LayerNorm", "layer_norm_rows", 0, 8 * 24},
    {"LayerNormGrad", "layer_norm_rows", 0, 10 * 24},
    {"Activation", "activation_Relu", 0, 3 * 4 * 5},
    {"ActivationGrad", "activation_Relu", 0, 3 * 4 * 5},
    {"Scale", "activation_Relu", 0, 3 * 4 * 5},
    {"Softmax", "softmax", 0, 4 * 3 * 6},  // max, exp, sum, divide per element
    {"MaskedSoftmax", "masked_softmax_heads", 0, 7 * 2 * 3 * 4 * 19},  // and 1 - m, times -1e9, plus x
    {"SoftmaxGrad", "softmax", 0, 3 * 6},
    // max_pool_valid: [2, 6, 6, 3] in 2x2 windows: 54 outputs of 4 taps; the gradient one per input.
    {"MaxPool", "max_pool_valid", 0, 54 * 4},
    {"MaxPoolGrad", "max_pool_valid", 0, 2 * 6 * 6 * 3},
    // avg_pool_same_3x3: [2, 5, 5, 2] at stride 1, 100 outputs of 9 taps (padded ones too).
    {"AvgPool", "avg_pool_same_3x3", 0, 100 * 9},
    {"AvgPoolGrad", "avg_pool_same_3x3", 0, 100},
    {"Add", "add", 0, 2 * 3 * 4},
    {"Sub", "sub", 0, 2 * 3 * 4},
    {"Multiply", "multiply", 0, 2 * 3 * 2 * 4},
    {"Dropout", "dropout", 0, 4 * 8},
    {"Concat", "concat_channels", 0, 0},
    {"Slice", "slice", 0, 0},
    {"Reshape", "reshape", 0, 0},
    {"Transpose", "transpose_heads", 0, 0},
    {"Gather", "gather_embedding", 0, 0},
    {"GatherGrad", "gather_embedding", 0, 0},
    {"Cast", "cast_f32", 0, 0},
    {"Identity", "identity", 0, 0},
    {"ReduceSum", "reduce_sum_axes", 0, 2 * 3 * 4},
    {"ReduceMean", "reduce_mean_all", 0, 2 * 3 * 4},
    {"Broadcast", "reduce_mean_all", 0, 2 * 3 * 4},  // the mean's gradient, back to [2, 3, 4]
    {"SoftmaxCrossEntropy", "softmax_cross_entropy", 0, 4 * 4 * 5},
    {"SoftmaxCrossEntropyGrad", "softmax_cross_entropy", 0, 4 * 5},
    // [3, 4]: difference, square and sum per element; the gradient one per element.
    {"MeanSquaredError", "mean_squared_error", 0, 3 * 3 * 4},
    {"MeanSquaredErrorGrad", "mean_squared_error", 0, 3 * 4},
};

TEST(OpRegistry, EveryOpsFlopCountMatchesAHandCount) {
  std::map<std::string, OpCase> rows;
  for (const OpCase& c : AllOpCases()) rows.emplace(c.name, c);
  std::set<std::string> counted;
  for (const HandCount& h : kHandCounts) {
    counted.insert(h.op);
    ASSERT_TRUE(rows.count(h.row)) << h.row;
    CaseGraph cg;
    ASSERT_TRUE(BuildCase(rows.at(h.row), cg).ok()) << h.row;
    int node = -1;
    for (int i = 0; i < cg.g.num_nodes() && node < 0; ++i)
      if (std::string(Op(cg.g.node(i).kind).name) == h.op) node = i;
    ASSERT_GE(node, 0) << "row " << h.row << " has no " << h.op;
    EXPECT_EQ(cg.g.MatrixFlops(node), h.matrix) << h.op << " in " << h.row;
    EXPECT_EQ(cg.g.OtherFlops(node), h.other) << h.op << " in " << h.row;
  }
  for (OpKind k : AllKinds()) EXPECT_TRUE(counted.count(Op(k).name)) << Op(k).name << " has no hand count";
}

// docs/engine.md's table "The op registry": one row per family, its ops, those without a
// gradient and those not exported, each a comma-separated list (parenthesised notes ignored).
TEST(OpRegistry, TheEngineDocsTableIsTheRegistry) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/docs/engine.md");
  ASSERT_TRUE(in) << "docs/engine.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t at = doc.find("### The op registry");
  ASSERT_NE(at, std::string::npos);
  auto list = [](std::string cell) {
    cell = std::regex_replace(cell, std::regex(R"(\s*\([^)]*\))"), "");
    std::set<std::string> out;
    std::stringstream ss(cell);
    for (std::string item; std::getline(ss, item, ',');) {
      item = std::regex_replace(item, std::regex(R"(^\s+|\s+$)"), "");
      if (!item.empty()) out.insert(item);
    }
    return out;
  };
  struct Row {
    std::set<std::string> ops, no_gradient, not_exported;
  };
  std::map<std::string, Row> doc_rows, registry_rows;
  std::stringstream lines(doc.substr(at, doc.find("\n### ", at + 1) - at));
  const std::regex row(R"(^\| (\w+) \|([^|]*)\|([^|]*)\|([^|]*)\|$)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row) || m[1] == "family") continue;
    doc_rows[m[1]] = {list(m[2]), list(m[3]), list(m[4])};
  }
  for (OpKind k : AllKinds()) {
    const OpDef& op = Op(k);
    Row& r = registry_rows[op.family];
    r.ops.insert(op.name);
    if (op.gradient == nullptr) r.no_gradient.insert(op.name);
    if (keras::OnnxSupportOf(k) == keras::OnnxSupport::kTrainingOnly) r.not_exported.insert(op.name);
  }
  ASSERT_EQ(doc_rows.size(), registry_rows.size()) << "families in docs/engine.md vs the registry";
  for (const auto& [family, want] : registry_rows) {
    ASSERT_TRUE(doc_rows.count(family)) << "docs/engine.md has no row for family " << family;
    const Row& got = doc_rows.at(family);
    EXPECT_EQ(got.ops, want.ops) << family << ": ops";
    EXPECT_EQ(got.no_gradient, want.no_gradient) << family << ": no gradient";
    EXPECT_EQ(got.not_exported, want.not_exported) << family << ": not exported";
  }
}

}  // namespace
}  // namespace strata::testing
