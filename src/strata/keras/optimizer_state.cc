#include "strata/keras/optimizer_state.h"

#include <algorithm>
#include <cmath>

namespace strata::keras {
namespace {

backend::UpdateRule Rule(const Optimizer& o, float lr, int64_t step) {
  backend::UpdateRule r;
  r.lr = lr;
  switch (o.kind) {
    case Optimizer::Kind::kSGD:
      r.kind = backend::UpdateRule::Kind::kSgd;
      r.momentum = static_cast<float>(o.momentum);
      r.nesterov = o.nesterov;
      break;
    case Optimizer::Kind::kAdam:
    case Optimizer::Kind::kAdamW:
      r.kind = backend::UpdateRule::Kind::kAdam;
      r.beta_1 = static_cast<float>(o.beta_1);
      r.beta_2 = static_cast<float>(o.beta_2);
      r.epsilon = static_cast<float>(o.epsilon);
      // Keras 3's weight_decay is decoupled on every optimizer: Adam's is AdamW's.
      r.weight_decay = static_cast<float>(o.weight_decay);
      r.step = static_cast<float>(step + 1);
      break;
    case Optimizer::Kind::kRMSprop:
      r.kind = backend::UpdateRule::Kind::kRmsProp;
      r.rho = static_cast<float>(o.rho);
      r.momentum = static_cast<float>(o.momentum);
      r.epsilon = static_cast<float>(o.epsilon);
      break;
  }
  return r;
}

}  // namespace

OptimizerState::OptimizerState(const Optimizer& optimizer, const backend::VariableStore& variables,
                               backend::Backend* backend, int replicas)
    : optimizer_(optimizer), backend_(backend), num_trainable_(variables.num_trainable()), replicas_(replicas) {
  num_slot_blocks_ = optimizer.slot_blocks();
  slots_ = Tensor(DType::kF32, {num_slot_blocks_, num_trainable_});
  if (optimizer.global_clipnorm > 0) clip_groups_.push_back({0, num_trainable_});
  if (optimizer.clipnorm > 0)
    for (const auto& e : variables.entries())
      if (e.role == graph::VariableRole::kParameter && e.trainable) clip_groups_.push_back({e.offset, e.offset + e.size});
  clip_partials_.assign(static_cast<size_t>(replicas) * clip_groups_.size(), 0.0);
}

void OptimizerState::ClipPartialSums(int replica, const float* g, int64_t begin, int64_t end) {
  const size_t groups = clip_groups_.size();
  double* out = clip_partials_.data() + static_cast<size_t>(replica) * groups;
  for (size_t v = 0; v < groups; ++v) {
    const int64_t b = std::max(begin, clip_groups_[v].first), e = std::min(end, clip_groups_[v].second);
    double sum = 0;
    for (int64_t i = b; i < e; ++i) sum += static_cast<double>(g[i]) * g[i];
    out[v] = sum;
  }
}

void OptimizerState::ApplySlice(float* w_block, float* g_block, int64_t begin, int64_t end, float lr, int64_t step) {
  if (begin >= end) return;
  const int64_t n = num_trainable_, len = end - begin;
  float* w = w_block + begin;
  float* g = g_block + begin;
  const Optimizer& o = optimizer_;
  // Clipping by norm comes first, as in Keras. A group's norm adds every replica's partial
  // sum in replica order, so all replicas agree on it; a norm within the limit leaves the
  // gradient untouched.
  if (!clip_groups_.empty()) {
    const double limit = o.clipnorm > 0 ? o.clipnorm : o.global_clipnorm;
    const size_t groups = clip_groups_.size();
    for (size_t v = 0; v < groups; ++v) {
      const int64_t b = std::max(begin, clip_groups_[v].first), e = std::min(end, clip_groups_[v].second);
      if (b >= e) continue;
      double sum = 0;
      for (int q = 0; q < replicas_; ++q) sum += clip_partials_[static_cast<size_t>(q) * groups + v];
      const double norm = std::sqrt(sum);
      if (!(norm > limit)) continue;
      const float scale = static_cast<float>(limit / norm);
      for (int64_t i = b; i < e; ++i) g_block[i] *= scale;
    }
  }
  // Weight decay. Adam and AdamW decay inside their rule and RMSprop here, both as Keras 3 does
  // on any optimizer (w -= w * wd * lr before the update: base_optimizer._apply_weight_decay).
  // SGD keeps its L2 term on the gradient (g += wd * w, as PyTorch's SGD): the default job's
  // recipe (momentum 0.9, wd 5e-4) was tuned with it.
  if (o.weight_decay > 0 && o.kind == Optimizer::Kind::kRMSprop) {
    const float decay = lr * static_cast<float>(o.weight_decay);  // as Adam's kernel forms it
    for (int64_t i = 0; i < len; ++i) w[i] = w[i] - decay * w[i];
  } else if (o.weight_decay > 0 && o.kind == Optimizer::Kind::kSGD) {
    const float wd = static_cast<float>(o.weight_decay);
    for (int64_t i = 0; i < len; ++i) g[i] += wd * w[i];
  }
  const int rule_blocks = num_slot_blocks_ - (o.use_ema ? 1 : 0);
  float* s0 = rule_blocks > 0 ? slots_.data<float>() + begin : nullptr;
  float* s1 = rule_blocks > 1 ? slots_.data<float>() + n + begin : nullptr;
  backend_->ApplyUpdate(Rule(o, lr, step), {w, g, s0, s1, len});
  if (!o.use_ema) return;
  // The moving average of the updated weights (Keras's _update_model_variables_moving_average:
  // the first update starts it at the weights), then Keras's periodic overwrite.
  float* average = slots_.data<float>() + static_cast<int64_t>(rule_blocks) * n + begin;
  const float m = step == 0 ? 0.0f : static_cast<float>(o.ema_momentum);
  for (int64_t i = 0; i < len; ++i) average[i] = m * average[i] + (1 - m) * w[i];
  if (o.ema_overwrite_frequency > 0 && (step + 1) % o.ema_overwrite_frequency == 0)
    std::copy(average, average + len, w);
}

bool OptimizerState::FinalizeWeights(float* w) const {
  if (!optimizer_.use_ema || num_trainable_ == 0) return false;
  const float* average = slots_.data<float>() + static_cast<int64_t>(num_slot_blocks_ - 1) * num_trainable_;
  std::copy(average, average + num_trainable_, w);
  return true;
}

}  // namespace strata::keras
