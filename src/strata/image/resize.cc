#include "strata/image/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "strata/image/kernels.h"

namespace strata::image {

const char* ResizeMethodName(ResizeMethod m) { return m == ResizeMethod::kArea ? "area" : "bilinear"; }

namespace {

// The taps of one axis: output position o reads input positions first[o] + k for
// k < taps with weights weight[k * out + o] (zero weights pad short rows of taps).
struct AxisTaps {
  int taps = 0;
  std::vector<int32_t> first;  // [out]
  std::vector<float> weight;   // [taps, out]
};

void BilinearTaps(int in, int out, bool flip, AxisTaps* t) {
  t->taps = 2;
  t->first.assign(out, 0);
  t->weight.assign(2 * static_cast<size_t>(out), 0.0f);
  const double scale = static_cast<double>(in) / out;
  for (int o = 0; o < out; ++o) {
    const double src = (o + 0.5) * scale - 0.5;
    const double fl = std::floor(src);
    int lo = static_cast<int>(std::max(fl, 0.0));
    int hi = static_cast<int>(std::min(std::ceil(src), in - 1.0));
    float lerp = static_cast<float>(src - fl);
    if (hi == lo) lerp = 0;  // both taps on one pixel (edges)
    // Keep the second tap inside the row: at the right edge read (in-2, in-1).
    if (lo == in - 1 && in > 1) {
      lo = in - 2;
      lerp = 1;
    }
    const int dst = flip ? out - 1 - o : o;
    t->first[dst] = lo;
    t->weight[dst] = 1 - lerp;
    t->weight[out + dst] = lerp;
  }
}

void AreaTaps(int in, int out, bool flip, AxisTaps* t) {
  const double scale = static_cast<double>(in) / out;
  t->taps = static_cast<int>(std::ceil(scale)) + 1;
  t->first.assign(out, 0);
  t->weight.assign(static_cast<size_t>(t->taps) * out, 0.0f);
  for (int o = 0; o < out; ++o) {
    const double start = o * scale, end = (o + 1) * scale;
    int first = static_cast<int>(std::floor(start));
    first = std::min(first, std::max(0, in - t->taps));
    const int dst = flip ? out - 1 - o : o;
    t->first[dst] = first;
    for (int k = 0; k < t->taps; ++k) {
      const int i = first + k;
      if (i >= in) break;
      const double overlap = std::min<double>(i + 1, end) - std::max<double>(i, start);
      if (overlap > 0) t->weight[static_cast<size_t>(k) * out + dst] = static_cast<float>(overlap / scale);
    }
  }
}

void MakeTaps(ResizeMethod m, int in, int out, bool flip, AxisTaps* t) {
  if (m == ResizeMethod::kArea) AreaTaps(in, out, flip, t);
  else BilinearTaps(in, out, flip, t);
}

// Per-thread scratch, grown on demand and reused: steady state allocates nothing.
struct ResizeScratch {
  AxisTaps x, y;
  std::vector<int32_t> first_elem;  // [out_w * C]
  std::vector<float> weight_elem;   // [taps, out_w * C]
  std::vector<float> row;           // [W * C + padding]
  std::vector<float> out_row;       // u8 output staging
  std::vector<const uint8_t*> rows; // the input rows of one output row
  std::vector<float> wy;            // and their weights
};

Status Check(const ImageView& src, int out_h, int out_w) {
  if (src.empty() || !src.data) return InvalidArgument("resize: empty source image " + src.ShapeString());
  if (src.channels < 1 || src.channels > kMaxChannels)
    return InvalidArgument("resize: channels must be 1..4, image is " + src.ShapeString());
  if (out_h <= 0 || out_w <= 0 || static_cast<int64_t>(out_w) * src.channels > (1 << 28) ||
      static_cast<int64_t>(src.width) * src.channels > (1 << 28)) {
    return InvalidArgument("resize: bad output size " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                           " for " + src.ShapeString());
  }
  return Status::OK();
}

// Runs the two passes; `emit(y, row)` receives each finished output row [out_w * C].
template <typename Emit>
void RunResize(const ImageView& src, int out_h, int out_w, const ResizeOptions& o, float* row_out, Emit emit) {
  thread_local ResizeScratch s;
  const kernels::KernelTable& kt = kernels::Kernels();
  const int c = src.channels;
  MakeTaps(o.method, src.width, out_w, o.flip_left_right, &s.x);
  MakeTaps(o.method, src.height, out_h, o.flip_up_down, &s.y);
  const int64_t n_out = static_cast<int64_t>(out_w) * c;
  s.first_elem.resize(n_out);
  s.weight_elem.resize(static_cast<size_t>(s.x.taps) * n_out);
  for (int x = 0; x < out_w; ++x)
    for (int k = 0; k < c; ++k) {
      s.first_elem[x * c + k] = s.x.first[x] * c + k;
      for (int t = 0; t < s.x.taps; ++t) s.weight_elem[t * n_out + x * c + k] = s.x.weight[t * out_w + x];
    }
  const int64_t n_in = static_cast<int64_t>(src.width) * c;
  // Zero padding past the row lets edge taps with weight 0 read something finite.
  s.row.assign(n_in + static_cast<int64_t>(s.x.taps + 1) * c, 0.0f);
  s.rows.resize(s.y.taps);
  s.wy.resize(s.y.taps);
  const uint8_t** rows = s.rows.data();
  float* wy = s.wy.data();
  const int ty = s.y.taps;
  for (int y = 0; y < out_h; ++y) {
    int used = 0;
    for (int t = 0; t < ty; ++t) {
      const int sy = std::min(s.y.first[y] + t, src.height - 1);
      const float w = s.y.weight[static_cast<size_t>(t) * out_h + y];
      if (w == 0) continue;
      rows[used] = src.row(sy);
      wy[used++] = w;
    }
    if (used == 0) {  // cannot happen for valid tables; keep the row defined anyway
      rows[0] = src.row(std::min(s.y.first[y], src.height - 1));
      wy[0] = 1;
      used = 1;
    }
    kt.blend_rows_u8(rows, wy, used, n_in, s.row.data());
    float* dst = row_out ? row_out + y * n_out : nullptr;
    if (!dst) {
      s.out_row.resize(n_out);
      dst = s.out_row.data();
    }
    kt.gather_taps(s.row.data(), s.first_elem.data(), s.weight_elem.data(), s.x.taps, c, n_out, dst);
    emit(y, dst);
  }
}

}  // namespace

Status ResizeToFloat(const ImageView& src, int out_h, int out_w, const ResizeOptions& options, float* dst) {
  STRATA_RETURN_IF_ERROR(Check(src, out_h, out_w));
  RunResize(src, out_h, out_w, options, dst, [](int, const float*) {});
  return Status::OK();
}

Status Resize(const ImageView& src, int out_h, int out_w, const ResizeOptions& options, Image* dst) {
  STRATA_RETURN_IF_ERROR(Check(src, out_h, out_w));
  const int c = src.channels;
  // The source may alias dst's old buffer only if they are different objects.
  uint8_t* out = dst->Reset(out_h, out_w, c);
  if (!out) return Internal("resize: out of memory");
  const int64_t n_out = static_cast<int64_t>(out_w) * c;
  const kernels::KernelTable& kt = kernels::Kernels();
  RunResize(src, out_h, out_w, options, nullptr,
            [&](int y, const float* row) { kt.f32_to_u8(row, n_out, out + y * n_out); });
  return Status::OK();
}

void ResizeToFloatReference(const ImageView& src, int out_h, int out_w, const ResizeOptions& o, float* dst) {
  const int c = src.channels;
  auto px = [&](int y, int x, int k) -> double { return src.row(y)[x * c + k]; };
  const double sy = static_cast<double>(src.height) / out_h, sx = static_cast<double>(src.width) / out_w;
  for (int oy = 0; oy < out_h; ++oy) {
    for (int ox = 0; ox < out_w; ++ox) {
      const int y = o.flip_up_down ? out_h - 1 - oy : oy;
      const int x = o.flip_left_right ? out_w - 1 - ox : ox;
      for (int k = 0; k < c; ++k) {
        double v = 0;
        if (o.method == ResizeMethod::kBilinear) {
          const double fy = (y + 0.5) * sy - 0.5, fx = (x + 0.5) * sx - 0.5;
          const int y0 = std::max(0, static_cast<int>(std::floor(fy)));
          const int y1 = std::min(src.height - 1, static_cast<int>(std::ceil(fy)));
          const int x0 = std::max(0, static_cast<int>(std::floor(fx)));
          const int x1 = std::min(src.width - 1, static_cast<int>(std::ceil(fx)));
          const double ly = fy - std::floor(fy), lx = fx - std::floor(fx);
          const double top = px(y0, x0, k) + (px(y0, x1, k) - px(y0, x0, k)) * lx;
          const double bot = px(y1, x0, k) + (px(y1, x1, k) - px(y1, x0, k)) * lx;
          v = top + (bot - top) * ly;
        } else {
          const double y_start = y * sy, y_end = (y + 1) * sy, x_start = x * sx, x_end = (x + 1) * sx;
          for (int iy = static_cast<int>(y_start); iy < src.height && iy < y_end; ++iy) {
            const double wy = std::min<double>(iy + 1, y_end) - std::max<double>(iy, y_start);
            for (int ix = static_cast<int>(x_start); ix < src.width && ix < x_end; ++ix) {
              const double wx = std::min<double>(ix + 1, x_end) - std::max<double>(ix, x_start);
              if (wy > 0 && wx > 0) v += wy * wx * px(iy, ix, k);
            }
          }
          v /= sy * sx;
        }
        dst[(static_cast<int64_t>(oy) * out_w + ox) * c + k] = static_cast<float>(v);
      }
    }
  }
}

}  // namespace strata::image
