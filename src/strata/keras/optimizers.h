// Keras optimizers: what compile() is given. The update itself runs outside the compiled
// graph, sharded over the replicas (keras/optimizer_state.h), at the scheduled learning rate.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <string>

#include "strata/core/status.h"
#include "strata/keras/schedules.h"

namespace strata::keras {

struct Optimizer {
  enum class Kind { kSGD, kAdam, kAdamW, kRMSprop };
  Kind kind = Kind::kSGD;
  Schedule learning_rate = schedules::Constant(0.01);
  double momentum = 0;         // SGD, RMSprop
  bool nesterov = false;       // SGD
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;  // Adam(W); epsilon also RMSprop
  double rho = 0.9;            // RMSprop
  // SGD/Adam/RMSprop: L2-style decay added to the gradient (g += wd * w), as SGDW-style
  // recipes use it; AdamW: decoupled (w -= lr * wd * w), as Keras's AdamW.
  double weight_decay = 0;
  // Gradient clipping by norm, before weight decay and the update (Keras's arguments; 0: off;
  // at most one of the two). clipnorm: each variable's gradient g becomes g * c / ||g|| when
  // ||g|| > c; global_clipnorm: every gradient is scaled by c / sqrt(sum of all ||g||^2)
  // when that global norm is > c (tf.clip_by_global_norm).
  double clipnorm = 0;
  double global_clipnorm = 0;
  // Keras's use_ema: an exponential moving average of the trainable weights, kept as one more
  // slot block. After every update average = m average + (1 - m) w, with m = ema_momentum
  // except on the first update (m = 0: the average starts at the weights). Every
  // ema_overwrite_frequency updates (0: never) the weights take the average; at the end of
  // fit they take it too (Keras's finalize_variable_values), so the model fit returns, saves
  // and evaluates is the average. Validation during fit sees the weights being trained.
  bool use_ema = false;
  double ema_momentum = 0.99;
  int64_t ema_overwrite_frequency = 0;
  std::string name() const;    // "SGD", "Adam", "AdamW", "RMSprop"
  // The optimizer's slot blocks, each parallel to the trainable parameters (the slots' layout
  // in memory and in a checkpoint): SGD with momentum 1 (velocity), Adam(W) 2 (m, v), RMSprop 2
  // (rms, momentum), plain SGD none; use_ema one more, last (the average).
  int slot_blocks() const;
};

inline std::string Optimizer::name() const {
  switch (kind) {
    case Kind::kSGD: return "SGD";
    case Kind::kAdam: return "Adam";
    case Kind::kAdamW: return "AdamW";
    case Kind::kRMSprop: return "RMSprop";
  }
  return "?";
}

inline int Optimizer::slot_blocks() const {
  const int ema = use_ema ? 1 : 0;
  switch (kind) {
    case Kind::kSGD: return (momentum != 0 ? 1 : 0) + ema;
    case Kind::kAdam:
    case Kind::kAdamW:
    case Kind::kRMSprop: return 2 + ema;
  }
  return ema;
}

namespace optimizers {
// An optimizer of `kind` at `lr` with the arguments every optimizer's options have: the weight
// decay and the clipping (Keras's clipnorm / global_clipnorm; 0: off).
template <typename Options> Optimizer WithCommonOptions(Optimizer::Kind kind, Schedule lr, const Options& o) {
  Optimizer opt;
  opt.kind = kind;
  opt.learning_rate = std::move(lr);
  opt.weight_decay = o.weight_decay;
  opt.clipnorm = o.clipnorm;
  opt.global_clipnorm = o.global_clipnorm;
  opt.use_ema = o.use_ema;
  opt.ema_momentum = o.ema_momentum;
  opt.ema_overwrite_frequency = o.ema_overwrite_frequency;
  return opt;
}
struct SGDOptions {
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = 0;
  double clipnorm = 0, global_clipnorm = 0;  // see Optimizer
  bool use_ema = false;                       // see Optimizer
  double ema_momentum = 0.99;
  int64_t ema_overwrite_frequency = 0;
};
inline Optimizer SGD(Schedule lr, SGDOptions o = {}) {
  Optimizer opt = WithCommonOptions(Optimizer::Kind::kSGD, std::move(lr), o);
  opt.momentum = o.momentum;
  opt.nesterov = o.nesterov;
  return opt;
}
inline Optimizer SGD(double lr = 0.01, SGDOptions o = {}) { return SGD(schedules::Constant(lr), o); }
struct AdamOptions {
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  double weight_decay = 0;
  double clipnorm = 0, global_clipnorm = 0;  // see Optimizer
  bool use_ema = false;                       // see Optimizer
  double ema_momentum = 0.99;
  int64_t ema_overwrite_frequency = 0;
};
inline Optimizer Adam(Schedule lr, AdamOptions o = {}) {
  Optimizer opt = WithCommonOptions(Optimizer::Kind::kAdam, std::move(lr), o);
  opt.beta_1 = o.beta_1;
  opt.beta_2 = o.beta_2;
  opt.epsilon = o.epsilon;
  return opt;
}
inline Optimizer Adam(double lr = 0.001, AdamOptions o = {}) { return Adam(schedules::Constant(lr), o); }
// AdamW's own options: Keras's default decay 0.004 stays when only other fields are given
// (AdamW(1e-3, {.clipnorm = 1}) still decays).
struct AdamWOptions {
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  double weight_decay = 0.004;
  double clipnorm = 0, global_clipnorm = 0;  // see Optimizer
  bool use_ema = false;                       // see Optimizer
  double ema_momentum = 0.99;
  int64_t ema_overwrite_frequency = 0;
};
inline Optimizer AdamW(Schedule lr, AdamWOptions o = {}) {
  Optimizer opt = Adam(std::move(lr), {.beta_1 = o.beta_1, .beta_2 = o.beta_2, .epsilon = o.epsilon,
                                       .weight_decay = o.weight_decay, .clipnorm = o.clipnorm,
                                       .global_clipnorm = o.global_clipnorm, .use_ema = o.use_ema,
                                       .ema_momentum = o.ema_momentum,
                                       .ema_overwrite_frequency = o.ema_overwrite_frequency});
  opt.kind = Optimizer::Kind::kAdamW;
  return opt;
}
inline Optimizer AdamW(double lr = 0.001, AdamWOptions o = {}) { return AdamW(schedules::Constant(lr), o); }
struct RMSpropOptions {
  double rho = 0.9, momentum = 0, epsilon = 1e-7;
  double weight_decay = 0;
  double clipnorm = 0, global_clipnorm = 0;  // see Optimizer
  bool use_ema = false;                       // see Optimizer
  double ema_momentum = 0.99;
  int64_t ema_overwrite_frequency = 0;
};
inline Optimizer RMSprop(Schedule lr, RMSpropOptions o = {}) {
  Optimizer opt = WithCommonOptions(Optimizer::Kind::kRMSprop, std::move(lr), o);
  opt.rho = o.rho;
  opt.momentum = o.momentum;
  opt.epsilon = o.epsilon;
  return opt;
}
inline Optimizer RMSprop(double lr = 0.001, RMSpropOptions o = {}) { return RMSprop(schedules::Constant(lr), o); }
}  // namespace optimizers

}  // namespace strata::keras

#pragma GCC visibility pop
