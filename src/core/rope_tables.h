#pragma once
// RoPE's rotation tables as transformers computes them in float32: inv_freq[i] =
// 1 / theta^(2i/d), angle = pos * inv_freq[i] (a float32 product); cos and sin of it, row-major
// [positions][head_dim / 2]. The loader computes them from the model config (.evb tensors of
// source RopeCos / RopeSin); up to format 6 the compiler stored the same values in the file.
#include <cstdint>

namespace edgevl {

void rope_tables(float theta, int head_dim, int64_t positions, float* cos_out, float* sin_out);

}  // namespace edgevl
