// Batch norm forward, inference and backward as oneDNN primitives (the moving statistics
// after the forward primitive), and synchronized batch norm as Strata's own kernels.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

// Synchronized batch norm: statistics of the global batch. Strata's own kernels over the plain
// [M, C] layout (oneDNN's batch norm computes statistics of its own input only): per-channel
// sums in f64, then the program's cross-replica sum adds every replica's (replica order:
// deterministic), then normalization with the global mean and (biased) variance. Without a
// cross-replica sum this is the ordinary batch norm of the local batch.

// Forward: inputs x [M, C], gamma, beta, moving mean, moving variance [C];
// outputs y [M, C], batch mean [C], batch variance [C] (of the global batch).
Status PlanSyncBatchNorm(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
  const float eps = n.attrs.bn.epsilon, mom = n.attrs.bn.momentum;
  auto acc = std::make_shared<std::vector<double>>(static_cast<size_t>(2 * C + 1));  // sum x, sum x^2, count
  auto sum = p.cross_replica_sum;
  Status st = PlanHand(
      p, i, "bn_fwd_sync",
      {{x, dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}, {n.inputs[3], dt::f32}, {n.inputs[4], dt::f32}},
      {g.output(i, 0), g.output(i, 1), g.output(i, 2)}, [=](Kernel& k, uint64_t) -> Status {
        const float* xp = Ptr<float>(k, 0);  // [M, C]
        const float* gamma = Ptr<float>(k, 1);
        const float* beta = Ptr<float>(k, 2);
        float* mm = Ptr<float>(k, 3);  // moving statistics, updated in place
        float* mv = Ptr<float>(k, 4);
        float* y = Ptr<float>(k, 5);  // [M, C]
        float* mean = Ptr<float>(k, 6);
        float* var = Ptr<float>(k, 7);
        double* s1 = acc->data();
        double* s2 = s1 + C;
        std::fill(acc->begin(), acc->end(), 0.0);
        for (int64_t m = 0; m < M; ++m) {
          const float* row = xp + m * C;
          for (int64_t c = 0; c < C; ++c) {
            const double v = row[c];
            s1[c] += v;
            s2[c] += v * v;
          }
        }
        s1[2 * C] = static_cast<double>(M);
        if (*sum) STRATA_RETURN_IF_ERROR((*sum)(s1, 2 * C + 1));
        const double total = s1[2 * C];
        const float unbias = total > 1 ? static_cast<float>(total / (total - 1)) : 1.0f;
        for (int64_t c = 0; c < C; ++c) {
          const double mu = s1[c] / total;
          mean[c] = static_cast<float>(mu);
          var[c] = static_cast<float>(std::max(s2[c] / total - mu * mu, 0.0));
          // Kernel-local per-channel affine form: y = x * a + b.
          const double a = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
          s1[c] = a;
          s2[c] = beta[c] - mu * a;
          mm[c] = mm[c] * mom + mean[c] * (1 - mom);
          mv[c] = mv[c] * mom + var[c] * unbias * (1 - mom);
        }
        for (int64_t m = 0; m < M; ++m) {
          const float* row = xp + m * C;
          float* out = y + m * C;
          for (int64_t c = 0; c < C; ++c) out[c] = static_cast<float>(row[c] * s1[c] + s2[c]);
        }
        return Status::OK();
      });
  return st;
}

