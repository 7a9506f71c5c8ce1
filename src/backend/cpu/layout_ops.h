#pragma once
// The vision graph's data-movement ops: no arithmetic, one definition for every ISA level.
#include <cstdint>

namespace edgevl::cpu {

// PatchIm2col: a normalised tile [3][size][size] (CHW) -> [1 + g*g][3*patch*patch] with
// g = size / patch: row 0 zero (the class-token slot), then one row per patch, row-major over
// the grid, each flattened channel-major like the conv weight [c][ky][kx] -- so the patch
// embedding convolution is one matmul.
void patch_im2col(const float* pixels, int64_t size, int64_t patch, float* out);

// PixelShuffle (InternVL's pixel_shuffle v2, downsample 1/factor): x [1 + grid*grid][c] with
// the class token first (dropped) -> [(grid/factor)^2][c * factor^2]. Output row (a, b),
// channel k reads patch (f*a + k / (f*c), f*b + (k % (f*c)) / c), channel k % c.
void pixel_shuffle(const float* x, int64_t grid, int64_t factor, int64_t c, float* out);

}  // namespace edgevl::cpu
