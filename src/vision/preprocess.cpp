// InternVL's load_image pipeline (dynamic_preprocess + build_transform), reproduced:
//  1. grid = choose_grid(...); the WHOLE image is resized once to (size*cols, size*rows)
//     with Image.resize's default filter: BICUBIC for RGB (the default since Pillow 7;
//     checked in 13.0).
//  2. Tiles are cropped row-major (tile i at column i % cols, row i / cols).
//  3. If use_thumbnail and more than one tile: the ORIGINAL image resized to size x size.
//  4. Per tile torchvision Resize((size, size), BICUBIC): on a PIL image this calls
//     Image.resize, which returns a copy when the size already matches - every tile here
//     is exactly size x size, so this step is the identity and is skipped.
//  5. ToTensor: float32(v) / 255 (a float32 division), then Normalize: (x - mean) / std in
//     float32 with mean/std rounded to float32. A per-channel table of all 256 results is
//     bit-identical to doing it per pixel.
#include "vision/preprocess.h"

#include <array>
#include <cstring>

#include "core/error.h"

namespace edgevl::vision {
namespace {

void check_config(const Image& img, const PreprocessConfig& cfg) {
  check(img.width > 0 && img.height > 0 &&
            img.rgb.size() == static_cast<size_t>(img.width) * img.height * 3,
        "preprocess: image {}x{} with {} bytes is not a valid RGB image", img.width, img.height,
        img.rgb.size());
  check(cfg.image_size > 0 && cfg.image_size <= 4096,
        "preprocess: image_size {} must be in 1..4096", cfg.image_size);
  for (int c = 0; c < 3; ++c)
    check(cfg.std[c] != 0.0f, "preprocess: std[{}] is zero (division by zero)", c);
}

Image crop(const Image& src, int x0, int y0, int w, int h) {
  Image out{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    std::memcpy(&out.rgb[static_cast<size_t>(y) * w * 3],
                &src.rgb[(static_cast<size_t>(y0 + y) * src.width + x0) * 3],
                static_cast<size_t>(w) * 3);
  return out;
}

}  // namespace

std::vector<Image> preprocess_tiles_u8(const Image& img, const PreprocessConfig& cfg,
                                       TileGrid* grid_out) {
  check_config(img, cfg);
  const int s = cfg.image_size;
  const TileGrid grid = choose_grid(img.width, img.height, cfg.min_tiles, cfg.max_tiles, s);
  if (grid_out) *grid_out = grid;
  const Image resized = resize_bicubic(img, s * grid.cols, s * grid.rows);
  std::vector<Image> tiles;
  tiles.reserve(grid.count() + 1);
  for (int i = 0; i < grid.count(); ++i)
    tiles.push_back(crop(resized, (i % grid.cols) * s, (i / grid.cols) * s, s, s));
  if (cfg.use_thumbnail && grid.count() != 1) tiles.push_back(resize_bicubic(img, s, s));
  return tiles;
}

Tiles preprocess(const Image& img, const PreprocessConfig& cfg) {
  check_config(img, cfg);
  std::array<std::array<float, 256>, 3> lut;
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v)
      lut[c][v] = (static_cast<float>(v) / 255.0f - cfg.mean[c]) / cfg.std[c];

  Tiles out;
  const std::vector<Image> tiles = preprocess_tiles_u8(img, cfg, &out.grid);
  out.count = static_cast<int>(tiles.size());
  out.has_thumbnail = out.count > out.grid.count();
  const size_t plane = static_cast<size_t>(cfg.image_size) * cfg.image_size;
  out.pixels.resize(tiles.size() * 3 * plane);
  float* dst = out.pixels.data();
  for (const Image& t : tiles) {
    for (size_t p = 0; p < plane; ++p) {
      dst[p] = lut[0][t.rgb[p * 3 + 0]];
      dst[plane + p] = lut[1][t.rgb[p * 3 + 1]];
      dst[2 * plane + p] = lut[2][t.rgb[p * 3 + 2]];
    }
    dst += 3 * plane;
  }
  return out;
}

}  // namespace edgevl::vision
