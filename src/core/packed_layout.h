#pragma once
// Byte sizes of the packed weight layouts that a context binary stores, in one place for the
// format (which checks every tensor's size at load), the compiler (which packs) and the
// kernels (which walk the panels). The layouts themselves are defined beside their kernels:
// Q8 / Q4 panels in backend/cpu/quant.h, bf16p in backend/cpu/bf16_panels.h.
//
// Internal linkage on purpose: files compiled with ISA flags (AVX-512, AMX) include this, and
// an inline function with external linkage could leave the linker an AVX-512 copy to use
// everywhere.
#include <cstdint>

namespace edgevl::layout {
namespace {

constexpr int64_t kPanelRows = 16;      // output rows per panel (every packed layout)
constexpr int64_t kMaxQuantK = 131072;  // int32 accumulation limit of the int8 kernels

constexpr int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// Q8: int8 in "16 rows x 4 k" blocks, then 16 f32 scales and 16 int32 row sums per panel.
constexpr int64_t q8_padded_k(int64_t K) {
  return round_up(K, 4);
}
constexpr int64_t q8_panel_bytes_kp(int64_t Kp) {
  return 16 * Kp + 128;
}
constexpr int64_t q8_packed_bytes(int64_t N, int64_t K) {
  return round_up(N, kPanelRows) / kPanelRows * q8_panel_bytes_kp(q8_padded_k(K));
}

// Q4: nibbles in groups of G along k, then 16 f32 scales per group, then (zero points only)
// 16 uint8 zero points per group padded to 64 bytes.
constexpr int64_t q4_zero_bytes(int64_t groups, bool zero_point) {
  return zero_point ? round_up(16 * groups, 64) : 0;
}
constexpr int64_t q4_panel_bytes_kp(int64_t Kp, int64_t G, bool zero_point) {
  return 8 * Kp + 64 * (Kp / G) + q4_zero_bytes(Kp / G, zero_point);
}
constexpr int64_t q4_packed_bytes(int64_t N, int64_t K, int64_t G, bool zero_point) {
  return round_up(N, kPanelRows) / kPanelRows * q4_panel_bytes_kp(round_up(K, G), G, zero_point);
}

// bf16p: the AMX-BF16 B-tile layout, 16 rows per panel, K padded to 32.
constexpr int64_t bf16p_bytes(int64_t N, int64_t K) {
  return round_up(N, kPanelRows) * round_up(K, 32) * 2;
}

}  // namespace
}  // namespace edgevl::layout
