#include "backend/cpu/layout_ops.h"

#include <algorithm>

namespace edgevl::cpu {

void patch_im2col(const float* pixels, int64_t size, int64_t patch, float* out) {
  const int64_t grid = size / patch, row = 3 * patch * patch;
  std::fill(out, out + row, 0.f);
  for (int64_t py = 0; py < grid; ++py)
    for (int64_t px = 0; px < grid; ++px) {
      float* dst = out + (1 + py * grid + px) * row;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t ky = 0; ky < patch; ++ky) {
          const float* src = pixels + (c * size + py * patch + ky) * size + px * patch;
          std::copy(src, src + patch, dst + (c * patch + ky) * patch);
        }
    }
}

void pixel_shuffle(const float* x, int64_t grid, int64_t factor, int64_t c, float* out) {
  const int64_t s = factor, og = grid / s;
  x += c;  // skip the class token
  for (int64_t a = 0; a < og; ++a)
    for (int64_t b = 0; b < og; ++b) {
      float* o = out + (a * og + b) * c * s * s;
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j) {
          const float* src = x + ((s * a + i) * grid + (s * b + j)) * c;
          std::copy(src, src + c, o + (i * s + j) * c);
        }
    }
}

}  // namespace edgevl::cpu
