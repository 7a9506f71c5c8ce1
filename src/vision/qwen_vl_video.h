#pragma once
// Qwen3-VL video preprocessing (transformers' Qwen3VLVideoProcessor, which Qwen3.5 checkpoints
// use too): the sampled frames (vision/video.h) are resized together with the video variant
// of smart_resize (the pixel budget is frames x height x width), resized each with BICUBIC,
// rescaled and normalised in the processor's fused form ((u8 - mean / rescale) / (std /
// rescale) in float32), padded to a multiple of temporal_patch_size frames by repeating the
// last one, and cut into rows of 3 * T * P * P values in (channel, t, y, x) order: T
// consecutive frames in one patch row (the temporal groups), the groups one after another,
// within a group the patches in merge-block order as for an image.
//
// The prompt gets one timestamp per temporal group (Qwen3VLProcessor._calculate_timestamps):
// the mean of the group's first and last frame times, "<{t:.1f} seconds>" before the group's
// <|vision_start|><|video_pad|> x tokens<|vision_end|>.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vision/qwen_vl_preprocess.h"
#include "vision/video.h"

namespace edgevl::vision {

struct QwenVlVideoConfig {
  // patch, merge and temporal sizes, mean / std, rescale; min_pixels / max_pixels are the
  // video's size.shortest_edge / size.longest_edge (over all frames: t * h * w).
  QwenVlPreprocessConfig pre;
  VideoSampling sampling;
  bool cap_pixels_per_frame = false;  // qwen-vl-utils' per-frame cap (off by default in 5.x)
  int32_t max_video_tokens = 768;
  QwenVlVideoConfig();  // Qwen3VLVideoProcessor's class defaults
};

// video_preprocessor_config.json as Qwen3VLVideoProcessor reads it (absent keys keep the class
// defaults: patch 16, size {128*32*32, 32*32*768}, mean = std = 0.5, fps 2, frames [4, 768]).
// Refuses what it does not implement (num_frames instead of fps, do_sample_frames false, no
// resize / rescale / normalize, a resample other than BICUBIC), naming `what`.
QwenVlVideoConfig parse_qwen_vl_video_preprocessor(const nlohmann::json& j,
                                                   const std::string& what);

// The video smart_resize of video_processing_qwen3_vl.py: sides under `factor` scaled up
// first (int truncation), t_bar = round(frames / temporal) * temporal (half to even), the
// budget compared with t_bar * h * w, beta from frames * height * width. Throws for fewer
// frames than `temporal` or an aspect ratio above 200.
ResizedSize smart_resize_video(int frames, int height, int width, int temporal, int factor,
                               int64_t min_pixels, int64_t max_pixels);

struct QwenVlVideoPixels {
  int grid_t = 0, grid_h = 0, grid_w = 0;  // video_grid_thw
  std::vector<float> values;               // [grid_t * grid_h * grid_w][row_values()]
  std::vector<double> timestamps;          // seconds, one per temporal group
  int64_t frame_patches() const { return int64_t(grid_h) * grid_w; }
};

// `fps` <= 0 (unknown): timestamps as if 24 frames a second, as the processor does.
QwenVlVideoPixels preprocess_qwen_vl_video(const Video& v, const QwenVlVideoConfig& cfg);

// The "<t seconds>" text before a temporal group (Python's f"<{t:.1f} seconds>").
std::string video_timestamp_text(double seconds);

}  // namespace edgevl::vision
