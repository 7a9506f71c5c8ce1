// Qwen3VLVideoProcessor._preprocess, step by step (transformers 5.x, torchvision backend):
//  1. resize: smart_resize_video on (sampled frames, height, width), factor = patch * merge,
//     then every frame BICUBIC (antialiased) to that size. torchvision interpolates the uint8
//     frames in float; resize_bicubic is Pillow's, within one u8 step of it (docs/qwen3_vl.md);
//  2. rescale + normalize fused: mean' = float32(mean) * float32(1 / rescale), the same for
//     std, then (float32(u8) - mean') / std' in float32: a 256-entry table per channel;
//  3. patchify: pad to a multiple of T frames with the last frame, view (gt, T, 3, gh/m, m, P,
//     gw/m, m, P), permute to (gt, gh/m, gw/m, m, m, 3, T, P, P), flatten rows.
#include "vision/qwen_vl_video.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "vision/preprocess.h"

namespace edgevl::vision {

namespace {

using json = nlohmann::json;

double video_round(double x) {
  if (std::fabs(x - std::trunc(x)) == 0.5) return 2.0 * std::round(x / 2.0);
  return std::round(x);
}

}  // namespace

QwenVlVideoConfig::QwenVlVideoConfig() {
  pre.patch_size = 16;
  pre.merge_size = 2;
  pre.temporal_patch_size = 2;
  pre.min_pixels = 128 * 32 * 32;
  pre.max_pixels = 32 * 32 * 768;
  for (int c = 0; c < 3; ++c) pre.mean[c] = pre.std[c] = 0.5f;  // IMAGENET_STANDARD_*
}

QwenVlVideoConfig parse_qwen_vl_video_preprocessor(const json& j, const std::string& what) {
  check(j.is_object(), "{}: expected a JSON object", what);
  const QwenVlVideoConfig dflt;
  // The image parser reads the shared keys; the video class's defaults fill what is absent.
  json k = j;
  auto absent = [&](const char* key) { return !k.contains(key) || k[key].is_null(); };
  if (absent("patch_size")) k["patch_size"] = dflt.pre.patch_size;
  if (absent("size"))
    k["size"] = {{"shortest_edge", dflt.pre.min_pixels}, {"longest_edge", dflt.pre.max_pixels}};
  check(k["size"].is_object() && k["size"].contains("shortest_edge") &&
            k["size"].contains("longest_edge"),
        "{}: 'size' must have 'shortest_edge' and 'longest_edge', got {}", what, k["size"].dump());
  if (absent("image_mean")) k["image_mean"] = {0.5, 0.5, 0.5};
  if (absent("image_std")) k["image_std"] = {0.5, 0.5, 0.5};
  k.erase("min_pixels");  // image-processor keys the video processor does not read
  k.erase("max_pixels");
  QwenVlVideoConfig c;
  c.pre = parse_qwen_vl_preprocessor(k, what);
  for (const char* key : {"num_frames", "max_duration"})
    check(absent(key), "{}: '{}' is not supported (edgevl samples frames by fps)", what, key);
  if (auto it = j.find("do_sample_frames"); it != j.end() && !it->is_null())
    check(it->is_boolean() && it->get<bool>(), "{}: do_sample_frames false is not supported", what);
  if (auto it = j.find("fps"); it != j.end() && !it->is_null()) {
    check(it->is_number() && it->get<double>() > 0, "{}: 'fps' must be a positive number", what);
    c.sampling.fps = it->get<double>();
  }
  auto get_int = [&](const char* key, int32_t& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    check(it->is_number_integer() && it->get<int64_t>() > 0 && it->get<int64_t>() < (1 << 20),
          "{}: '{}' must be a positive integer", what, key);
    out = int32_t(it->get<int64_t>());
  };
  get_int("min_frames", c.sampling.min_frames);
  get_int("max_frames", c.sampling.max_frames);
  get_int("max_video_tokens", c.max_video_tokens);
  check(c.sampling.min_frames <= c.sampling.max_frames, "{}: min_frames {} exceeds max_frames {}",
        what, c.sampling.min_frames, c.sampling.max_frames);
  if (auto it = j.find("cap_pixels_per_frame"); it != j.end() && !it->is_null()) {
    check(it->is_boolean(), "{}: 'cap_pixels_per_frame' must be true or false", what);
    c.cap_pixels_per_frame = it->get<bool>();
  }
  return c;
}

ResizedSize smart_resize_video(int frames, int height, int width, int temporal, int factor,
                               int64_t min_pixels, int64_t max_pixels) {
  check(frames >= temporal, "a video of {} frames: at least {} are needed (one temporal patch)",
        frames, temporal);
  check(height > 0 && width > 0 && factor > 0, "smart_resize: bad size {}x{} (factor {})", width,
        height, factor);
  const double f = factor;
  double hh = height, ww = width;
  if (height < factor || width < factor) {  // int(height * scale): truncation
    const double scale = std::max(f / height, f / width);
    hh = std::trunc(height * scale);
    ww = std::trunc(width * scale);
  }
  const double ratio = std::max(hh, ww) / std::min(hh, ww);
  check(ratio <= 200, "video {}x{}: absolute aspect ratio must be at most 200, got {}", width,
        height, ratio);
  double h = video_round(hh / f) * f, w = video_round(ww / f) * f;
  const double t = video_round(double(frames) / temporal) * temporal;
  if (t * h * w > double(max_pixels)) {
    const double beta = std::sqrt(double(frames) * hh * ww / double(max_pixels));
    h = std::max(f, std::floor(hh / beta / f) * f);
    w = std::max(f, std::floor(ww / beta / f) * f);
  } else if (t * h * w < double(min_pixels)) {
    const double beta = std::sqrt(double(min_pixels) / (double(frames) * hh * ww));
    h = std::ceil(hh * beta / f) * f;
    w = std::ceil(ww * beta / f) * f;
  }
  return {int(h), int(w)};
}

QwenVlVideoPixels preprocess_qwen_vl_video(const Video& v, const QwenVlVideoConfig& cfg) {
  const QwenVlPreprocessConfig& p = cfg.pre;
  const int n = int(v.frames.size()), T = p.temporal_patch_size, P = p.patch_size, m = p.merge_size;
  check(n > 0 && v.indices.size() == size_t(n), "a video without sampled frames");
  for (const Image& f : v.frames)
    check(f.width == v.frames[0].width && f.height == v.frames[0].height &&
              f.rgb.size() == size_t(f.width) * size_t(f.height) * 3 && f.width > 0,
          "video frames of different sizes ({}x{} and {}x{})", v.frames[0].width,
          v.frames[0].height, f.width, f.height);
  int64_t max_pixels = p.max_pixels;
  if (cfg.cap_pixels_per_frame) {
    const int64_t frame_cap = int64_t(cfg.max_video_tokens) * p.factor() * p.factor();
    const int64_t per_frame =
        std::max(std::min(frame_cap, p.max_pixels / n), int64_t(double(p.min_pixels) * 1.05));
    max_pixels = per_frame * n;
  }
  const ResizedSize sz = smart_resize_video(n, v.frames[0].height, v.frames[0].width, T, p.factor(),
                                            p.min_pixels, max_pixels);
  std::array<std::array<float, 256>, 3> lut;
  const float inv = float(1.0 / p.rescale_factor);
  for (int c = 0; c < 3; ++c) {
    const float mean = p.mean[c] * inv, sd = p.std[c] * inv;
    for (int u = 0; u < 256; ++u) lut[size_t(c)][size_t(u)] = (float(u) - mean) / sd;
  }
  std::vector<Image> frames;
  frames.reserve(size_t(n + T));
  for (const Image& f : v.frames) frames.push_back(resize_bicubic(f, sz.width, sz.height));
  std::vector<int64_t> idx = v.indices;
  while (frames.size() % size_t(T)) {  // the last frame repeated (patchify's pad)
    frames.push_back(frames.back());
    idx.push_back(idx.back());
  }
  QwenVlVideoPixels out;
  out.grid_t = int(frames.size()) / T;
  out.grid_h = sz.height / P;
  out.grid_w = sz.width / P;
  const size_t row = size_t(p.row_values());
  out.values.resize(size_t(out.grid_t) * size_t(out.frame_patches()) * row);
  float* dst = out.values.data();
  for (int g = 0; g < out.grid_t; ++g)
    for (int bh = 0; bh < out.grid_h / m; ++bh)
      for (int bw = 0; bw < out.grid_w / m; ++bw)
        for (int mh = 0; mh < m; ++mh)
          for (int mw = 0; mw < m; ++mw) {
            const int y0 = (bh * m + mh) * P, x0 = (bw * m + mw) * P;
            for (int c = 0; c < 3; ++c)
              for (int t = 0; t < T; ++t) {
                const Image& r = frames[size_t(g * T + t)];
                for (int y = 0; y < P; ++y) {
                  const uint8_t* src =
                      &r.rgb[(size_t(y0 + y) * size_t(r.width) + size_t(x0)) * 3 + size_t(c)];
                  for (int x = 0; x < P; ++x) *dst++ = lut[size_t(c)][src[size_t(x) * 3]];
                }
              }
          }
  // _calculate_timestamps: index / fps, the mean of each group's first and last frame.
  const double fps = v.fps > 0 ? v.fps : 24.0;
  for (int g = 0; g < out.grid_t; ++g)
    out.timestamps.push_back(
        (double(idx[size_t(g * T)]) / fps + double(idx[size_t(g * T + T - 1)]) / fps) / 2);
  return out;
}

std::string video_timestamp_text(double seconds) {
  return fmt::format("<{:.1f} seconds>", seconds);
}

}  // namespace edgevl::vision
