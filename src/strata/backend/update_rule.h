// The optimizer update rules a backend runs on n contiguous parameters: what the sharded
// weight update (keras/optimizer_state.h) asks of Backend::ApplyUpdate for each replica's
// slice of the flat parameter block. Semantics are Keras's (docs/engine.md).
#pragma once

#include <cstdint>

namespace strata::backend {

struct UpdateRule {
  enum class Kind { kSgd, kAdam, kRmsProp };
  Kind kind = Kind::kSgd;
  float lr = 0;
  // SGD: momentum == 0: w -= lr g. Otherwise v = m v - lr g; w += nesterov ? m v - lr g : v.
  // RMSprop: rms = rho rms + (1 - rho) g^2; inc = lr g / sqrt(rms + eps); with momentum
  // mom = m mom + inc, w -= mom; else w -= inc.
  float momentum = 0;
  bool nesterov = false;
  float rho = 0.9f;
  // Adam: bias-corrected with `step`, the 1-based iteration after this update; AdamW (decoupled
  // w -= lr wd w) when weight_decay > 0. epsilon also RMSprop's.
  float beta_1 = 0.9f, beta_2 = 0.999f, epsilon = 1e-7f, weight_decay = 0;
  float step = 1;
};

// The slots a rule keeps, each parallel to w: SGD with momentum v; Adam m, v; RMSprop rms,
// mom (mom only with momentum). Unused ones may be null.
struct UpdateBuffers {
  float* w;
  const float* g;
  float* s0;
  float* s1;
  int64_t n;
};

}  // namespace strata::backend
