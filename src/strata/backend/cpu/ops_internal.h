// Internals of PlanNode (planner.h) shared by the op families: ops.cc holds the dispatcher and
// these helpers, ops_<family>.cc one family's Plan functions each (conv, matmul, norm, pool,
// eltwise, loss, update). A Plan function appends node i's kernels (and those of the nodes
// fused into it) to the planner.
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strata/backend/cpu/planner.h"

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
EltwiseAlg ForwardAlg(Activation a, bool for_backward);

// Whether the schedule holds a backward node of forward node `fwd` (training, not inference).
bool HasBackward(Planner& p, int fwd);

void AddPrim(Kernel& k, const dnnl::primitive_desc_base& pd, Planner& p);

// ---- Plan functions, by family ---------------------------------------------------------------

// ops_conv.cc
Status PlanConv(Planner& p, int i);
Status PlanConvBackpropInput(Planner& p, int i);
Status PlanConvBackpropFilter(Planner& p, int i);
// ops_matmul.cc
Status PlanMatMul(Planner& p, int i);
// ops_norm.cc
Status PlanBatchNorm(Planner& p, int i);
Status PlanBatchNormGrad(Planner& p, int i);
// ops_pool.cc
Status PlanPool(Planner& p, int i);
Status PlanPoolGrad(Planner& p, int i);
// ops_eltwise.cc
Status PlanActivation(Planner& p, int i);
Status PlanActivationGrad(Planner& p, int i);
Status PlanScale(Planner& p, int i);
Status PlanSoftmax(Planner& p, int i, bool backward);
Status PlanBinary(Planner& p, int i);
Status PlanBiasAdd(Planner& p, int i);
Status PlanReduce(Planner& p, int i);
Status PlanConcat(Planner& p, int i);
Status PlanSlice(Planner& p, int i);
Status PlanAliasOrCopy(Planner& p, int i, dt type);
Status PlanDropout(Planner& p, int i);
Status PlanBroadcast(Planner& p, int i);
// ops_loss.cc
Status PlanSoftmaxCrossEntropy(Planner& p, int i);
Status PlanSoftmaxCrossEntropyGrad(Planner& p, int i);
Status PlanMse(Planner& p, int i, bool grad);
// ops_update.cc
Status PlanUpdate(Planner& p, int i);

// ---- hand-written kernels --------------------------------------------------------------------

template <typename T>
T* Ptr(Kernel& k, int j) { return reinterpret_cast<T*>(k.ptrs[j]); }

// A kernel of Strata's own over plain layouts: reads `ins` (each in its plain layout of the
// given type) and writes `outs` (plain f32); fn sees their pointers in that order.
Status PlanHand(Planner& p, int i, const std::string& op, const std::vector<std::pair<Value, dt>>& ins,
                const std::vector<Value>& outs, KernelFn fn);

}  // namespace strata::backend::cpu::ops