// Backward: inputs x [M, C], gamma, batch mean, batch variance [C], dy [M, C]; outputs
// dx [M, C], dgamma, dbeta [C]. dgamma and dbeta are this replica's sums (the model averages
// gradients over replicas, like every other parameter's); dx uses the global sums:
//   dx = gamma / sigma * (dy - sum(dy) / N - x_hat * sum(dy * x_hat) / N)   (sums over all N).
Status PlanSyncBatchNormGrad(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
  const float eps = n.attrs.bn.epsilon;
  auto acc = std::make_shared<std::vector<double>>(static_cast<size_t>(3 * C + 1));  // sum dy, sum dy*x_hat, count, 1/sigma
  auto sum = p.cross_replica_sum;
  return PlanHand(
      p, i, "bn_bwd_sync",
      {{x, dt::f32}, {n.inputs[1], dt::f32}, {n.inputs[2], dt::f32}, {n.inputs[3], dt::f32}, {n.inputs[4], dt::f32}},
      {g.output(i, 0), g.output(i, 1), g.output(i, 2)}, [=](Kernel& k, uint64_t) -> Status {
        const float* xp = Ptr<float>(k, 0);  // [M, C]
        const float* gamma = Ptr<float>(k, 1);
        const float* mean = Ptr<float>(k, 2);
        const float* var = Ptr<float>(k, 3);
        const float* dy = Ptr<float>(k, 4);  // [M, C]
        float* dx = Ptr<float>(k, 5);        // [M, C]
        float* dgamma = Ptr<float>(k, 6);
        float* dbeta = Ptr<float>(k, 7);
        double* s1 = acc->data();
        double* s2 = s1 + C;
        double* istd = s1 + 2 * C + 1;
        std::fill(s1, s1 + 2 * C + 1, 0.0);
        for (int64_t c = 0; c < C; ++c) istd[c] = 1 / std::sqrt(static_cast<double>(var[c]) + eps);
        for (int64_t m = 0; m < M; ++m) {
          const float* xr = xp + m * C;
          const float* dr = dy + m * C;
          for (int64_t c = 0; c < C; ++c) {
            s1[c] += dr[c];
            s2[c] += dr[c] * ((xr[c] - static_cast<double>(mean[c])) * istd[c]);
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          dbeta[c] = static_cast<float>(s1[c]);
          dgamma[c] = static_cast<float>(s2[c]);
        }
        s1[2 * C] = static_cast<double>(M);
        if (*sum) STRATA_RETURN_IF_ERROR((*sum)(s1, 2 * C + 1));
        const double total = s1[2 * C];
        for (int64_t c = 0; c < C; ++c) {
          s1[c] /= total;  // mean dy
          s2[c] /= total;  // mean dy * x_hat
        }
        for (int64_t m = 0; m < M; ++m) {
          const float* xr = xp + m * C;
          const float* dr = dy + m * C;
          float* out = dx + m * C;
          for (int64_t c = 0; c < C; ++c) {
            const double xhat = (xr[c] - static_cast<double>(mean[c])) * istd[c];
            out[c] = static_cast<float>(gamma[c] * istd[c] * (dr[c] - s1[c] - xhat * s2[c]));
          }
        }
        return Status::OK();
      });
}

}  // namespace

Status PlanBatchNorm(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const bool training = n.kind == OpKind::kBatchNorm;
  if (training && n.attrs.bn.synchronized) return PlanSyncBatchNorm(p, i);
  const Value x = n.inputs[0];
  const int act_node = p.fusion.activation[i];
  const Value out = act_node >= 0 ? g.output(act_node) : g.output(i);
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (act_node >= 0) flags |= dnnl::normalization_flags::fuse_norm_relu;
  if (!training) flags |= dnnl::normalization_flags::use_global_stats;
  auto d = dnnl::batch_normalization_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference,
                                                   DataDesc(p, x), n.attrs.bn.epsilon, flags);
  dnnl::batch_normalization_forward::primitive_desc pd(d, p.Attr(), p.engine());
  p.bn_pd[i] = std::make_shared<dnnl::batch_normalization_forward::primitive_desc>(pd);
  Kernel k;
  k.info = Info(p, i, training ? "bn_fwd" : "bn_inference", pd.impl_info_str());
  if (act_node >= 0) {
    k.info.name = n.name + " (" + graph::OpKindName(n.kind) + "+Relu)";
    k.info.other_flops += g.OtherFlops(act_node);
  }
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int bb, p.Use(n.inputs[2], cdesc));
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_SHIFT, bb, cdesc}};
  if (training) {
    STRATA_ASSIGN_OR_RETURN(int mmb, p.Use(n.inputs[3], cdesc));
    STRATA_ASSIGN_OR_RETURN(int mvb, p.Use(n.inputs[4], cdesc));
    const int meanb = p.Define(g.output(i, 1), cdesc), varb = p.Define(g.output(i, 2), cdesc);
    args.push_back({DNNL_ARG_MEAN, meanb, cdesc});
    args.push_back({DNNL_ARG_VARIANCE, varb, cdesc});
    if (act_node >= 0) {
      const int ws = p.NewScratchBuffer(pd.workspace_desc());
      p.workspace[i] = {ws, pd.workspace_desc()};
      args.push_back({DNNL_ARG_WORKSPACE, ws, pd.workspace_desc()});
    }
    // Moving statistics, after the primitive: Keras's momentum, unbiased variance.
    const int64_t C = x.shape()[-1], M = x.shape().num_elements() / C;
    const float mom = n.attrs.bn.momentum;
    const float unbias = M > 1 ? static_cast<float>(M) / static_cast<float>(M - 1) : 1.0f;
    k.bufs = {meanb, varb, mmb, mvb};
    k.fn = [C, mom, unbias](Kernel& kk, uint64_t) {
      const float* mean = reinterpret_cast<const float*>(kk.ptrs[0]);
      const float* var = reinterpret_cast<const float*>(kk.ptrs[1]);
      float* mm = reinterpret_cast<float*>(kk.ptrs[2]);
      float* mv = reinterpret_cast<float*>(kk.ptrs[3]);
      for (int64_t c = 0; c < C; ++c) {
        mm[c] = mm[c] * mom + mean[c] * (1 - mom);
        mv[c] = mv[c] * mom + var[c] * unbias * (1 - mom);
      }
      return Status::OK();
    };
  } else {
    STRATA_ASSIGN_OR_RETURN(int mmb, p.Use(n.inputs[3], cdesc));
    STRATA_ASSIGN_OR_RETURN(int mvb, p.Use(n.inputs[4], cdesc));
    args.push_back({DNNL_ARG_MEAN, mmb, cdesc});
    args.push_back({DNNL_ARG_VARIANCE, mvb, cdesc});
  }
  args.push_back({DNNL_ARG_DST, p.Define(out, pd.dst_desc()), pd.dst_desc()});
  return AppendPrimitive<dnnl::batch_normalization_forward>(p, std::move(k), pd, std::move(args));
}

