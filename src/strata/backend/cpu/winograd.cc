// Winograd F(4x4, 3x3): plan, weight transform, dispatch and the scalar reference (the path
// of hosts without AVX2, and the oracle of the AVX2 path in tests). See winograd.h.
#include "strata/backend/cpu/winograd.h"

#include <algorithm>
#include <cstdint>

#include "strata/backend/cpu/winograd_internal.h"
#include "strata/core/cpu.h"

namespace strata::backend::cpu::winograd {

using internal::PanelWidth;
using internal::Plan;

namespace {

// The matrices of winograd.h.
constexpr float kBT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                             {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
constexpr float kAT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

#include "strata/backend/cpu/winograd_weights.inc"

}  // namespace

Isa Best() { return HostIsa().avx2 ? Isa::kAvx2 : Isa::kScalar; }

const char* IsaName(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

bool Supported(const Geometry& g) {
  if (g.batch <= 0 || g.in_channels <= 0 || g.out_channels <= 0 || g.in_channels % 8 || g.out_channels % 8) return false;
  if (g.in_h <= 0 || g.in_w <= 0 || g.out_h <= 0 || g.out_w <= 0) return false;
  const int64_t pb = g.out_h + 2 - g.in_h - g.pad_top, pr = g.out_w + 2 - g.in_w - g.pad_left;
  return g.pad_top >= 0 && g.pad_top <= 2 && g.pad_left >= 0 && g.pad_left <= 2 && pb >= 0 && pb <= 2 && pr >= 0 &&
         pr <= 2;
}

bool Profitable(const Geometry& g) {
  constexpr int64_t kMinTiles = 64;
  return g.batch * ((g.out_h + 3) / 4) * ((g.out_w + 3) / 4) >= kMinTiles &&
         g.batch * ((g.in_h + 3) / 4) * ((g.in_w + 3) / 4) >= kMinTiles;  // backward-data's tiles
}

int64_t ExecutedFlops(int64_t batch, int64_t out_h, int64_t out_w, int64_t c_in, int64_t c_out) {
  return 2 * 36 * batch * ((out_h + 3) / 4) * ((out_w + 3) / 4) * c_in * c_out;
}

struct Conv3x3::Impl {
  Plan plan;
  Pass pass;
  Isa isa;
  int64_t u_floats = 0, v_floats = 0, m_floats = 0;
};

Conv3x3::Conv3x3(const Geometry& g, Pass pass, Isa isa, bool relu) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.pass = pass;
  s.isa = isa == Isa::kAvx2 && !HostIsa().avx2 ? Isa::kScalar : isa;
  Plan& p = s.plan;
  const bool fwd = pass == Pass::kForward;
  p.n = g.batch;
  p.c = fwd ? g.in_channels : g.out_channels;
  p.k = fwd ? g.out_channels : g.in_channels;
  p.h = fwd ? g.in_h : g.out_h;
  p.w = fwd ? g.in_w : g.out_w;
  p.ho = fwd ? g.out_h : g.in_h;
  p.wo = fwd ? g.out_w : g.in_w;
  p.pt = fwd ? g.pad_top : 2 - g.pad_top;
  p.pl = fwd ? g.pad_left : 2 - g.pad_left;
  p.relu = fwd && relu;
  p.tiles_h = (p.ho + 3) / 4;
  p.tiles_w = (p.wo + 3) / 4;
  p.tiles = p.n * p.tiles_h * p.tiles_w;
  // Tiles per block: V and M of one block (36 x block x (c + k) floats) about the size of a
  // core's L2 share, at least 12 rows for the micro-kernel, at most 120.
  // With large U (many channels) the GEMMs stream U once per block: then take the largest
  // block, so U is read a few times per Run() at most.
  constexpr int64_t kBlockBytes = 384 * 1024;
  int64_t block = kBlockBytes / (36 * 4 * (p.c + p.k));
  block = std::clamp<int64_t>(block / 6 * 6, 12, 120);
  if (36 * 4 * p.c * p.k > 2 * 1024 * 1024) block = 120;
  p.block = std::min(block, (p.tiles + 5) / 6 * 6);
  if (s.isa == Isa::kScalar) p.block = 1;
  p.v_stride = p.block * p.c + 16;
  p.m_stride = p.block * p.k + 16;
  s.u_floats = 36 * p.c * p.k;  // multiples of 16 floats (64 bytes): c, k multiples of 8
  s.v_floats = 36 * p.v_stride;
  s.m_floats = 36 * p.m_stride;
}

Conv3x3::~Conv3x3() = default;

Isa Conv3x3::isa() const { return impl_->isa; }
int64_t Conv3x3::scratch_bytes() const {
  return 64 + 4 * (impl_->u_floats + impl_->v_floats + impl_->m_floats);  // 64: alignment slack
}

void Conv3x3::Run(const float* src, const float* weights, const float* bias, float* dst, void* scratch) const {
  Plan p = impl_->plan;
  const uintptr_t base = (reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64;
  p.u = reinterpret_cast<float*>(base);
  p.v = p.u + impl_->u_floats;
  p.m = p.v + impl_->v_floats;
  const bool forward = impl_->pass == Pass::kForward;
  if (!forward) bias = nullptr;
  if (impl_->isa == Isa::kAvx2) {
    internal::TransformWeightsAvx2(p, forward, weights);
    internal::RunAvx2(p, src, bias, dst);
  } else {
    TransformWeightsBody(p, forward, weights);
    internal::RunScalar(p, src, bias, dst);
  }
}

namespace internal {

// One tile at a time, matrices applied as written in winograd.h.
void RunScalar(const Plan& p, const float* src, const float* bias, float* dst) {
  const int64_t C = p.c, K = p.k, CB = C / 8, KB = K / 8;
  float* v = p.v;  // [36][c]
  float* m = p.m;  // [36][k]
  for (int64_t t = 0; t < p.tiles; ++t) {
    const int64_t n = t / (p.tiles_h * p.tiles_w), ty = t / p.tiles_w % p.tiles_h, tx = t % p.tiles_w;
    const int64_t y0 = ty * 4 - p.pt, x0 = tx * 4 - p.pl;
    for (int64_t ci = 0; ci < C; ++ci) {
      const float* img = src + ((n * CB + ci / 8) * p.h) * p.w * 8 + ci % 8;
      float d[6][6];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          const int64_t y = y0 + i, x = x0 + j;
          d[i][j] = y >= 0 && y < p.h && x >= 0 && x < p.w ? img[(y * p.w + x) * 8] : 0.0f;
        }
      float bd[6][6];  // B^T d
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          float s = 0;
          for (int r = 0; r < 6; ++r) s += kBT[i][r] * d[r][j];
          bd[i][j] = s;
        }
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          float s = 0;
          for (int r = 0; r < 6; ++r) s += bd[i][r] * kBT[j][r];
          v[(i * 6 + j) * C + ci] = s;
        }
    }
    for (int pos = 0; pos < 36; ++pos)
      for (int64_t j0 = 0; j0 < K; j0 += 16) {  // one panel of U: rows of `width`, 36 * width apart
        const int64_t width = PanelWidth(K, j0);
        const float* u = p.u + UIndex(p, pos, 0, j0);
        float* mj = m + pos * K + j0;
        for (int64_t j = 0; j < width; ++j) mj[j] = 0;
        for (int64_t ci = 0; ci < C; ++ci)
          for (int64_t j = 0; j < width; ++j) mj[j] += v[pos * C + ci] * u[ci * 36 * width + j];
      }
    for (int64_t j = 0; j < K; ++j) {
      float am[4][6];  // A^T M
      for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 6; ++c) {
          float s = 0;
          for (int r = 0; r < 6; ++r) s += kAT[i][r] * m[(r * 6 + c) * K + j];
          am[i][c] = s;
        }
      float* out = dst + ((n * KB + j / 8) * p.ho) * p.wo * 8 + j % 8;
      for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 4; ++c) {
          const int64_t y = ty * 4 + i, x = tx * 4 + c;
          if (y >= p.ho || x >= p.wo) continue;
          float s = bias != nullptr ? bias[j] : 0.0f;
          for (int r = 0; r < 6; ++r) s += am[i][r] * kAT[c][r];
          if (p.relu) s = std::max(s, 0.0f);
          out[(y * p.wo + x) * 8] = s;
        }
    }
  }
}

}  // namespace internal
}  // namespace strata::backend::cpu::winograd
