#pragma once
// InternVL image preprocessing: Pillow-exact bicubic resize, dynamic tiling and
// ImageNet normalisation, matching the reference `load_image` byte for byte / bit for bit.
#include <vector>

#include "vision/image.h"
#include "vision/tiling.h"

namespace edgevl::vision {

// Pillow's Image.resize((out_w, out_h), Image.BICUBIC) on an RGB image: separable
// convolution (two passes with a uint8 clip between them, in Pillow 13's order: vertical
// first iff in_h - out_h > max(0, 2 * (in_w - out_w))), bicubic a = -0.5
// with the support widened by the downscale factor, 22-bit fixed-point coefficients.
// Output is identical to Pillow's. Same size returns a copy, as Pillow does.
Image resize_bicubic(const Image& src, int out_w, int out_h);

struct PreprocessConfig {
  int image_size = 448;
  int min_tiles = 1;
  int max_tiles = 12;
  bool use_thumbnail = true;
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
};

struct Tiles {
  int count = 0;  // grid tiles plus the thumbnail if any
  TileGrid grid;
  bool has_thumbnail = false;
  // [count][3][image_size][image_size] float32, CHW per tile; tiles row-major, the
  // thumbnail last. Each value is (v/255 - mean)/std computed in float32 like torchvision.
  std::vector<float> pixels;
};

Tiles preprocess(const Image& img, const PreprocessConfig& cfg);

// The uint8 tiles before normalisation, [count] images of image_size^2 RGB: what the
// reference hands to ToTensor. Exposed for tests and debugging dumps.
std::vector<Image> preprocess_tiles_u8(const Image& img, const PreprocessConfig& cfg,
                                       TileGrid* grid_out = nullptr);

}  // namespace edgevl::vision