Status PlanBatchNormGrad(Planner& p, int i) {  // inputs x, gamma, mean, var, dy
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  if (n.attrs.bn.synchronized) return PlanSyncBatchNormGrad(p, i);
  const int fwd = n.attrs.forward_node;
  const int act_grad = p.fusion.act_grad[i];
  const Value x = n.inputs[0];
  const Value dy = act_grad >= 0 ? g.node(act_grad).inputs[1] : n.inputs[4];
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (act_grad >= 0) flags |= dnnl::normalization_flags::fuse_norm_relu;
  std::shared_ptr<dnnl::batch_normalization_forward::primitive_desc> hint;
  auto it = p.bn_pd.find(fwd);
  const bool fwd_fused = fwd >= 0 && p.fusion.activation[fwd] >= 0;
  if (it != p.bn_pd.end() && fwd_fused == (act_grad >= 0)) {
    hint = it->second;
  } else {
    md data = it != p.bn_pd.end() ? it->second->src_desc() : p.PrimaryDesc(x);
    auto d = dnnl::batch_normalization_forward::desc(prop_kind::forward_training, data, n.attrs.bn.epsilon, flags);
    hint = std::make_shared<dnnl::batch_normalization_forward::primitive_desc>(d, p.Attr(), p.engine());
  }
  const md data = hint->src_desc();
  auto d = dnnl::batch_normalization_backward::desc(prop_kind::backward, data, data, n.attrs.bn.epsilon, flags);
  dnnl::batch_normalization_backward::primitive_desc pd(d, p.Attr(), p.engine(), *hint);
  KernelInfo info = Info(p, i, "bn_bwd", pd.impl_info_str());
  if (act_grad >= 0) info.name = n.name + " (ReluGrad+BatchNormGrad)";
  const md cdesc = PlainDesc(Shape{x.shape()[-1]}, dt::f32);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, pd.src_desc()));
  STRATA_ASSIGN_OR_RETURN(int gb, p.Use(n.inputs[1], cdesc));
  STRATA_ASSIGN_OR_RETURN(int mb, p.Use(n.inputs[2], cdesc));
  STRATA_ASSIGN_OR_RETURN(int vb, p.Use(n.inputs[3], cdesc));
  STRATA_ASSIGN_OR_RETURN(int db, p.Use(dy, pd.diff_dst_desc()));
  // oneDNN 2.6 validates a shift argument under use_shift even backward, where it is never
  // read: it gets a scratch buffer.
  const int unused_shift = p.NewScratchBuffer(cdesc);
  DnnlArgs args = {{DNNL_ARG_SRC, xb, pd.src_desc()}, {DNNL_ARG_SCALE, gb, cdesc}, {DNNL_ARG_MEAN, mb, cdesc},
                   {DNNL_ARG_VARIANCE, vb, cdesc}, {DNNL_ARG_DIFF_DST, db, pd.diff_dst_desc()},
                   {DNNL_ARG_SHIFT, unused_shift, cdesc}};
  if (act_grad >= 0) {
    auto ws = p.workspace.find(fwd);
    if (ws == p.workspace.end()) return Internal("fused batch norm + relu backward without a forward workspace");
    args.push_back({DNNL_ARG_WORKSPACE, ws->second.first, ws->second.second});
  }
  const int dxb = p.Define(g.output(i, 0), pd.diff_src_desc());
  const int dgb = p.Define(g.output(i, 1), cdesc);
  const int dbb = p.Define(g.output(i, 2), cdesc);
  args.push_back({DNNL_ARG_DIFF_SRC, dxb, pd.diff_src_desc()});
  args.push_back({DNNL_ARG_DIFF_SCALE, dgb, cdesc});
  args.push_back({DNNL_ARG_DIFF_SHIFT, dbb, cdesc});
  return AppendPrimitive<dnnl::batch_normalization_backward>(p, std::move(info), pd, std::move(args));
}

}  // namespace strata::backend::cpu::ops
