#pragma once
// InternVL's dynamic-resolution grid choice (`dynamic_preprocess` /
// `find_closest_aspect_ratio` in the InternVL chat models' reference code).

namespace edgevl::vision {

// cols = tiles across (the reference's ratio[0], width multiplier), rows = tiles down.
struct TileGrid {
  int cols = 1, rows = 1;
  int count() const { return cols * rows; }
};

// Largest max_num accepted: the candidate list grows like max_num*log(max_num) and nothing
// real uses more than a few dozen tiles.
inline constexpr int kMaxTilesLimit = 4096;

// The grid (cols, rows) with min_num <= cols*rows <= max_num whose aspect ratio is closest
// to width/height; on an exact tie the later (larger) candidate wins only when
// width*height > 0.5 * image_size^2 * cols * rows. Throws edgevl::Error on bad arguments.
TileGrid choose_grid(int width, int height, int min_num, int max_num, int image_size = 448);

}  // namespace edgevl::vision
