// Qwen2VLImageProcessorPil._preprocess, step by step (transformers 5.x):
//  1. smart_resize on the decoded RGB size, factor = patch_size * merge_size;
//  2. PIL Image.resize(BICUBIC) of the uint8 image (np_resize hands PIL the uint8 array
//     unchanged) — resize_bicubic is Pillow-exact;
//  3. rescale: (uint8 as float64 * rescale_factor) cast to float32;
//  4. normalize: (x - float32(mean)) / float32(std) in float32 (np arrays of the image dtype);
//     steps 3-4 depend only on the byte and the channel, so a 256-entry table per channel is
//     bit-identical to doing them per pixel;
//  5. patchify: reshape (3, gh/m, m, P, gw/m, m, P), transpose to (gh/m, gw/m, m, m, 3, P, P),
//     broadcast t after the channel, flatten to rows of 3 * T * P * P.
#include "vision/qwen_vl_preprocess.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "vision/preprocess.h"

namespace edgevl::vision {

namespace {

using json = nlohmann::json;

// Python's round() of a float: to the nearest integer, ties to the even one.
double round_half_even(double x) {
  const double r = std::round(x);  // ties away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5) return 2.0 * std::round(x / 2.0);
  return r;
}

int64_t get_int(const json& j, const char* key, int64_t dflt, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  check(it->is_number_integer() && it->get<int64_t>() > 0, "{}: '{}' must be a positive integer",
        what, key);
  return it->get<int64_t>();
}

void get_triple(const json& j, const char* key, float* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (it->is_number()) {  // one value for every channel
    out[0] = out[1] = out[2] = it->get<float>();
    return;
  }
  check(it->is_array() && it->size() == 3, "{}: '{}' must be 3 numbers, got {}", what, key,
        it->dump());
  for (size_t c = 0; c < 3; ++c) {
    check((*it)[c].is_number(), "{}: '{}' must be 3 numbers, got {}", what, key, it->dump());
    out[c] = (*it)[c].get<float>();
  }
}

}  // namespace

QwenVlPreprocessConfig parse_qwen_vl_preprocessor(const json& j, const std::string& what) {
  check(j.is_object(), "{}: expected a JSON object", what);
  QwenVlPreprocessConfig c;
  for (const char* flag : {"do_resize", "do_rescale", "do_normalize"}) {
    auto it = j.find(flag);
    check(it == j.end() || it->is_null() || (it->is_boolean() && it->get<bool>()),
          "{}: '{}' false is not supported (Qwen-VL checkpoints resize, rescale and normalize)",
          what, flag);
  }
  const int64_t resample = get_int(j, "resample", 3, what);
  check(resample == 3, "{}: resample {} is not supported (expected 3, BICUBIC)", what, resample);
  c.patch_size = int(get_int(j, "patch_size", c.patch_size, what));
  c.merge_size = int(get_int(j, "merge_size", c.merge_size, what));
  c.temporal_patch_size = int(get_int(j, "temporal_patch_size", c.temporal_patch_size, what));
  if (auto s = j.find("size"); s != j.end() && s->is_object()) {
    c.min_pixels = get_int(*s, "shortest_edge", c.min_pixels, what + " size");
    c.max_pixels = get_int(*s, "longest_edge", c.max_pixels, what + " size");
  }
  c.min_pixels = get_int(j, "min_pixels", c.min_pixels, what);
  c.max_pixels = get_int(j, "max_pixels", c.max_pixels, what);
  check(c.min_pixels <= c.max_pixels, "{}: min_pixels {} exceeds max_pixels {}", what, c.min_pixels,
        c.max_pixels);
  check(c.patch_size <= 64 && c.merge_size <= 8 && c.temporal_patch_size <= 8,
        "{}: patch_size {}, merge_size {}, temporal_patch_size {} out of range", what, c.patch_size,
        c.merge_size, c.temporal_patch_size);
  get_triple(j, "image_mean", c.mean, what);
  get_triple(j, "image_std", c.std, what);
  for (int k = 0; k < 3; ++k) check(c.std[k] != 0.f, "{}: image_std[{}] is zero", what, k);
  if (auto r = j.find("rescale_factor"); r != j.end() && !r->is_null()) {
    check(r->is_number() && r->get<double>() > 0, "{}: rescale_factor must be positive", what);
    c.rescale_factor = r->get<double>();
  }
  return c;
}

ResizedSize smart_resize(int height, int width, int factor, int64_t min_pixels,
                         int64_t max_pixels) {
  check(height > 0 && width > 0 && factor > 0, "smart_resize: bad size {}x{} (factor {})", width,
        height, factor);
  const double ratio = double(std::max(height, width)) / double(std::min(height, width));
  check(ratio <= 200, "image {}x{}: absolute aspect ratio must be at most 200, got {}", width,
        height, ratio);
  const double f = factor;
  double h = round_half_even(height / f) * f, w = round_half_even(width / f) * f;
  const double hw = double(int64_t(height) * width);
  if (h * w > double(max_pixels)) {
    const double beta = std::sqrt(hw / double(max_pixels));
    h = std::max(f, std::floor(height / beta / f) * f);
    w = std::max(f, std::floor(width / beta / f) * f);
  } else if (h * w < double(min_pixels)) {
    const double beta = std::sqrt(double(min_pixels) / hw);
    h = std::ceil(height * beta / f) * f;
    w = std::ceil(width * beta / f) * f;
  }
  return {int(h), int(w)};
}

QwenVlPixels preprocess_qwen_vl(const Image& img, const QwenVlPreprocessConfig& cfg) {
  check(img.width > 0 && img.height > 0 &&
            img.rgb.size() == static_cast<size_t>(img.width) * img.height * 3,
        "preprocess: image {}x{} with {} bytes is not a valid RGB image", img.width, img.height,
        img.rgb.size());
  const ResizedSize sz =
      smart_resize(img.height, img.width, cfg.factor(), cfg.min_pixels, cfg.max_pixels);
  const Image r = resize_bicubic(img, sz.width, sz.height);
  std::array<std::array<float, 256>, 3> lut;
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v)
      lut[size_t(c)][size_t(v)] =
          (static_cast<float>(double(v) * cfg.rescale_factor) - cfg.mean[c]) / cfg.std[c];

  const int P = cfg.patch_size, m = cfg.merge_size, T = cfg.temporal_patch_size;
  QwenVlPixels out;
  out.grid_h = sz.height / P;
  out.grid_w = sz.width / P;
  const size_t row = size_t(cfg.row_values());
  out.values.resize(size_t(out.patches()) * row);
  float* dst = out.values.data();
  for (int bh = 0; bh < out.grid_h / m; ++bh)
    for (int bw = 0; bw < out.grid_w / m; ++bw)
      for (int mh = 0; mh < m; ++mh)
        for (int mw = 0; mw < m; ++mw) {
          const int y0 = (bh * m + mh) * P, x0 = (bw * m + mw) * P;
          for (int c = 0; c < 3; ++c) {
            float* plane = dst;  // this channel's first frame: P rows of P values
            for (int y = 0; y < P; ++y) {
              const uint8_t* src = &r.rgb[(size_t(y0 + y) * size_t(r.width) + size_t(x0)) * 3];
              for (int x = 0; x < P; ++x)
                plane[y * P + x] = lut[size_t(c)][src[size_t(x) * 3 + size_t(c)]];
            }
            dst += P * P;
            for (int t = 1; t < T; ++t, dst += P * P)  // a still image: the frame again
              std::copy(plane, plane + P * P, dst);
          }
        }
  return out;
}

}  // namespace edgevl::vision
