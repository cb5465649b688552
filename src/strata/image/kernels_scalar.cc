// The scalar reference kernels: plain loops written from the definitions (TensorFlow's
// HSV round trip for saturation and hue), used where no vector unit is available and as
// the oracle the AVX2/AVX-512 kernels are tested against.
#include <cmath>
#include <cstring>

#include "strata/core/dtype.h"
#include "strata/image/kernels.h"

namespace strata::image::kernels {
namespace {

void BlendRowsU8(const uint8_t* const* rows, const float* w, int taps, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0;
    for (int k = 0; k < taps; ++k) acc += w[k] * rows[k][i];
    out[i] = acc;
  }
}

void GatherTaps(const float* in, const int32_t* first, const float* w, int taps, int stride, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    float acc = 0;
    for (int k = 0; k < taps; ++k) acc += w[k * n + j] * in[first[j] + k * stride];
    out[j] = acc;
  }
}

void Gather(const float* in, const int32_t* index, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = in[index[j]];
}

void AffineF32(float* x, int64_t pixels, int c, const float* scale, const float* bias) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int k = 0; k < c; ++k) x[p * c + k] = x[p * c + k] * scale[k] + bias[k];
}

void AffineF32ToBF16(const float* in, int64_t pixels, int c, const float* scale, const float* bias, uint16_t* out) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int k = 0; k < c; ++k) out[p * c + k] = ToBF16(in[p * c + k] * scale[k] + bias[k]).bits;
}

void AffineU8ToF32(const uint8_t* in, int64_t pixels, int c, const float* scale, const float* bias, float* out) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int k = 0; k < c; ++k) out[p * c + k] = in[p * c + k] * scale[k] + bias[k];
}

void AffineU8ToBF16(const uint8_t* in, int64_t pixels, int c, const float* scale, const float* bias, uint16_t* out) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int k = 0; k < c; ++k) out[p * c + k] = ToBF16(in[p * c + k] * scale[k] + bias[k]).bits;
}

void ChannelSums(const float* x, int64_t pixels, int c, double* sums) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int k = 0; k < c; ++k) sums[k] += x[p * c + k];
}

void F32ToU8(const float* in, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    float v = std::nearbyint(in[i]);  // ties to even, as the vector units round
    out[i] = static_cast<uint8_t>(v <= 0 ? 0 : v >= 255 ? 255 : v);
  }
}

// TensorFlow's rgb_to_hsv / hsv_to_rgb (adjust_hue_op.cc), h in [0, 1).
void RgbToHsv(float r, float g, float b, float* h, float* s, float* v) {
  float vmax = std::fmax(r, std::fmax(g, b));
  float vmin = std::fmin(r, std::fmin(g, b));
  float range = vmax - vmin;
  *v = vmax;
  *s = vmax > 0 ? range / vmax : 0;
  float hue = 0;
  if (range > 0) {
    if (r == vmax) hue = (g - b) / range;
    else if (g == vmax) hue = 2 + (b - r) / range;
    else hue = 4 + (r - g) / range;
    hue /= 6;
    if (hue < 0) hue += 1;
  }
  *h = hue;
}

void HsvToRgb(float h, float s, float v, float* r, float* g, float* b) {
  float c = s * v, m = v - c;
  float dh = h * 6;
  int cat = static_cast<int>(std::floor(dh));
  float fmodu = dh - 2 * std::floor(dh / 2);
  float x = c * (1 - std::fabs(fmodu - 1));
  float rr = 0, gg = 0, bb = 0;
  switch (((cat % 6) + 6) % 6) {
    case 0: rr = c, gg = x; break;
    case 1: rr = x, gg = c; break;
    case 2: gg = c, bb = x; break;
    case 3: gg = x, bb = c; break;
    case 4: rr = x, bb = c; break;
    default: rr = c, bb = x; break;
  }
  *r = rr + m, *g = gg + m, *b = bb + m;
}

void SaturationRgb(float* rgb, int64_t pixels, float factor) {
  for (int64_t p = 0; p < pixels; ++p, rgb += 3) {
    float h, s, v;
    RgbToHsv(rgb[0], rgb[1], rgb[2], &h, &s, &v);
    s = std::fmin(1.0f, std::fmax(0.0f, s * factor));
    HsvToRgb(h, s, v, &rgb[0], &rgb[1], &rgb[2]);
  }
}

void HueRgb(float* rgb, int64_t pixels, float delta) {
  for (int64_t p = 0; p < pixels; ++p, rgb += 3) {
    float h, s, v;
    RgbToHsv(rgb[0], rgb[1], rgb[2], &h, &s, &v);
    h += delta;
    h -= std::floor(h);
    HsvToRgb(h, s, v, &rgb[0], &rgb[1], &rgb[2]);
  }
}

void AffineSampleRow(const float* src, int height, int width, int c, float sy0, float sx0, float dy, float dx, int n,
                     const float* fill, float* out) {
  for (int x = 0; x < n; ++x) {
    const float sy = std::fma(static_cast<float>(x), dy, sy0), sx = std::fma(static_cast<float>(x), dx, sx0);
    const float wy = sy - std::floor(sy), wx = sx - std::floor(sx);
    // Far-away coordinates are clamped before the int conversion; they stay outside.
    const int y0 = static_cast<int>(std::fmin(std::fmax(std::floor(sy), -2.0f), static_cast<float>(height)));
    const int x0 = static_cast<int>(std::fmin(std::fmax(std::floor(sx), -2.0f), static_cast<float>(width)));
    for (int k = 0; k < c; ++k) {
      auto at = [&](int yy, int xx) {
        return (yy >= 0 && yy < height && xx >= 0 && xx < width) ? src[(static_cast<int64_t>(yy) * width + xx) * c + k]
                                                                  : fill[k];
      };
      const float top = std::fma(wx, at(y0, x0 + 1) - at(y0, x0), at(y0, x0));
      const float bot = std::fma(wx, at(y0 + 1, x0 + 1) - at(y0 + 1, x0), at(y0 + 1, x0));
      out[x * c + k] = std::fma(wy, bot - top, top);
    }
  }
}

}  // namespace

const KernelTable kScalarTable = {
    Isa::kScalar,  BlendRowsU8,    GatherTaps,    Gather,        AffineF32,       AffineF32ToBF16, AffineU8ToF32,
    AffineU8ToBF16, ChannelSums,   F32ToU8,       SaturationRgb, HueRgb,          AffineSampleRow,
};

}  // namespace strata::image::kernels
