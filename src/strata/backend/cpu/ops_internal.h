// Internals of PlanNode (planner.h) shared by the op families: ops.cc holds the op table and
// these helpers, ops_<family>.cc one family's Plan functions each and their registration (the
// families of graph/op_registry.h). A Plan function appends node i's kernels (and those of the nodes
// fused into it) to the planner.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strata/backend/cpu/planner.h"
#include "strata/graph/op_registry.h"

namespace strata::backend::cpu::ops {

using graph::Activation;
using graph::Node;
using graph::OpKind;
using graph::Value;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;
using dnnl::algorithm;
using dnnl::prop_kind;

// The trace line of node i's kernel: its name, op, oneDNN (or Strata) implementation, shapes
// and FLOPs.
KernelInfo Info(Planner& p, int i, const std::string& op, const std::string& impl);

inline md Any(const dims& d, dt t) { return md(d, t, tag::any); }
// oneDNN dims of a graph shape (rank 4 [N, H, W, C] -> {N, C, H, W}).
dims Dims(const Shape& s);
int DnnlAxis(int rank, int axis);

// The data type a conv/matmul writes v in: bf16 under mixed precision when every reader
// takes bf16 (a hand-written f32 reader would only reorder it back).
dt OutType(Planner& p, Value v);
inline dt ComputeType(Planner& p) { return p.bf16() ? dt::bf16 : dt::f32; }
// The layout v exists in first, or plain f32 when that is not a float layout.
md DataDesc(Planner& p, Value v);

struct EltwiseAlg {
  algorithm alg;
  float alpha, beta;
  bool uses_dst;
};
// oneDNN's algorithm for `a` (for kHardSigmoid only its linear part x / 6 + 1/2: the clip to
// [0, 1] is a second post-op, ActivationPostOp, or Strata's own kernel).
EltwiseAlg ForwardAlg(Activation a, bool for_backward);

// A conv or matmul with the bias add, residual sum and activation fused into it
// (graph/fusion.h; -1: none): the value that holds its result, the other operand of the sum,
// the kernel's name ("Conv2D+BiasAdd+Add+Relu") and the primitive attributes, with the
// activation as an eltwise post-op when there is no residual sum (with one, the caller chains
// the sum and then the activation: the sum's post-op needs the layout the kernel writes).
struct FusedEpilogue {
  int bias_node, act_node, residual_node;
  Value out;
  Value other;  // the residual sum's other operand
  std::string name;
  dnnl::primitive_attr attr;
};
FusedEpilogue Epilogue(Planner& p, int i, const std::string& op);
// `po` with activation a appended as an eltwise post-op.
dnnl::post_ops ActivationPostOp(Activation a, dnnl::post_ops po = {});

// Whether the schedule holds a backward node of forward node `fwd` (training, not inference).
bool HasBackward(Planner& p, int fwd);

// A oneDNN primitive's arguments: (DNNL_ARG_*, buffer, layout).
using DnnlArgs = std::vector<std::tuple<int, int, md>>;

// The end of every oneDNN op's plan: kernel k (its info; rarely a hand-written step that runs
// after the primitive) gets the primitive of pd over args and its scratchpad, is appended, and
// the outputs pinned elsewhere are copied into place. The arguments' buffers come from
// p.Use()/p.Define() before: those may append reorders, which run first.
template <class Primitive>
Status AppendPrimitive(Planner& p, Kernel k, const typename Primitive::primitive_desc& pd, DnnlArgs args) {
  k.dnnl_args = std::move(args);
  p.NoteScratchpad(pd);
  k.dnnl_args.push_back({DNNL_ARG_SCRATCHPAD, -2, pd.scratchpad_desc()});
  k.prim = Primitive(pd);
  p.Append(std::move(k));
  return p.FinishOutputs();
}
template <class Primitive>
Status AppendPrimitive(Planner& p, KernelInfo info, const typename Primitive::primitive_desc& pd, DnnlArgs args) {
  Kernel k;
  k.info = std::move(info);
  return AppendPrimitive<Primitive>(p, std::move(k), pd, std::move(args));
}

// A plain tensor of shape `full` seen as [a, r, b] against `part` seen as [a, 1, b]: `part`
// equals `full` but for one contiguous run of axes where it is 1 (the run is r). nullopt
// where `part` differs otherwise (ranks, extents, or two separate runs).
struct MiddleRun {
  int64_t a, r, b;
};
std::optional<MiddleRun> BroadcastRun(const Shape& full, const Shape& part);

// ---- the op table: each family's file registers its ops' Plan functions ----------------------

using PlanFn = Status(Planner& p, int i);
// Whether the op reads bf16 operands as they are; OutType gives an op that does not f32.
inline constexpr bool kTakesBF16 = true;
struct CpuOp {
  PlanFn* plan = nullptr;
  bool takes_bf16 = false;
};
using PlanTable = graph::OpTable<CpuOp>;
inline void Register(PlanTable& table, OpKind kind, PlanFn* plan, bool takes_bf16 = false) {
  table.Set(kind, {plan, takes_bf16});
}
// The entry of `kind` (plan nullptr: no lowering).
const CpuOp& CpuOpOf(OpKind kind);

void RegisterConvPlans(PlanTable& t);         // ops_conv.cc
void RegisterMatMulPlans(PlanTable& t);       // ops_matmul.cc
void RegisterNormPlans(PlanTable& t);         // ops_norm.cc
void RegisterPoolPlans(PlanTable& t);         // ops_pool.cc
void RegisterActivationPlans(PlanTable& t);   // ops_activation.cc
void RegisterElementwisePlans(PlanTable& t);  // ops_elementwise.cc
void RegisterReducePlans(PlanTable& t);       // ops_reduce.cc
void RegisterShapePlans(PlanTable& t);        // ops_shape.cc
void RegisterLossPlans(PlanTable& t);         // ops_loss.cc

// Plan functions one family's file defines and another's entry uses (BiasAddGrad is a reduction).
PlanFn PlanReduce;

// ---- hand-written kernels --------------------------------------------------------------------

template <typename T>
T* Ptr(Kernel& k, int j) { return reinterpret_cast<T*>(k.ptrs[j]); }

// A kernel of Strata's own over plain layouts: reads `ins` (each in its plain layout of the
// given type) and writes `outs` (plain f32); fn sees their pointers in that order.
// `impl` names the body in the trace ("strata:avx512" for a vectorised one).
Status PlanHand(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, dt>>& ins,
                const std::vector<Value>& outs, KernelFn fn, const std::string& impl = "strata:scalar");
// The same with each input and output in a layout of the caller's choosing (a kernel that
// works on oneDNN's blocked layouts as they are, without reorders).
Status PlanHandIn(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, md>>& ins,
                  const std::vector<std::pair<Value, md>>& outs, KernelFn fn, const std::string& impl);

// How a tensor of shape [N, H, W, C] multiplied by (or spread from) a factor [N, 1, 1, C]
// runs over layout `d` as [a, r, b] against [a, 1, b] (broadcast_kernels.h): plain NHWC is
// [N, H * W, C]; oneDNN's channel-blocked nChw16c / nChw8c with C a multiple of the block is
// [N * C / block, H * W, block], the factor's plain [N, C] read as [N * C / block, block].
// nullopt for any other layout (padded blocks among them).
std::optional<MiddleRun> ChannelBroadcastRun(const md& d, const Shape& nhwc);

// oneDNN's channel-blocked layouts of a rank-4 [N, H, W, C] tensor, nChw16c or nChw8c, with
// their block.
struct ChannelBlockFormat {
  tag format;
  int64_t block;
};
// The one `d` is (in its own data type; channels padded to a whole block), else nullopt.
std::optional<ChannelBlockFormat> ChannelBlocksOf(const md& d, const Shape& nhwc);
// The same where C is whole blocks (no padded block). A concat or slice along channels at whole
// blocks keeps it (DenseNet's dense blocks).
std::optional<ChannelBlockFormat> WholeChannelBlocks(const md& d, const Shape& nhwc);

}  // namespace strata::backend::cpu::ops
