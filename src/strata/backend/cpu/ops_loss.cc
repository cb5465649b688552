// Losses as Strata's own kernels: softmax cross-entropy (keeping the probabilities for its
// gradient) and mean squared error, each with its gradient.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

Status PlanSoftmaxCrossEntropy(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t N = n.inputs[0].shape()[0], K = n.inputs[0].shape()[1];
  const float eps = n.attrs.label_smoothing;
  const std::string label = graph::OpLabel(n.name, n.kind);
  // Computes the loss and keeps the probabilities, from which the gradient is one pass.
  return PlanHand(p, i, "softmax_xent", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::s32}}, {g.output(i, 0), g.output(i, 1)},
                  [=](Kernel& k, uint64_t) {
                    const float* logits = Ptr<float>(k, 0);  // [N, K]
                    const int32_t* labels = Ptr<int32_t>(k, 1);  // [N]
                    float* loss = Ptr<float>(k, 2);
                    float* prob = Ptr<float>(k, 3);  // [N, K]
                    double total = 0;
                    for (int64_t r = 0; r < N; ++r) {
                      const int32_t lab = labels[r];
                      if (lab < 0 || lab >= K)
                        return InvalidArgument(label + "label " + std::to_string(lab) + " of example " +
                                               std::to_string(r) + " is outside [0, " + std::to_string(K) + ")");
                      const float* z = logits + r * K;
                      float mx = -std::numeric_limits<float>::infinity();
                      for (int64_t c = 0; c < K; ++c) mx = std::max(mx, z[c]);
                      float s = 0;
                      for (int64_t c = 0; c < K; ++c) s += (prob[r * K + c] = std::exp(z[c] - mx));
                      const float lse = mx + std::log(s), inv = 1.0f / s;
                      float row = 0;
                      for (int64_t c = 0; c < K; ++c) {
                        prob[r * K + c] *= inv;
                        const float q = (c == lab ? 1 - eps : 0) + eps / static_cast<float>(K);
                        row -= q * (z[c] - lse);
                      }
                      total += row;
                    }
                    *loss = static_cast<float>(total / static_cast<double>(N));
                    return Status::OK();
                  });
}

Status PlanSoftmaxCrossEntropyGrad(Planner& p, int i) {  // inputs probabilities, labels, dloss
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t N = n.inputs[0].shape()[0], K = n.inputs[0].shape()[1];
  const float eps = n.attrs.label_smoothing;
  return PlanHand(p, i, "softmax_xent_grad", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::s32}, {n.inputs[2], dt::f32}},
                  {g.output(i)}, [=](Kernel& k, uint64_t) {
                    const float* prob = Ptr<float>(k, 0);
                    const int32_t* labels = Ptr<int32_t>(k, 1);
                    const float scale = *Ptr<float>(k, 2) / static_cast<float>(N);
                    float* dz = Ptr<float>(k, 3);
                    const float off = eps / static_cast<float>(K);
                    for (int64_t r = 0; r < N; ++r)
                      for (int64_t c = 0; c < K; ++c)
                        dz[r * K + c] = (prob[r * K + c] - off - (c == labels[r] ? 1 - eps : 0)) * scale;
                    return Status::OK();
                  });
}

Status PlanMse(Planner& p, int i, bool grad) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const int64_t count = n.inputs[0].shape().num_elements();
  if (!grad)
    return PlanHand(p, i, "mse", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}}, {g.output(i)},
                    [=](Kernel& k, uint64_t) {
                      const float* a = Ptr<float>(k, 0);
                      const float* b = Ptr<float>(k, 1);
                      double s = 0;
                      for (int64_t e = 0; e < count; ++e) s += static_cast<double>(a[e] - b[e]) * (a[e] - b[e]);
                      *Ptr<float>(k, 2) = static_cast<float>(s / static_cast<double>(count));
                      return Status::OK();
                    });
  return PlanHand(p, i, "mse_grad", {{n.inputs[0], dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}},
                  {g.output(i)}, [=](Kernel& k, uint64_t) {
                    const float* a = Ptr<float>(k, 0);
                    const float* b = Ptr<float>(k, 1);
                    const float s = 2 * *Ptr<float>(k, 2) / static_cast<float>(count);
                    float* d = Ptr<float>(k, 3);
                    for (int64_t e = 0; e < count; ++e) d[e] = (a[e] - b[e]) * s;
                    return Status::OK();
                  });
}

}  // namespace strata::backend::cpu::ops
