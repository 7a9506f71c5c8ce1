#pragma once
// Operands of the 16-bit GEMM tests (bf16_gemm_test, fp16_gemm_test): uniform activations, bf16
// weights with every 37th eight times larger, and 64-byte aligned buffers (the block and panel
// layouts require them).
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace edgevl::test {

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float amp = 1.f) {
  std::uniform_real_distribution<float> d(-amp, amp);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> w(n);
  const auto f = random_vec(n, rng);
  for (size_t i = 0; i < n; ++i) w[i] = f32_to_bf16(i % 37 == 0 ? 8.f * f[i] : f[i]);
  return w;
}

// 64-byte aligned storage of n elements.
template <class T>
struct Aligned {
  std::vector<T> raw;
  T* p;
  explicit Aligned(size_t n, T fill) : raw(n + 64, fill) {
    p = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(raw.data()) + 63) & ~uintptr_t(63));
  }
};

// Element (m, k) of 16 x 32 activation blocks with row stride ld (Bf16GemmArgs).
inline uint16_t block_at(const uint16_t* b, int64_t ld, int64_t m, int64_t k) {
  return b[(m / 16) * 16 * ld + (k / 32) * 512 + (m % 16) * 32 + k % 32];
}

}  // namespace edgevl::test
