#include "backend/cpu/hadamard.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace edgevl::cpu {

int hadamard_block_for(int64_t K) {
  if (K >= 32) return 32;
  int b = 16;
  while (b > 1 && K % b != 0) b /= 2;
  return b > 1 ? b : 0;
}

namespace {

// The butterflies of the fast Walsh-Hadamard transform over one block: log2(block) stages of
// (a + b, a - b). Every element goes through the same operations in the same order on every
// CPU, so the result does not depend on how the compiler vectorises the loops.
void rotate_block(float* v, int block, float scale) {
  for (int h = 1; h < block; h *= 2)
    for (int i = 0; i < block; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
  for (int j = 0; j < block; ++j) v[j] *= scale;
}

// rotate_block for block = 32 on four-float vectors (GCC vector extensions: SSE2 on x86-64,
// NEON on AArch64): the same stages in the same order with the same additions, so bit-identical
// to the loop above, at a few instructions per element instead of tens. The in-vector stages
// add +-b, which is exactly a + b or a - b.
using HadamardF4 = float __attribute__((vector_size(16)));
using HadamardI4 = int __attribute__((vector_size(16)));

// Stages of stride 1 and 2 within one vector.
inline HadamardF4 inner_stages(HadamardF4 x) {
  const HadamardF4 s1 = {1.f, -1.f, 1.f, -1.f}, s2 = {1.f, 1.f, -1.f, -1.f};
  x = __builtin_shuffle(x, HadamardI4{0, 0, 2, 2}) +
      __builtin_shuffle(x, HadamardI4{1, 1, 3, 3}) * s1;
  return __builtin_shuffle(x, HadamardI4{0, 1, 0, 1}) +
         __builtin_shuffle(x, HadamardI4{2, 3, 2, 3}) * s2;
}

void rotate_block32(const float* p, float* out, float scale) {
  HadamardF4 v0, v1, v2, v3, v4, v5, v6, v7;
  std::memcpy(&v0, p, 16), std::memcpy(&v1, p + 4, 16), std::memcpy(&v2, p + 8, 16);
  std::memcpy(&v3, p + 12, 16), std::memcpy(&v4, p + 16, 16), std::memcpy(&v5, p + 20, 16);
  std::memcpy(&v6, p + 24, 16), std::memcpy(&v7, p + 28, 16);
  v0 = inner_stages(v0), v1 = inner_stages(v1), v2 = inner_stages(v2), v3 = inner_stages(v3);
  v4 = inner_stages(v4), v5 = inner_stages(v5), v6 = inner_stages(v6), v7 = inner_stages(v7);
  const auto bfly = [](HadamardF4& a, HadamardF4& b) {
    const HadamardF4 t = a;
    a = t + b;
    b = t - b;
  };
  bfly(v0, v1), bfly(v2, v3), bfly(v4, v5), bfly(v6, v7);  // stride 4
  bfly(v0, v2), bfly(v1, v3), bfly(v4, v6), bfly(v5, v7);  // stride 8
  bfly(v0, v4), bfly(v1, v5), bfly(v2, v6), bfly(v3, v7);  // stride 16
  const HadamardF4 sc = {scale, scale, scale, scale};
  v0 *= sc, v1 *= sc, v2 *= sc, v3 *= sc, v4 *= sc, v5 *= sc, v6 *= sc, v7 *= sc;
  std::memcpy(out, &v0, 16), std::memcpy(out + 4, &v1, 16), std::memcpy(out + 8, &v2, 16);
  std::memcpy(out + 12, &v3, 16), std::memcpy(out + 16, &v4, 16), std::memcpy(out + 20, &v5, 16);
  std::memcpy(out + 24, &v6, 16), std::memcpy(out + 28, &v7, 16);
}

void check_block(int block) {
  check(block >= 2 && block <= 64 && (block & (block - 1)) == 0, "internal: a Hadamard block of {}",
        block);
}

// The largest power of two dividing t, at most `block` (1 for odd t).
int tail_block(int64_t t, int block) {
  int b = block;
  while (b > 1 && t % b != 0) b /= 2;
  return b;
}

}  // namespace

void hadamard_rows(const float* src, float* dst, int64_t M, int64_t K, int block) {
  check_block(block);
  const int64_t body = K - K % block;
  const int tb = tail_block(K - body, block);
  const float scale = 1.f / std::sqrt(float(block)), tail_scale = 1.f / std::sqrt(float(tb));
  for (int64_t m = 0; m < M; ++m) {
    const float* in = src + m * K;
    float* row = dst + m * K;
    if (block == 32) {
      // Out of place: the input is read once, with no copy first.
      for (int64_t k = 0; k < body; k += block) rotate_block32(in + k, row + k, scale);
    } else {
      if (in != row) std::memcpy(row, in, size_t(body) * sizeof(float));
      for (int64_t k = 0; k < body; k += block) rotate_block(row + k, block, scale);
    }
    if (in != row) std::memcpy(row + body, in + body, size_t(K - body) * sizeof(float));
    if (tb > 1)
      for (int64_t k = body; k < K; k += tb) rotate_block(row + k, tb, tail_scale);
  }
}

void hadamard_rows(float* x, int64_t M, int64_t K, int block) {
  hadamard_rows(x, x, M, K, block);
}

void hadamard_rows(ThreadPool& pool, const float* src, float* dst, int64_t M, int64_t K,
                   int block) {
  check_block(block);
  const auto rows = [&](int64_t a, int64_t b) {
    hadamard_rows(src + a * K, dst + a * K, b - a, K, block);
  };
  // A decode row is a few microseconds of work: waking the pool would cost more.
  if (M * K < (int64_t(1) << 15)) return rows(0, M);
  pool.parallel_for(M, [&](int64_t m) { rows(m, m + 1); });
}

}  // namespace edgevl::cpu
