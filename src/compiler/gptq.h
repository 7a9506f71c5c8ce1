#pragma once
// GPTQ-style error compensation for symmetric Q4 weights, driven by calibration inputs.
//
// Rounding each weight to its nearest grid point ignores what the inputs do with the errors.
// GPTQ quantizes the columns of W one at a time and moves the not yet quantized columns of the
// same row to cancel the error the last one made on the recorded inputs X: with H = X^T X, the
// optimal move for column j's error e is -e * U[j, j+1:] / U[j, j], U the upper Cholesky factor
// of H^-1 (Frantar et al., 2022). Here the columns are taken in windows of kGptqWindow (a
// multiple of every group size): each window is solved exactly with its own block of H, columns
// outside it held fixed, so the cost is O(K * window^2) instead of O(K^3) for the widest inputs.
// Group scales are chosen by the packing rule (backend/cpu/quant.h, q4_symmetric_scale) on the
// group's compensated weights when the group is reached.
#include <cstdint>
#include <vector>

#include "format/evb.h"

namespace edgevl::cpu {
class ThreadPool;
}

namespace edgevl::compiler {

inline constexpr int64_t kGptqWindow = 256;

// The compensated matrix as its grid: a code in [-8, 7] per weight and a scale per group, in
// the rotated domain of a rotated tensor (about 1.1 bytes a weight where floats took 4: the
// matrices of a whole model wait in this form until the file is written).
struct GptqGrid {
  int64_t n = 0, k = 0, group = 0;
  int rotation = 0;           // e.rotation: values() rotates back
  std::vector<int8_t> codes;  // [n][k]
  std::vector<float> scales;  // [n][ceil(k / group)]
  bool empty() const { return codes.empty(); }
  // The weights to store instead of w, [n][k] in w's (unrotated) domain: scale * code, rotated
  // back; their packing reproduces the grid.
  void values(float* out) const;
};

// w: [N][K] float weights as store_tensor takes them (unrotated: the rotation of a rotated
// tensor, e.rotation, is applied here to both w and the rows); x: M recorded input rows [M][K]
// as the projection sees them. e: a symmetric Q4 entry.
GptqGrid gptq_q4(cpu::ThreadPool& pool, const float* w, const TensorEntry& e, const float* x,
                 int64_t M);

}  // namespace edgevl::compiler
