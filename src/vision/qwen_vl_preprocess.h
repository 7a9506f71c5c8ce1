#pragma once
// Qwen2-VL / Qwen3-VL image preprocessing (transformers' Qwen2VLImageProcessorPil, which
// Qwen3-VL's processor uses): no tiles, the image keeps its aspect ratio. smart_resize picks
// a size that is a multiple of patch * merge within [min_pixels, max_pixels]; Pillow BICUBIC
// resizes the uint8 RGB image to it; each value becomes float32(v * (1/255) in double), then
// (x - mean) / std in float32; the image is cut into patches in merge-block order (2x2 blocks
// of patches row-major, the patches of a block row-major) and each patch is one row of
// 3 * temporal * patch * patch values in (channel, t, y, x) order, the still frame repeated
// over t.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vision/image.h"

namespace edgevl::vision {

// Defaults: Qwen2VLImageProcessorPil's class defaults (what a key absent from
// preprocessor_config.json means); the published Qwen3-VL files set patch 16, mean = std = 0.5.
struct QwenVlPreprocessConfig {
  int patch_size = 14;
  int merge_size = 2;
  int temporal_patch_size = 2;
  int64_t min_pixels = 56 * 56;                            // size.shortest_edge
  int64_t max_pixels = 28 * 28 * 1280;                     // size.longest_edge
  float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};  // OPENAI_CLIP_MEAN
  float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};  // OPENAI_CLIP_STD
  double rescale_factor = 1.0 / 255.0;
  int factor() const { return patch_size * merge_size; }
  int row_values() const { return 3 * temporal_patch_size * patch_size * patch_size; }
};

// preprocessor_config.json as Qwen2VLImageProcessor reads it: size {shortest_edge,
// longest_edge} (older files: min_pixels / max_pixels, which take precedence, as the
// processor's constructor does), patch_size, merge_size, temporal_patch_size, image_mean,
// image_std, rescale_factor; absent keys keep the class defaults above. Refuses settings it does
// not implement (no resize, no rescale, no normalize, a resample other than BICUBIC), naming
// `what`.
QwenVlPreprocessConfig parse_qwen_vl_preprocessor(const nlohmann::json& j, const std::string& what);

// transformers' smart_resize(height, width, factor, min_pixels, max_pixels): Python's round
// (half to even), floor / ceil in double. Throws for an aspect ratio above 200.
struct ResizedSize {
  int height = 0, width = 0;
};
ResizedSize smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels);

struct QwenVlPixels {
  int grid_h = 0, grid_w = 0;  // patches (image_grid_thw = [1, grid_h, grid_w])
  std::vector<float> values;   // [grid_h * grid_w][row_values()]
  int64_t patches() const { return int64_t(grid_h) * grid_w; }
};

QwenVlPixels preprocess_qwen_vl(const Image& img, const QwenVlPreprocessConfig& cfg);

}  // namespace edgevl::vision
