#pragma once
// The rotary positions of a Qwen3-VL prompt (transformers' Qwen3VLModel.get_rope_index for one
// sequence): text tokens get their running index p on all three axes (t, h, w); a run of image
// tokens starting at p = s, the image's merged grid (rows, cols) row-major, gets (s, s + r,
// s + c); the text after it continues at s + max(rows, cols). Later tokens (decode) sit at
// their cache position + rope_delta = max(position) + 1 - length.
#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph.h"

namespace edgevl {

struct MergedGrid {
  int32_t rows = 0, cols = 0;  // the image's tokens: patches / merge size per side
};

struct RopePositions {
  std::vector<int32_t> thw;  // [ids.size()][3]
  int32_t rope_delta = 0;
};

// `grids`: one per run of `image_token` (or of `video_token`, when >= 0) in `ids`, in order; a
// run must hold rows * cols tokens. A video is one run per temporal group (each group's
// timestamp text between them), as get_rope_index splits video_grid_thw into t grids of t = 1:
// its groups take positions like images, the next one starting after the text between.
RopePositions mrope_positions(std::span<const int32_t> ids, int32_t image_token,
                              std::span<const MergedGrid> grids, int32_t video_token = -1);

// The cos / sin row of each of the m rows a Rope op rotates by, [m][rotated / 2] each:
// frequency f of row i from the table row of its position (plain), or of the position of f's
// axis (MRoPE, when rope_thw is given and the op has sections).
void rope_rows(const RopeAttrs& a, const float* cos_table, const float* sin_table,
               int64_t table_rows, const int32_t* positions, const int32_t* rope_thw, int64_t m,
               float* cos_rows, float* sin_rows);

}  // namespace edgevl
