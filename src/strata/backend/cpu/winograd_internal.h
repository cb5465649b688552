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
  // Transformed weights: for each of the 36 positions a [c x k] matrix stored as column
  // panels of 16 (the last one 8 wide when k % 16 == 8), each panel [c][16] row-major:
  // u + pos * c * k + (j / 16) * 16 * c + ci * PanelWidth(j) + j % 16.
  float* u = nullptr;
  float* v = nullptr;  // [36][block][c]: transformed input of one block of tiles
  float* m = nullptr;  // [36][block][k]: products of one block
};

inline int64_t PanelWidth(int64_t k, int64_t j) { return k - (j / 16) * 16 >= 16 ? 16 : 8; }
inline int64_t UIndex(const Plan& p, int pos, int64_t ci, int64_t j) {
  return pos * p.c * p.k + (j / 16) * 16 * p.c + ci * PanelWidth(p.k, j) + j % 16;
}

void RunScalar(const Plan& p, const float* src, const float* bias, float* dst);
void TransformWeightsAvx2(const Plan& p, bool forward, const float* w);
void RunAvx2(const Plan& p, const float* src, const float* bias, float* dst);

}  // namespace strata::backend::cpu::winograd::internal
