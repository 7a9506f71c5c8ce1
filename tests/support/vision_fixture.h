#pragma once
// The golden fixtures' pixel formula (tools/golden/make_internvl_goldens.py computes it in
// double and stores float): normalised tiles without an image decoder in the way.
#include <cmath>

#include "vision/preprocess.h"

namespace edgevl::test {

// `count` tiles of [3][size][size]; tile t is shifted by 0.1 * t (+ `phase`, for tests that
// need a different image of the same shape).
inline vision::Tiles formula_tiles(int count, int size, double phase = 0) {
  vision::Tiles t;
  t.count = count;
  t.pixels.resize(size_t(count) * 3 * size_t(size) * size_t(size));
  float* p = t.pixels.data();
  for (int tile = 0; tile < count; ++tile)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
          *p++ = float(std::sin(0.01 * (x + 1) * (c + 1) + 0.1 * tile + phase) *
                       std::cos(0.013 * (y + 1)) * 2.0);
  return t;
}

}  // namespace edgevl::test
