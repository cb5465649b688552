// The graph-level optimizer update ops (SgdUpdate, AdamUpdate, RmsPropUpdate): the update
// kernels of optimizer_kernels.h run inside the compiled program. Nothing else depends on this
// file: the update op family is to be removed (the Keras optimizer updates outside the graph).
#include <vector>

#include "strata/backend/cpu/optimizer_kernels.h"
#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

Status PlanUpdate(Planner& p, int i) {  // inputs var, grad, lr, slots...
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  std::vector<std::pair<Value, dt>> ins;
  for (const Value& v : n.inputs) ins.push_back({v, dt::f32});
  const int64_t count = n.inputs[0].shape().num_elements();
  const graph::Attrs a = n.attrs;
  const OpKind kind = n.kind;
  return PlanHand(p, i, kind == OpKind::kSgdUpdate ? "sgd" : kind == OpKind::kAdamUpdate ? "adam" : "rmsprop", ins, {},
                  [=](Kernel& k, uint64_t) {
                    float* w = Ptr<float>(k, 0);
                    const float* gr = Ptr<float>(k, 1);
                    const float lr = *Ptr<float>(k, 2);
                    if (kind == OpKind::kSgdUpdate) {
                      SgdUpdate(w, gr, a.sgd.momentum != 0 ? Ptr<float>(k, 3) : nullptr, count,
                                {lr, a.sgd.momentum, a.sgd.nesterov});
                    } else if (kind == OpKind::kAdamUpdate) {
                      float* t = Ptr<float>(k, 5);
                      *t += 1;
                      AdamUpdate(w, gr, Ptr<float>(k, 3), Ptr<float>(k, 4), count,
                                 {lr, a.adam.beta_1, a.adam.beta_2, a.adam.epsilon, a.adam.weight_decay, *t});
                    } else {
                      RmsPropUpdate(w, gr, Ptr<float>(k, 3), a.rmsprop.momentum != 0 ? Ptr<float>(k, 4) : nullptr,
                                    count, {lr, a.rmsprop.rho, a.rmsprop.momentum, a.rmsprop.epsilon});
                    }
                    return Status::OK();
                  });
}

}  // namespace strata::backend::cpu::ops
