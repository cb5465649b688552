// ONNX translation of the activation family: Activation (each graph::Activation as the ONNX ops
// that compute it the way Strata does), Softmax and MaskedSoftmax.
#include <cmath>
#include <string>
#include <vector>

#include "strata/keras/onnx_exporter.h"

namespace strata::keras::onnx {
namespace {

using graph::Activation;

Result<std::string> ActivationOf(Exporter& e, Activation a, const std::string& x, const std::string& name) {
  switch (a) {
    case Activation::kLinear: return e.Op("Identity", {x}, name);
    case Activation::kRelu: return e.Op("Relu", {x}, name);
    case Activation::kRelu6: return e.Op("Clip", {x, e.Scalar(name + "/min", 0), e.Scalar(name + "/max", 6)}, name);
    case Activation::kSigmoid: return e.Op("Sigmoid", {x}, name);
    case Activation::kTanh: return e.Op("Tanh", {x}, name);
    case Activation::kSwish: return e.Op("Mul", {x, e.Op("Sigmoid", {x}, name + "/sigmoid")}, name);
    // ONNX's HardSigmoid is max(0, min(1, alpha x + beta)); opset 13 has no HardSwish.
    case Activation::kHardSigmoid:
      return e.Op("HardSigmoid", {x}, name, {AttrFloat("alpha", 1.0f / 6), AttrFloat("beta", 0.5f)});
    case Activation::kHardSwish:
      return e.Op("Mul",
                  {x, e.Op("HardSigmoid", {x}, name + "/hard_sigmoid",
                           {AttrFloat("alpha", 1.0f / 6), AttrFloat("beta", 0.5f)})},
                  name);
    case Activation::kGelu: {  // 0.5 x (1 + erf(x / sqrt 2)): the erf form oneDNN's gelu_erf computes
      std::string scaled = e.Op("Div", {x, e.Scalar(name + "/sqrt2", std::sqrt(2.0f))}, name + "/scaled");
      std::string erf = e.Op("Erf", {scaled}, name + "/erf");
      std::string one_plus = e.Op("Add", {erf, e.Scalar(name + "/one", 1)}, name + "/one_plus");
      return e.Op("Mul", {e.Op("Mul", {x, one_plus}, name + "/x_times"), e.Scalar(name + "/half", 0.5f)}, name);
    }
    case Activation::kGeluTanh: {  // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))): opset 13 has no Gelu
      std::string cube = e.Op("Mul", {e.Op("Mul", {x, x}, name + "/square"), x}, name + "/cube");
      std::string inner = e.Op("Add", {x, e.Op("Mul", {cube, e.Scalar(name + "/cubic", 0.044715f)}, name + "/cubic_term")},
                               name + "/inner");
      std::string scaled = e.Op("Mul", {inner, e.Scalar(name + "/sqrt_2_over_pi", std::sqrt(2.0f / 3.14159265358979f))},
                                name + "/scaled");
      std::string one_plus = e.Op("Add", {e.Op("Tanh", {scaled}, name + "/tanh"), e.Scalar(name + "/one", 1)},
                                  name + "/one_plus");
      return e.Op("Mul", {e.Op("Mul", {x, one_plus}, name + "/x_times"), e.Scalar(name + "/half", 0.5f)}, name);
    }
  }
  return InvalidArgument("ONNX export: unknown activation in " + name);
}

Status ActivationOp(Exporter& e, const Node& n) {
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string y, ActivationOf(e, n.attrs.activation, x, n.name));
  e.Set(n, y);
  return Status::OK();
}

Status Softmax(Exporter& e, const Node& n) {
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  e.Set(n, e.Op("Softmax", {x}, n.name, {AttrInt("axis", n.out_shapes[0].rank() == 4 ? 1 : -1)}));  // NCHW's C
  return Status::OK();
}

// Keras's masked softmax: Softmax(x + (1 - mask) * -1e9) over the last axis, the mask [N, T, S]
// unsqueezed over the axes between (the heads); a rank-4 x in its own axis order around it.
Status MaskedSoftmax(Exporter& e, const Node& n) {
  const int rank = n.out_shapes[0].rank();
  STRATA_ASSIGN_OR_RETURN(std::string x, e.Operand(n.inputs[0]));
  STRATA_ASSIGN_OR_RETURN(std::string m, e.Operand(n.inputs[1]));
  if (rank == 4) x = e.ToNhwc(x, n.name + "/x");
  std::vector<int64_t> heads;
  for (int a = 1; a < rank - 2; ++a) heads.push_back(a);
  if (!heads.empty()) m = e.Op("Unsqueeze", {m, e.Int64Init(n.name + "/heads", heads)}, n.name + "/mask_rows");
  const std::string dropped = e.Op("Sub", {e.Scalar(n.name + "/one", 1), m}, n.name + "/dropped");
  const std::string adder = e.Op("Mul", {dropped, e.Scalar(n.name + "/large_negative", graph::kMaskedScore)}, n.name + "/adder");
  const std::string y = e.Op("Softmax", {e.Op("Add", {x, adder}, n.name + "/masked")}, n.name + (rank == 4 ? "/rows" : ""),
                             {AttrInt("axis", -1)});
  e.Set(n, rank == 4 ? e.ToNchw(y, n.name) : y);
  return Status::OK();
}

}  // namespace

void RegisterActivationOnnx(OnnxTable& t) {
  t.SetAll({{OpKind::kActivation, ActivationOp}, {OpKind::kSoftmax, Softmax}, {OpKind::kMaskedSoftmax, MaskedSoftmax}});
}

}  // namespace strata::keras::onnx
