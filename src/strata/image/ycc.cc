#include "strata/image/ycc.h"

#include <algorithm>
#include <cstdlib>

#include "strata/core/cpu.h"

namespace strata::image::ycc {
namespace {

// The scalar reference: jdsample.c's h2v2 fancy filter with the edge columns clamped.
void FancyH2V2RowScalar(const uint8_t* near, const uint8_t* far, int cw, uint8_t* out) {
  auto colsum = [&](int j) {
    j = std::clamp(j, 0, cw - 1);
    return 3 * near[j] + far[j];
  };
  for (int j = 0; j < cw; ++j) {
    const int s = colsum(j);
    out[2 * j] = static_cast<uint8_t>((3 * s + colsum(j - 1) + 8) >> 4);
    out[2 * j + 1] = static_cast<uint8_t>((3 * s + colsum(j + 1) + 7) >> 4);
  }
}

// jdsample.c's h2v1 fancy filter, edges clamped.
void FancyH2V1RowScalar(const uint8_t* in, int cw, uint8_t* out) {
  auto at = [&](int j) { return static_cast<int>(in[std::clamp(j, 0, cw - 1)]); };
  for (int j = 0; j < cw; ++j) {
    const int s = 3 * at(j);
    out[2 * j] = static_cast<uint8_t>((s + at(j - 1) + 1) >> 2);
    out[2 * j + 1] = static_cast<uint8_t>((s + at(j + 1) + 2) >> 2);
  }
}

inline uint8_t Clamp255(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// jdcolor.c's ycc_rgb_convert, its tables written out as the integer expressions they hold.
void YccToRgbRowScalar(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb) {
  for (int i = 0; i < n; ++i) {
    const int xb = cb[i] - 128, xr = cr[i] - 128;
    rgb[3 * i + 0] = Clamp255(y[i] + ((91881 * xr + 32768) >> 16));
    rgb[3 * i + 1] = Clamp255(y[i] + ((-22554 * xb - 46802 * xr + 32768) >> 16));
    rgb[3 * i + 2] = Clamp255(y[i] + ((116130 * xb + 32768) >> 16));
  }
}

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

}  // namespace

const YccKernels kScalarYcc = {kernels::Isa::kScalar, FancyH2V2RowScalar, FancyH2V1RowScalar, YccToRgbRowScalar};

const YccKernels* KernelsFor(kernels::Isa isa) {
  const CpuIsa& host = HostIsa();
  switch (isa) {
    case kernels::Isa::kAvx512: return host.avx512f && host.avx512bw && host.avx2 ? &kAvx512Ycc : nullptr;
    case kernels::Isa::kAvx2: return host.avx2 ? &kAvx2Ycc : nullptr;
    default: return &kScalarYcc;
  }
}

const YccKernels& ScalarKernels() { return kScalarYcc; }

const YccKernels& Kernels() {
  // Same choice as the transform kernels (kernels.cc), including the STRATA_IMAGE_ISA cap.
  static const YccKernels* chosen = [] {
    const kernels::Isa want = kernels::Kernels().isa;
    for (kernels::Isa isa : {kernels::Isa::kAvx512, kernels::Isa::kAvx2, kernels::Isa::kScalar}) {
      if (static_cast<int>(isa) > static_cast<int>(want)) continue;
      if (const YccKernels* t = ycc::KernelsFor(isa)) return t;
    }
    return &kScalarYcc;
  }();
  return *chosen;
}

size_t YccScratchBytes(int width) { return 2 * RoundUp(2 * static_cast<size_t>((width + 1) / 2) + 2 * kRowPad, 64); }

void Ycc420ToRgb(const YccPlanes& p, int height, int width, uint8_t* rgb, ptrdiff_t rgb_stride, const YccKernels& k,
                 uint8_t* scratch) {
  const int ch = (height + 1) / 2, cw = (width + 1) / 2;
  const size_t row = YccScratchBytes(width) / 2;
  uint8_t* ub = scratch;
  uint8_t* ur = scratch + row;
  for (int r = 0; r < height; ++r) {
    // The main controller's context rows: above the top and below the bottom repeat the
    // edge chroma row (jdmainct.c); even output rows blend with the row above.
    const int cy = r >> 1;
    const int far_row = (r & 1) ? std::min(cy + 1, ch - 1) : std::max(cy - 1, 0);
    k.fancy_h2v2_row(p.cb + cy * p.c_stride, p.cb + far_row * p.c_stride, cw, ub);
    k.fancy_h2v2_row(p.cr + cy * p.c_stride, p.cr + far_row * p.c_stride, cw, ur);
    k.ycc_to_rgb_row(p.y + r * p.y_stride, ub, ur, width, rgb + r * rgb_stride);
  }
}

void Ycc422ToRgb(const YccPlanes& p, int height, int width, uint8_t* rgb, ptrdiff_t rgb_stride, const YccKernels& k,
                 uint8_t* scratch) {
  const int cw = (width + 1) / 2;
  const size_t row = YccScratchBytes(width) / 2;
  uint8_t* ub = scratch;
  uint8_t* ur = scratch + row;
  for (int r = 0; r < height; ++r) {
    k.fancy_h2v1_row(p.cb + r * p.c_stride, cw, ub);
    k.fancy_h2v1_row(p.cr + r * p.c_stride, cw, ur);
    k.ycc_to_rgb_row(p.y + r * p.y_stride, ub, ur, width, rgb + r * rgb_stride);
  }
}

YccPlaneBuffers::~YccPlaneBuffers() { Release(); }

void YccPlaneBuffers::Release() {
  for (Block& b : blocks_) {
    std::free(b.p);
    b = Block{};
  }
  for (uint8_t*& p : base_) p = nullptr;
}

bool YccPlaneBuffers::Grow(Block* b, size_t size) {
  if (b->size >= size) return true;
  std::free(b->p);
  b->p = static_cast<uint8_t*>(std::aligned_alloc(64, size));
  b->size = b->p ? size : 0;
  return b->p != nullptr;
}

bool YccPlaneBuffers::Reset(int height, int width, bool chroma_half_height) {
  // tjDecompressToYUVPlanes writes 4:2:0 luma as even x even, chroma as ceil(h/2) x
  // ceil(w/2); 4:2:2 luma as h x even, chroma as h x ceil(w/2).
  const size_t yh = chroma_half_height ? RoundUp(height, 2) : height, yw = RoundUp(width, 2);
  ch_ = chroma_half_height ? (height + 1) / 2 : height;
  cw_ = (width + 1) / 2;
  y_stride_ = static_cast<ptrdiff_t>(RoundUp(yw + kRowPad, 64));
  // A chroma row keeps one byte before it (index -1) and kRowPad after it; the byte
  // before row r lies in row r - 1's padding, past its own index cw.
  c_stride_ = static_cast<ptrdiff_t>(RoundUp(cw_ + 1 + kRowPad + 1, 64));
  if (!Grow(&blocks_[0], yh * y_stride_ + kRowPad)) return false;
  if (!Grow(&blocks_[3], YccScratchBytes(width))) return false;
  for (int i = 1; i < 3; ++i) {
    if (!Grow(&blocks_[i], (ch_ + 1) * c_stride_ + 64)) return false;
  }
  base_[0] = blocks_[0].p;
  base_[1] = blocks_[1].p + 64;
  base_[2] = blocks_[2].p + 64;
  return true;
}

void YccPlaneBuffers::ReplicateChromaEdges() {
  for (int i = 1; i < 3; ++i) {
    for (int r = 0; r < ch_; ++r) {
      uint8_t* row = base_[i] + r * c_stride_;
      row[-1] = row[0];
      row[cw_] = row[cw_ - 1];
    }
  }
}

}  // namespace strata::image::ycc
