#pragma once
// Block Hadamard rotation of the input dimension of int8-activation matmuls.
//
// Per-token int8 activations spend their 255 levels on the row's largest value, so one outlier
// channel coarsens every other channel of the token. Rotating each block of `block`
// consecutive input channels by the orthonormal Hadamard matrix H/sqrt(block) spreads an
// outlier over the block, and rotating the weights' rows the same way (at compile time) leaves
// the product unchanged: (x H)(W H)^T = x W^T, as H H^T = I (QuaRot's incoherence, kept within
// blocks so that it commutes with the Q4 groups and costs O(K log block) per row).
#include <cstdint>

#include "backend/cpu/thread_pool.h"

namespace edgevl::cpu {

// The rotation block for an input dimension K: 32, or for K < 32 the largest power of two
// dividing K; 0 (no rotation) when that is 1.
int hadamard_block_for(int64_t K);

// Rotates each of the M rows of x[M][K] in place: blocks of `block` channels over the first
// K - t, t = K % block, then the tail in blocks of the largest power of two dividing t (left as
// it is when t is odd). H/sqrt(n) is symmetric and orthonormal, so applying the rotation twice
// gives x back (to rounding). block: a power of two in [2, 64].
void hadamard_rows(float* x, int64_t M, int64_t K, int block);

// dst[M][K] = src rotated as above (src == dst: in place).
void hadamard_rows(const float* src, float* dst, int64_t M, int64_t K, int block);

// dst[M][K] = src rotated as above, rows spread over the pool when there are many.
void hadamard_rows(ThreadPool& pool, const float* src, float* dst, int64_t M, int64_t K, int block);

}  // namespace edgevl::cpu
