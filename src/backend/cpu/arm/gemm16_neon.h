#pragma once
// The NEON half of the AArch64 16-bit GEMM levels' traits (gemm16_driver.h), shared by bf16 on
// BFDOT (arm/bf16) and fp16 on FMLA .8h (arm/fp16): epilogue vectors of 16 floats, the rounding
// of activations and outputs into the level's 16-bit format, and the repack of row weights.
// Include only from files under src/backend/cpu/arm/<level>/ (internal linkage: each file
// compiles its own copy with its own flags).
//
// A level F (its traits derive from Gemm16Neon<F>) provides kPath, kPanelsInPlace,
// repack_panel and
//   micro<MR>(x, w, kblocks, c)     the tile product (see tile below)
//   uint16x4_t round(float32x4_t)   f32 -> the 16-bit activation format (blocks, GELU output)
//   from_row(h, f16), panel_index(i, k)   for gemm16_repack_rows: four row weights (f16 with
//                                   f16, else bf16) into its format, and where element (row i
//                                   of the panel, k) goes in its panel layout
#include <arm_neon.h>

#include <cstring>

#include "backend/cpu/gemm16_driver.h"
#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
namespace {

template <class F>
struct Gemm16Neon : Gemm16Defaults {
  // Register tile: 4 rows x 16 columns (16 f32 accumulators; with fp16's 8 f16 ones, the
  // activations and the weights 30 of the 32 registers).
  static constexpr int kMR = 4, kMaxNP = 1;
  using RowTiles = Gemm16Rows<1, 2, 3, 4>;
  // Panels per pass: ~256 KB, in the L2 of an A76-class core (256-512 KB) with the activation
  // strip beside it.
  static constexpr int64_t kPassBytes = 256 << 10;
  // Row weights from this many rows; fewer take the f32 NEON path, which reads the rows without
  // a repack (the x86 bf16 levels' threshold).
  static constexpr int64_t kMinRows = 8;
  static KernelTable base_table() { return neon_kernels(); }

  // F::micro<MR>(x, w, kblocks, c): c[r * 16 + l] = row r < MR of x (the block layout) . column
  // l of panel w.
  template <int MR, int NP, bool>
  static Gemm16Acc tile(const Bf16GemmArgs&, const Gemm16Tile& t, float* c) {
    F::template micro<MR>(t.x, t.w, t.kblocks, c);
    return Gemm16Acc::kSum;
  }

  struct V16 {
    float32x4_t v[4];
  };
  static V16 zero() {
    return {{vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f)}};
  }
  static V16 load(const float* p) {
    return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}};
  }
  static V16 load_n(const float* p, int64_t cnt) {
    if (cnt == 16) return load(p);
    float t[16] = {};
    std::memcpy(t, p, size_t(cnt) * sizeof(float));
    return load(t);
  }
  static V16 add(V16 a, V16 b) {
    for (int i = 0; i < 4; ++i) a.v[i] = vaddq_f32(a.v[i], b.v[i]);
    return a;
  }
  static void store(float* p, V16 v) {
    for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, v.v[i]);
  }
  static void store_n(float* p, V16 v, int64_t cnt) {
    if (cnt == 16) return store(p, v);
    float t[16];
    store(t, v);
    std::memcpy(p, t, size_t(cnt) * sizeof(float));
  }
  static void store_rounded(uint16_t* dst, V16 v) {
    for (int i = 0; i < 4; ++i) vst1_u16(dst + 4 * i, F::round(v.v[i]));
  }
  static auto gelu_fn() { return neon_kernels().gelu_erf; }

  // Activation rows, four at a time.
  static constexpr int kRowWide = 4, kRowTail = 4;
  static void rows_wide(const float* x, uint16_t* dst, uint16_t*) {
    vst1_u16(dst, F::round(vld1q_f32(x)));
  }
  static void rows_tail(const float* x, int64_t cnt, uint16_t* dst, uint16_t*) {
    alignas(16) float in[4] = {0.f, 0.f, 0.f, 0.f};
    if (cnt > 0) std::memcpy(in, x, size_t(cnt) * sizeof(float));
    vst1_u16(dst, F::round(vld1q_f32(in)));
  }
};

// Weight rows 16p..16p+15 of [N][K] (bf16, or f16 with a.w_f16) into dst, zero past K and N:
// element (row i of the panel, k) at F::panel_index(i, k), converted four at a time by
// F::from_row(elements, a.w_f16).
template <class F>
void gemm16_repack_rows(const Bf16GemmArgs& a, int64_t p, uint16_t* dst) {
  std::memset(dst, 0, size_t(16 * a.Kp) * sizeof(uint16_t));
  for (int i = 0; i < 16; ++i) {
    const int64_t n = 16 * p + i;
    if (n >= a.N) break;
    const uint16_t* src = a.w + n * a.K;
    for (int64_t k = 0; k < a.K; k += 4) {
      const int64_t cnt = a.K - k < 4 ? a.K - k : 4;
      alignas(8) uint16_t in[4] = {0, 0, 0, 0}, out[4];
      std::memcpy(in, src + k, size_t(cnt) * sizeof(uint16_t));
      vst1_u16(out, F::from_row(vld1_u16(in), a.w_f16));
      for (int64_t e = 0; e < cnt; ++e) dst[F::panel_index(i, k + e)] = out[e];
    }
  }
}

}  // namespace
}  // namespace edgevl::cpu
