// Optimizer updates over contiguous f32 ranges: what CpuBackend::ApplyUpdate runs on a
// replica's slice of the flat parameter block (keras::OptimizerState shards the update).
// Each has an AVX-512 version chosen at run time (core/cpu.h) and the scalar loop it is
// tested against. Semantics are Keras's (see docs/engine.md).
#pragma once

#include <cstdint>

namespace strata::backend::cpu {

struct SgdParams { float lr, momentum; bool nesterov; };
// momentum == 0: w -= lr * g (v unused, may be null). Otherwise
// v = m v - lr g;  w += nesterov ? m v - lr g : v.
void SgdUpdate(float* w, const float* g, float* v, int64_t n, SgdParams p);

struct AdamParams { float lr, beta_1, beta_2, epsilon, weight_decay; float step; };
// step: the 1-based iteration after this update (bias correction); AdamW when weight_decay > 0.
void AdamUpdate(float* w, const float* g, float* m, float* v, int64_t n, AdamParams p);

struct RmsPropParams { float lr, rho, momentum, epsilon; };
// rms = rho rms + (1 - rho) g^2; inc = lr g / sqrt(rms + eps); momentum: mom = m mom + inc.
void RmsPropUpdate(float* w, const float* g, float* rms, float* mom, int64_t n, RmsPropParams p);

// The scalar loops (reference for tests; used where AVX-512 is absent).
namespace scalar {
void SgdUpdate(float* w, const float* g, float* v, int64_t n, SgdParams p);
void AdamUpdate(float* w, const float* g, float* m, float* v, int64_t n, AdamParams p);
void RmsPropUpdate(float* w, const float* g, float* rms, float* mom, int64_t n, RmsPropParams p);
}  // namespace scalar

}  // namespace strata::backend::cpu
