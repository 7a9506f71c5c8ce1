// Pillow-exact bicubic resize. Facts taken from Pillow's libImaging/Resample.c (the
// reference for InternVL's Image.resize and torchvision's PIL path), reimplemented here:
//  * Separable: one pass over only the source rows (or columns) the second pass will read,
//    stored as uint8 (rounded and clipped), then the other pass. Horizontal first unless
//    the height shrinks much more than the width (see resize_bicubic for the rule).
//  * Per output position x: center = (x + 0.5) * scale, scale = in/out. When shrinking the
//    filter is stretched by scale (antialiasing): support = 2 * max(scale, 1). The taps run
//    from (int)(center - support + 0.5) to (int)(center + support + 0.5), clamped to the
//    image, weight = bicubic((tap - center + 0.5) / max(scale, 1)) with a = -0.5, and the
//    weights are divided by their sum (in double).
//  * Weights become int32 with 22 fractional bits, rounded half away from zero; the sum
//    starts at 2^21 (rounding) and the result is (sum >> 22) clipped to 0..255.
//  * A pass is skipped when its size does not change; no change at all is a copy.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "vision/preprocess.h"

namespace edgevl::vision {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // 8 bits result, 2 bits headroom for overshoot

double bicubic(double x) {
  // Written in the same operation order as Pillow so the doubles round the same way.
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

struct Coeffs {
  int ksize = 0;
  std::vector<int> first;  // first source index per output index
  std::vector<int> count;  // number of taps per output index
  std::vector<int32_t> k;  // out_size * ksize fixed-point weights
};

Coeffs precompute(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  const double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    // (int) truncates toward zero like the C cast in the reference; then clamp.
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = bicubic((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    int32_t* kk = &c.k[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[x] / ww : w[x];
      const double f = v * (1 << kPrecisionBits);
      kk[x] = static_cast<int32_t>(v < 0 ? -0.5 + f : 0.5 + f);
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

inline uint8_t clip8(int32_t acc) {
  // C++20 defines >> on negatives as arithmetic, matching the reference's behaviour.
  const int32_t v = acc >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Horizontal pass over rows [row0, row0 + rows) of src. `c` indexes source columns; src
// holds columns from col0 on (col0 > 0 after a column-restricted vertical pass).
Image horizontal(const Image& src, const Coeffs& c, int col0, int row0, int rows) {
  const int out_w = static_cast<int>(c.first.size());
  Image out{out_w, rows, std::vector<uint8_t>(static_cast<size_t>(out_w) * rows * 3)};
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = &src.rgb[static_cast<size_t>(row0 + y) * src.width * 3];
    uint8_t* o = &out.rgb[static_cast<size_t>(y) * out_w * 3];
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &c.k[static_cast<size_t>(xx) * c.ksize];
      const uint8_t* p = in + static_cast<size_t>(c.first[xx] - col0) * 3;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < c.count[xx]; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      o[xx * 3 + 0] = clip8(s0);
      o[xx * 3 + 1] = clip8(s1);
      o[xx * 3 + 2] = clip8(s2);
    }
  }
  return out;
}

// Vertical pass over columns [col0, col0 + cols) of src. `c` indexes source rows; src
// holds rows from row0 on (row0 > 0 after a row-restricted horizontal pass).
Image vertical(const Image& src, const Coeffs& c, int row0, int col0, int cols) {
  const int out_h = static_cast<int>(c.first.size());
  Image out{cols, out_h, std::vector<uint8_t>(static_cast<size_t>(cols) * out_h * 3)};
  std::vector<int32_t> acc(static_cast<size_t>(cols) * 3);
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &c.k[static_cast<size_t>(yy) * c.ksize];
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    // Row-by-row accumulation is the same integer sum as the reference's per-pixel loop
    // (integer addition is associative) but walks memory contiguously.
    for (int y = 0; y < c.count[yy]; ++y) {
      const uint8_t* in =
          &src.rgb[(static_cast<size_t>(c.first[yy] - row0 + y) * src.width + col0) * 3];
      const int32_t ky = k[y];
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += in[i] * ky;
    }
    uint8_t* o = &out.rgb[static_cast<size_t>(yy) * cols * 3];
    for (size_t i = 0; i < acc.size(); ++i) o[i] = clip8(acc[i]);
  }
  return out;
}

}  // namespace

Image resize_bicubic(const Image& src, int out_w, int out_h) {
  check(src.width > 0 && src.height > 0 &&
            src.rgb.size() == static_cast<size_t>(src.width) * src.height * 3,
        "resize_bicubic: source image {}x{} with {} bytes is not a valid RGB image", src.width,
        src.height, src.rgb.size());
  check(out_w > 0 && out_h > 0, "resize_bicubic: output size {}x{} must be positive", out_w, out_h);
  constexpr int64_t kMaxOut = int64_t{1} << 28;  // keeps every index and product in range
  check(int64_t{out_w} * out_h <= kMaxOut, "resize_bicubic: output {}x{} exceeds {} pixels", out_w,
        out_h, kMaxOut);
  if (out_w == src.width && out_h == src.height) return src;
  if (out_w == src.width) return vertical(src, precompute(src.height, out_h), 0, 0, src.width);
  const Coeffs ch = precompute(src.width, out_w);
  if (out_h == src.height) return horizontal(src, ch, 0, 0, src.height);
  const Coeffs cv = precompute(src.height, out_h);
  // Pass order, as in Pillow 13 (Resample.c, "resize vertically first if height is scaled
  // down significantly more than width"): vertical first iff
  // in_h - out_h > 0 and in_h - out_h > 2 * (in_w - out_w). The uint8 clip between the
  // passes makes the order visible in the output. Older Pillow always went horizontal
  // first; the goldens record the Pillow version they were made with.
  const int dh = src.height - out_h, dw = src.width - out_w;
  if (dh > 0 && dh > 2 * dw) {
    // Only the source columns the horizontal pass will read.
    const int col0 = ch.first.front();
    const int col1 = ch.first.back() + ch.count.back();
    const Image tmp = vertical(src, cv, 0, col0, col1 - col0);
    return horizontal(tmp, ch, col0, 0, out_h);
  }
  // Only the source rows the vertical pass will read, as the reference does.
  const int row0 = cv.first.front();
  const int row1 = cv.first.back() + cv.count.back();
  const Image tmp = horizontal(src, ch, 0, row0, row1 - row0);
  return vertical(tmp, cv, row0, 0, out_w);
}

}  // namespace edgevl::vision
