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

// Q4: groups of G k, stored in pairs so that a panel is one stream of bytes (decode reads it
// front to back once): the codes of both groups (8G bytes each), one 64-byte line holding the
// 2 x 16 f16 scales, then with zero points one more 64-byte line (2 x 16 uint8, 32 zero
// bytes). An odd last group is a pair of one (its line half used). Every code block stays
// 64-byte aligned (8G is a multiple of 256, a pair a multiple of 64).
struct Q4Layout {
  int64_t G = 32, ng = 1;
  bool zero_point = false;

  constexpr int64_t tail_bytes() const { return zero_point ? 128 : 64; }
  constexpr int64_t pair_bytes() const { return 16 * G + tail_bytes(); }
  // Byte offsets within a panel: group g's code blocks, its 16 f16 scales, its 16 zero points.
  constexpr int64_t codes(int64_t g) const { return g / 2 * pair_bytes() + g % 2 * 8 * G; }
  constexpr int64_t scales(int64_t g) const { return tail(g / 2) + g % 2 * 32; }
  constexpr int64_t zeros(int64_t g) const { return tail(g / 2) + 64 + g % 2 * 16; }
  constexpr int64_t panel_bytes() const {
    return ng / 2 * pair_bytes() + (ng % 2 ? 8 * G + tail_bytes() : 0);
  }

 private:
  constexpr int64_t tail(int64_t pair) const {
    return pair * pair_bytes() + (2 * pair + 1 < ng ? 16 : 8) * G;
  }
};
constexpr Q4Layout q4_layout(int64_t Kp, int64_t G, bool zero_point) {
  return Q4Layout{G, Kp / G, zero_point};
}
constexpr int64_t q4_panel_bytes_kp(int64_t Kp, int64_t G, bool zero_point) {
  return q4_layout(Kp, G, zero_point).panel_bytes();
}
constexpr int64_t q4_packed_bytes(int64_t N, int64_t K, int64_t G, bool zero_point) {
  return round_up(N, kPanelRows) / kPanelRows * q4_panel_bytes_kp(round_up(K, G), G, zero_point);
}

// bf16p: the AMX-BF16 B-tile layout, 16 rows per panel, K padded to 32.
constexpr int64_t bf16p_bytes(int64_t N, int64_t K) {
  return round_up(N, kPanelRows) * round_up(K, 32) * 2;
}

// bf16 blocks: an activation M x K handed between ops as bf16 tiles (backend/cpu/kernels.h,
// matmul_bf16_blocks): 16-row by 32-column blocks, M padded to 16 and K to 32.
constexpr int64_t bf16_blocks_bytes(int64_t M, int64_t K) {
  return round_up(M, 16) * round_up(K, 32) * 2;
}

}  // namespace
}  // namespace edgevl::layout
