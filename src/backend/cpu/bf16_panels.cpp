#include "backend/cpu/bf16_panels.h"

#include <cstring>

#include "core/packed_layout.h"

namespace edgevl::cpu {

size_t bf16_panel_bytes(int64_t N, int64_t K) {
  return size_t(layout::bf16p_bytes(N, K));
}

void pack_bf16_panels(const uint16_t* w, int64_t N, int64_t K, uint16_t* dst) {
  const int64_t Kp = bf16_panel_k(K);
  // K or N = 0: nothing to write, and dst may be null (memset's pointer must not be, even for 0).
  if (const size_t bytes = bf16_panel_bytes(N, K)) std::memset(dst, 0, bytes);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) dst[bf16_panel_index(n, k, Kp)] = w[n * K + k];
}

void unpack_bf16_panels(const uint16_t* src, int64_t N, int64_t K, int64_t n0, int64_t n1,
                        uint16_t* w) {
  const int64_t Kp = bf16_panel_k(K);
  for (int64_t n = n0; n < n1 && n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w[(n - n0) * K + k] = src[bf16_panel_index(n, k, Kp)];
}

}  // namespace edgevl::cpu
