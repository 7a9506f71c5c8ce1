// The vision graph's data-movement ops against their definitions, on a non-square-friendly
// small shape: every output element is checked by its own index formula.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/layout_ops.h"

namespace edgevl {
namespace {

TEST(LayoutOps, PatchIm2colPlacesEveryPixel) {
  const int64_t size = 12, patch = 4, grid = size / patch, row = 3 * patch * patch;
  std::vector<float> px(size_t(3 * size * size));
  for (size_t i = 0; i < px.size(); ++i) px[i] = float(i) + 1;  // distinct, none zero
  std::vector<float> out(size_t((1 + grid * grid) * row), -1.f);
  cpu::patch_im2col(px.data(), size, patch, out.data());
  for (int64_t k = 0; k < row; ++k) EXPECT_EQ(out[size_t(k)], 0.f);  // the class-token slot
  for (int64_t py = 0; py < grid; ++py)
    for (int64_t pxi = 0; pxi < grid; ++pxi)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t ky = 0; ky < patch; ++ky)
          for (int64_t kx = 0; kx < patch; ++kx) {
            const float want = px[size_t((c * size + py * patch + ky) * size + pxi * patch + kx)];
            const float got =
                out[size_t((1 + py * grid + pxi) * row + (c * patch + ky) * patch + kx)];
            ASSERT_EQ(got, want) << py << "," << pxi << " c" << c << " " << ky << "," << kx;
          }
}

TEST(LayoutOps, PixelShuffleFollowsInternVlsIndexing) {
  const int64_t grid = 6, f = 2, c = 5, og = grid / f;
  std::vector<float> x(size_t((1 + grid * grid) * c));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  std::vector<float> out(size_t(og * og * c * f * f), -1.f);
  cpu::pixel_shuffle(x.data(), grid, f, c, out.data());
  for (int64_t a = 0; a < og; ++a)
    for (int64_t b = 0; b < og; ++b)
      for (int64_t k = 0; k < c * f * f; ++k) {
        const int64_t py = f * a + k / (f * c), pxx = f * b + (k % (f * c)) / c, ch = k % c;
        ASSERT_EQ(out[size_t((a * og + b) * c * f * f + k)],
                  x[size_t((1 + py * grid + pxx) * c + ch)]);
      }
}

}  // namespace
}  // namespace edgevl
