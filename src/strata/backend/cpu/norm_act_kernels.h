// Training batch norm fused with ReLU6 (MobileNetV2, EfficientNet-lite, ...), hard swish
// (MobileNetV3) or swish (EfficientNet V1 and V2), forward and backward, in Strata's own kernels: oneDNN 2.6 fuses only a plain
// ReLU into its batch norm (fuse_norm_relu), so BN -> ReLU6 ran as two primitives each way, and
// the activation's backward was a full extra read and write of every expanded activation.
//
// The backward does not read the activation's output: it recomputes the pre-activation
// z = (x - mean) * a + beta (a = gamma / sqrt(var + eps)) from x with the very float operations
// of the forward, so its derivative is the forward's to the bit, and one pass reads
// x and dy for the sums, a second reads them again and writes dx. Unfused: the ReLU6 backward
// read y and dy and wrote dz, then the batch-norm backward read x and dz twice and wrote dx
// (8 tensor passes against 5).
//
// Both walk the layout the batch norm's input already has (no reorder): plain [M, C] or
// oneDNN's blocked nChw16c / nChw8c, whose padded channels are written zero. Sums are f32
// within runs of at most 256 rows, then f64. Vector code for AVX-512 and AVX2 (+FMA), chosen
// at run time from HostIsa() (STRATA_MAX_ISA caps it), and a scalar fallback. Single-threaded:
// planned for programs of one thread (one replica per core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::backend::cpu {

// How an activation tensor is walked: `outer` x `blocks` runs of `inner` rows of `width`
// floats; lane j of block b is channel b * width + j (channels and beyond: padding).
//   plain [M, C]:        {1, 1, M, C, C}
//   blocked nChw{B}c:    {N, ceil(C / B), H * W, B, C}
struct ChannelLayout {
  int64_t outer = 1, blocks = 1, inner = 1, width = 1, channels = 1;
  int64_t padded_channels() const { return blocks * width; }
  int64_t count() const { return outer * inner; }  // elements per channel
};

// Per-kernel scratch: 2 f64 and 7 f32 arrays of padded_channels().
struct NormActScratch {
  explicit NormActScratch(const ChannelLayout& l)
      : d(static_cast<size_t>(2 * l.padded_channels())), f(static_cast<size_t>(7 * l.padded_channels())) {}
  std::vector<double> d;
  std::vector<float> f;
};

// The activation after the batch norm: relu6(z) = min(max(z, 0), 6); hard_swish(z) =
// z * relu6(z + 3) / 6 (oneDNN's: derivative 0 below -3, 1 above 3, (2z + 3) / 6 between);
// swish(z) = z * sigmoid(z) (EfficientNet's; the exponential is fast_exp.h's, within 2 ulp).
enum class NormActivation { kRelu6, kHardSwish, kSwish };

// y = act((x - mean) * gamma / sqrt(var + eps) + beta) with the batch's mean and (biased)
// variance, which are written to mean, var [channels]. x, y in layout l; gamma, beta [channels].
void BatchNormActForward(NormActivation act, const float* x, const float* gamma, const float* beta,
                         const ChannelLayout& l, float epsilon, NormActScratch& s, float* y, float* mean, float* var);

// The gradient of the forward above: dz = dy * act'(z), then batch norm's backward (dbeta =
// sum dz, dgamma = sum dz * x_hat, dx = gamma / sigma * (dz - mean(dz) - x_hat * mean(dz *
// x_hat))). mean, var: the forward's outputs. dx in layout l.
void BatchNormActBackward(NormActivation act, const float* x, const float* dy, const float* gamma, const float* beta,
                          const float* mean, const float* var, const ChannelLayout& l, float epsilon,
                          NormActScratch& s, float* dx, float* dgamma, float* dbeta);

// "avx512", "avx2" or "scalar": the code path the kernels above take on this host.
std::string NormActIsa();

}  // namespace strata::backend::cpu
