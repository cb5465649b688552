// Strata's own Winograd F(4x4, 3x3) convolution, f32, for hosts where oneDNN has none
// (oneDNN 2.6 implements Winograd only for AVX-512; on AVX2 it would run direct).
//
// The math (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016). A 3x3
// correlation of a 6x6 input tile d with a kernel g gives a 4x4 output tile
//     Y = A^T [ (G g G^T) ⊙ (B^T d B) ] A
// with
//     B^T = [4  0 -5  0 1 0]     G = [ 1/4     0     0 ]     A^T = [1 1  1 1  1 0]
//           [0 -4 -4  1 1 0]         [-1/6  -1/6  -1/6 ]           [0 1 -1 2 -2 0]
//           [0  4 -4 -1 1 0]         [-1/6   1/6  -1/6 ]           [0 1  1 4  4 0]
//           [0 -2 -1  2 1 0]         [ 1/24  1/12  1/6 ]           [0 1 -1 8 -8 1]
//           [0  2 -1 -2 1 0]         [ 1/24 -1/12  1/6 ]
//           [0  4  0 -5 0 1]         [ 0     0     1   ]
// Tiles overlap by 2 (output tiles step by 4). Summed over input channels the element-wise
// product becomes, for each of the 36 tile positions (xi, nu), one matrix product
//     M[xi,nu] [tiles x K] = V[xi,nu] [tiles x C] . U[xi,nu] [C x K]
// where V is the transformed input, U the transformed weights: 36 multiply-adds per output
// tile per channel pair instead of direct's 16 x 9 = 144 (4x fewer; tiles that overhang the
// output, e.g. 14 = 4 x 4 - 2, waste some). Steps per Run(): weight transform (every call:
// the weights change each training step), then per block of tiles: input transform, the 36
// GEMMs (AVX2: a 6x16 register-blocked FMA micro-kernel), output transform (+ bias, ReLU).
//
// Backward-data is the same computation: dx = correlation of dy (padded by 2 - pad) with the
// kernel rotated 180 degrees and its input/output channels swapped; only the weight
// transform differs.
//
// Layout: activations are oneDNN's blocked nChw8c (`aBcd8b`: [N, C/8, H, W, 8]), what
// oneDNN's AVX2 convolutions, batch norm and pooling use, so no reorder is needed around it;
// weights are Strata's plain HWIO [3, 3, Cin, Cout] of the forward convolution.
//
// Rounding: the transforms' constants (up to 8 and 1/24) amplify f32 rounding. Against an
// f64 direct convolution the error is <= 1.7e-6 of the output's RMS (RMS of the error; its
// largest element <= 3.9e-5) on the reference CNN's layers and 3.5e-6 (8.1e-5) at 512
// channels; tests/backend/winograd_test.cc holds it to 1e-5 (2e-4).
//
// Single-threaded (a program runs one thread per replica). Scratch (transformed weights and
// one block's V and M) is the caller's: in a program it is an arena buffer live only at this
// kernel, so all Winograd kernels share the same bytes; Run() allocates nothing.
#pragma once

#include <cstdint>
#include <memory>

namespace strata::backend::cpu::winograd {

enum class Isa : uint8_t { kScalar, kAvx2 };
// kAvx2 when HostIsa().avx2 (AVX2 with FMA), else kScalar.
Isa Best();
const char* IsaName(Isa isa);  // "scalar", "avx2"

enum class Pass : uint8_t { kForward, kBackwardData };

// The forward convolution: 3x3 kernel, stride 1, dilation 1, one group.
struct Geometry {
  int64_t batch = 1, in_channels = 8, out_channels = 8;
  int64_t in_h = 1, in_w = 1;    // x
  int64_t out_h = 1, out_w = 1;  // y; padding after = out + 2 - in - padding before
  int pad_top = 0, pad_left = 0;
};
// Channels multiples of 8, padding before and after in [0, 2], sizes positive.
bool Supported(const Geometry& g);
// Whether it is worth running instead of a direct convolution: at least 64 output tiles of
// 4x4 (batch x tiles per image). The weight transform (36 x Cin x Cout floats, every Run())
// does not shrink with the batch: at 7x7x512 and batch 8 (32 tiles) it makes Winograd slower
// than oneDNN's AVX2 direct convolution (bench/winograd_bench), at 14x14x256 and batch 8
// (128 tiles) faster.
bool Profitable(const Geometry& g);

// The multiply-adds x 2 an F(4x4, 3x3) pass executes in its tile products (oneDNN's
// jit_wino_4x3 and Strata's alike): 36 per 6x6 tile, per input and output channel, the tiles
// covering out_h x out_w (y forward, dx backward-data, dy for oneDNN's weight gradient). The direct count is
// 2 x 9 x out_h x out_w x c_in x c_out: 4x more where out_h and out_w are multiples of 4. The
// transforms (mostly additions, a small share) are left out: the count is a floor of what runs,
// so a rate computed from it cannot beat a right peak.
int64_t ExecutedFlops(int64_t batch, int64_t out_h, int64_t out_w, int64_t c_in, int64_t c_out);

class Conv3x3 {
 public:
  // `relu`: max(0, .) after the bias (forward only). Requires Supported(g). `isa` kAvx2 on a
  // host without AVX2 gives the scalar path (isa() says which runs).
  Conv3x3(const Geometry& g, Pass pass, Isa isa = Best(), bool relu = false);
  ~Conv3x3();
  Conv3x3(const Conv3x3&) = delete;
  Conv3x3& operator=(const Conv3x3&) = delete;

  // Forward:       src = x  [N, Cin/8, H, W, 8],   dst = y  [N, Cout/8, Ho, Wo, 8], bias [Cout] or null.
  // BackwardData:  src = dy [N, Cout/8, Ho, Wo, 8], dst = dx [N, Cin/8, H, W, 8],    bias ignored.
  // weights: the forward kernel, HWIO [3, 3, Cin, Cout]. dst is overwritten. `scratch`:
  // scratch_bytes() bytes, any alignment, contents irrelevant.
  void Run(const float* src, const float* weights, const float* bias, float* dst, void* scratch) const;

  Isa isa() const;
  int64_t scratch_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::backend::cpu::winograd
