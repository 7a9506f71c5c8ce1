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

void hadamard_rows(float* x, int64_t M, int64_t K, int block) {
  check_block(block);
  const int64_t body = K - K % block;
  const int tb = tail_block(K - body, block);
  const float scale = 1.f / std::sqrt(float(block)), tail_scale = 1.f / std::sqrt(float(tb));
  for (int64_t m = 0; m < M; ++m) {
    float* row = x + m * K;
    for (int64_t k = 0; k < body; k += block) rotate_block(row + k, block, scale);
    if (tb > 1)
      for (int64_t k = body; k < K; k += tb) rotate_block(row + k, tb, tail_scale);
  }
}

void hadamard_rows(ThreadPool& pool, const float* src, float* dst, int64_t M, int64_t K,
                   int block) {
  check_block(block);
  const auto rows = [&](int64_t a, int64_t b) {
    if (src != dst) std::memcpy(dst + a * K, src + a * K, size_t((b - a) * K) * sizeof(float));
    hadamard_rows(dst + a * K, b - a, K, block);
  };
  // A decode row is a few microseconds of work: waking the pool would cost more.
  if (M * K < (int64_t(1) << 15)) return rows(0, M);
  pool.parallel_for(M, [&](int64_t m) { rows(m, m + 1); });
}

}  // namespace edgevl::cpu
