#include "runtime/execution/rope_positions.h"

#include <algorithm>

#include "core/error.h"

namespace edgevl {

RopePositions mrope_positions(std::span<const int32_t> ids, int32_t image_token,
                              std::span<const MergedGrid> grids) {
  RopePositions out;
  out.thw.resize(3 * ids.size());
  int32_t p = 0, max_pos = -1;
  size_t image = 0;
  for (size_t i = 0; i < ids.size();) {
    if (ids[i] != image_token) {
      for (int a = 0; a < 3; ++a) out.thw[3 * i + size_t(a)] = p;
      max_pos = std::max(max_pos, p);
      ++p, ++i;
      continue;
    }
    size_t run = 0;
    while (i + run < ids.size() && ids[i + run] == image_token) ++run;
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

}  // namespace edgevl
