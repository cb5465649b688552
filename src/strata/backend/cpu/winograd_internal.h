// Internals of winograd.h shared by the scalar reference (winograd.cc) and the AVX2 path
// (winograd_avx2.cc). Everything is in terms of the pass being computed: `c` channels in,
// `k` channels out, src [n, c/8, h, w, 8] -> dst [n, k/8, ho, wo, 8].
#pragma once

#include <cstdint>

namespace strata::backend::cpu::winograd::internal {

struct Plan {
  int64_t n = 0, c = 0, k = 0;
  int64_t h = 0, w = 0, ho = 0, wo = 0;
  int pt = 0, pl = 0;                          // padding before (top, left) of this pass
  int64_t tiles_h = 0, tiles_w = 0, tiles = 0;  // tiles = n * tiles_h * tiles_w
  int64_t block = 0;                           // tiles per block (a multiple of 6)
  bool relu = false;
  // Transformed weights U: for each of the 36 positions a [c x k] matrix. Stored as column
  // panels of 16 (the last one 8 wide when k % 16 == 8); within a panel, for each input
  // channel ci, the rows of all 36 positions one after another (UIndex): the transform writes
  // sequentially and no two positions are a large power of two apart (cache sets).
  float* u = nullptr;
  float* v = nullptr;  // V: [36][v_stride], position pos's [block][c] at v + pos * v_stride
  float* m = nullptr;  // M: [36][m_stride], position pos's [block][k] at m + pos * m_stride
  // block * c (k) plus 16 floats: consecutive positions' rows never sit a multiple of 4 KiB
  // apart, where they would all fall in the same L1 set.
  int64_t v_stride = 0, m_stride = 0;
};

inline int64_t PanelWidth(int64_t k, int64_t j) { return k - (j / 16) * 16 >= 16 ? 16 : 8; }
// U[pos][ci][j]; the rows of one position in a panel are 36 * PanelWidth apart.
inline int64_t UIndex(const Plan& p, int pos, int64_t ci, int64_t j) {
  const int64_t width = PanelWidth(p.k, j);
  return (j / 16) * 16 * 36 * p.c + (ci * 36 + pos) * width + j % 16;
}

void RunScalar(const Plan& p, const float* src, const float* bias, float* dst);
void TransformWeightsAvx2(const Plan& p, bool forward, const float* w);
void RunAvx2(const Plan& p, const float* src, const float* bias, float* dst);

}  // namespace strata::backend::cpu::winograd::internal
