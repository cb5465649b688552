#include "strata/image/rotate.h"

#include <cmath>
#include <string>

#include "strata/image/kernels.h"

namespace strata::image {

Status Rotate(const float* src, int height, int width, int channels, float angle, const float* fill, float* dst) {
  if (channels < 1 || channels > 4 || height <= 0 || width <= 0) {
    return InvalidArgument("rotate: bad image [" + std::to_string(height) + ", " + std::to_string(width) + ", " +
                           std::to_string(channels) + "]");
  }
  const float zeros[4] = {0, 0, 0, 0};
  if (!fill) fill = zeros;
  // Output pixel (y, x) samples the source at the inverse rotation of its offset from
  // the centre. In image coordinates (y down) a counter-clockwise turn by a maps the
  // offset (dx, dy) to (cos a dx + sin a dy, -sin a dx + cos a dy); we apply the inverse.
  const float cy = (height - 1) * 0.5f, cx = (width - 1) * 0.5f;
  const float ca = std::cos(angle), sa = std::sin(angle);
  const kernels::KernelTable& kt = kernels::Kernels();
  const int64_t row = static_cast<int64_t>(width) * channels;
  for (int y = 0; y < height; ++y) {
    const float oy = y - cy, ox0 = -cx;
    // source = centre + R(-a) * offset, with R(-a) = [[cos, -sin], [sin, cos]] in (x, y).
    const float sx0 = cx + ca * ox0 - sa * oy;
    const float sy0 = cy + sa * ox0 + ca * oy;
    kt.affine_sample_row(src, height, width, channels, sy0, sx0, sa, ca, width, fill, dst + y * row);
  }
  return Status::OK();
}

Status RandomRotate(const float* src, int height, int width, int channels, float max_radians, const float* fill,
                    SeedStream& rng, float* dst) {
  return Rotate(src, height, width, channels, rng.Uniform(-max_radians, max_radians), fill, dst);
}

}  // namespace strata::image
