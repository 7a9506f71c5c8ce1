#include "vision/tiling.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace edgevl::vision {

TileGrid choose_grid(int width, int height, int min_num, int max_num, int image_size) {
  check(width > 0 && height > 0, "choose_grid: image size {}x{} must be positive", width, height);
  check(image_size > 0, "choose_grid: image_size {} must be positive", image_size);
  check(min_num >= 1 && min_num <= max_num,
        "choose_grid: tile range [{}, {}] is empty or starts below 1", min_num, max_num);
  check(max_num <= kMaxTilesLimit, "choose_grid: max_num {} is above the limit {}", max_num,
        kMaxTilesLimit);

  // The reference builds a Python set of (i, j) and stable-sorts it by i*j, so candidates of
  // equal area come in CPython's hash-table order. We order them by i instead. That can
  // only matter on an exact floating-point tie between two different aspect ratios of the
  // same area with no candidate between them; with min_num == 1 every such pair has a
  // candidate in between (1:1 or k:1), so the result is the same (make_image_goldens.py
  // checks this exhaustively for max_num <= 40). With min_num > 1 such ties are possible.
  std::vector<std::pair<int, int>> cand;
  for (int area = min_num; area <= max_num; ++area)
    for (int i = 1; i <= area; ++i)
      if (area % i == 0) cand.emplace_back(i, area / i);

  const double aspect = static_cast<double>(width) / static_cast<double>(height);
  const double area = static_cast<double>(width) * static_cast<double>(height);
  double best_diff = std::numeric_limits<double>::infinity();
  std::pair<int, int> best{1, 1};
  for (const auto& [i, j] : cand) {
    const double diff = std::fabs(aspect - static_cast<double>(i) / static_cast<double>(j));
    if (diff < best_diff) {
      best_diff = diff;
      best = {i, j};
    } else if (diff == best_diff) {
      // Same expression order as the reference: 0.5 * size * size * i * j in doubles.
      if (area > 0.5 * image_size * image_size * i * j) best = {i, j};
    }
  }
  return TileGrid{best.first, best.second};
}

}  // namespace edgevl::vision
