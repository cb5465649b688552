// Losses as Strata's own kernels (loss_kernels.h): softmax cross-entropy (keeping the
// probabilities for its gradient) and mean squared error, each with its gradient.
#include <string>

#include "strata/backend/cpu/loss_kernels.h"
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

Status PlanSoftmaxCrossEntropy(Planner& p, int i) {  // inputs logits [N, K], labels [N]
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t N = n.inputs[0].shape()[0], K = n.inputs[0].shape()[1];
  const float eps = n.attrs.label_smoothing;
  const std::string label = graph::OpLabel(n.name, n.kind);
  // Outputs loss [], probabilities [N, K].
  return PlanHand(p, i, "softmax_xent", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::s32}}, {g.output(i, 0), g.output(i, 1)},
                  [=](Kernel& k, uint64_t) -> Status {
                    const Status st = SoftmaxCrossEntropyForward(Ptr<float>(k, 0), Ptr<int32_t>(k, 1), N, K, eps,
                                                                 Ptr<float>(k, 3), Ptr<float>(k, 2));
                    if (!st.ok()) return Status(st.code(), label + st.message());  // names the op
                    return st;
                  });
}

Status PlanSoftmaxCrossEntropyGrad(Planner& p, int i) {  // inputs probabilities, labels, dloss
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t N = n.inputs[0].shape()[0], K = n.inputs[0].shape()[1];
  const float eps = n.attrs.label_smoothing;
  return PlanHand(p, i, "softmax_xent_grad", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::s32}, {n.inputs[2], dt::f32}},
                  {g.output(i)}, [=](Kernel& k, uint64_t) {
                    SoftmaxCrossEntropyBackward(Ptr<float>(k, 0), Ptr<int32_t>(k, 1), N, K, eps, *Ptr<float>(k, 2),
                                                Ptr<float>(k, 3));
                    return Status::OK();
                  });
}

Status PlanMse(Planner& p, int i, bool grad) {  // inputs prediction, target (, dloss)
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t count = n.inputs[0].shape().num_elements();
  if (!grad)
    return PlanHand(p, i, "mse", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}}, {g.output(i)},
                    [=](Kernel& k, uint64_t) {
                      *Ptr<float>(k, 2) = MeanSquaredError(Ptr<float>(k, 0), Ptr<float>(k, 1), count);
                      return Status::OK();
                    });
  return PlanHand(p, i, "mse_grad", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}},
                  {g.output(i)}, [=](Kernel& k, uint64_t) {
                    MeanSquaredErrorBackward(Ptr<float>(k, 0), Ptr<float>(k, 1), count, *Ptr<float>(k, 2),
                                             Ptr<float>(k, 3));
                    return Status::OK();
                  });
}

void RegisterLossPlans(PlanTable& t) {
  Register(t, OpKind::kSoftmaxCrossEntropy, PlanSoftmaxCrossEntropy);
  Register(t, OpKind::kSoftmaxCrossEntropyGrad, PlanSoftmaxCrossEntropyGrad);
  Register(t, OpKind::kMeanSquaredError, [](Planner& p, int i) { return PlanMse(p, i, false); });
  Register(t, OpKind::kMeanSquaredErrorGrad, [](Planner& p, int i) { return PlanMse(p, i, true); });
}

}  // namespace strata::backend::cpu::ops
