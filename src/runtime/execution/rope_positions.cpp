#include "runtime/execution/rope_positions.h"

#include <algorithm>

#include "core/error.h"

namespace edgevl {

RopePositions mrope_positions(std::span<const int32_t> ids, int32_t image_token,
                              std::span<const MergedGrid> grids, int32_t video_token) {
  const auto vision = [&](int32_t id) { return id == image_token || id == video_token; };
  RopePositions out;
  out.thw.resize(3 * ids.size());
  int32_t p = 0, max_pos = -1;
  size_t image = 0;
  for (size_t i = 0; i < ids.size();) {
    if (!vision(ids[i])) {
      for (int a = 0; a < 3; ++a) out.thw[3 * i + size_t(a)] = p;
      max_pos = std::max(max_pos, p);
      ++p, ++i;
      continue;
    }
    size_t run = 0;
    while (i + run < ids.size() && ids[i + run] == ids[i]) ++run;
    check(image < grids.size(), "the prompt has more image token runs than images ({})",
          grids.size());
    const MergedGrid g = grids[image++];
    check(g.rows > 0 && g.cols > 0 && size_t(g.rows) * size_t(g.cols) == run,
          "image {} has {} tokens in the prompt but a grid of {}x{}", image, run, g.rows, g.cols);
    for (int32_t r = 0; r < g.rows; ++r)
      for (int32_t c = 0; c < g.cols; ++c) {
        int32_t* t = &out.thw[3 * (i + size_t(r) * size_t(g.cols) + size_t(c))];
        t[0] = p, t[1] = p + r, t[2] = p + c;
      }
    max_pos = std::max(max_pos, p + std::max(g.rows, g.cols) - 1);
    p += std::max(g.rows, g.cols);
    i += run;
  }
  check(image == grids.size(), "{} images but {} image token runs in the prompt", grids.size(),
        image);
  out.rope_delta = max_pos + 1 - int32_t(ids.size());
  return out;
}

void rope_rows(const RopeAttrs& a, const float* cos_table, const float* sin_table,
               int64_t table_rows, const int32_t* positions, const int32_t* rope_thw, int64_t m,
               float* cos_rows, float* sin_rows) {
  const int64_t half = a.rotated() / 2;
  const bool mrope = rope_thw && (a.mrope_h != 0 || a.mrope_w != 0);
  // Contiguous sections (both negative): [0, t_end) t, [t_end, w_start) h, [w_start, half) w.
  const bool contiguous = a.mrope_h < 0;
  const int64_t w_start = half + a.mrope_w, t_end = w_start + a.mrope_h;
  auto in_table = [&](int64_t p) {
    check(p >= 0 && p < table_rows, "rotary position {} is outside the table's {} rows", p,
          table_rows);
  };
  for (int64_t i = 0; i < m; ++i) {
    // The row's positions are checked once, not per frequency.
    const int32_t* thw = mrope ? rope_thw + 3 * i : nullptr;
    if (mrope)
      for (int k = 0; k < 3; ++k) in_table(thw[k]);
    else
      in_table(positions[i]);
    for (int64_t f = 0; f < half; ++f) {
      int axis = 0;
      if (mrope)
        axis = contiguous                                   ? (f >= w_start ? 2
                                                               : f >= t_end ? 1
                                                                            : 0)
               : (f % 3 == 1 && f < 3 * int64_t(a.mrope_h)) ? 1
               : (f % 3 == 2 && f < 3 * int64_t(a.mrope_w)) ? 2
                                                            : 0;
      const int64_t p = mrope ? thw[axis] : positions[i];
      cos_rows[i * half + f] = cos_table[p * half + f];
      sin_rows[i * half + f] = sin_table[p * half + f];
    }
  }
}

}  // namespace edgevl
