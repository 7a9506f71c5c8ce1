// Armv8.2 half-precision arithmetic (FEAT_FP16: FMLA .8h) versions of the bf16 GEMM entry points
// (Bf16GemmArgs in kernel_table.h, every form but the f16 split x_lo) and to_bf16_rows, for the
// vision tower. Compiled with -march=armv8.2-a+fp16 (the _fp16 suffix); the dispatcher calls it
// only after getauxval(AT_HWCAP) reported fphp and asimdhp.
//
// Why: the cores of most phones in use (Cortex-A75/A76/A77/A78/X1, Neoverse N1) have FP16
// arithmetic and dot products but no BF16, so without this the bf16 tower runs f32 FMA there
// (4 multiply-adds an instruction, plus the bf16 -> f32 widening of every weight). FMLA .8h
// does 8.
//
// Layout: an f16 panel holds, per k, its 16 columns in a row (32 bytes), 32 k a block of 512
// elements like the activation blocks. The vision tower's bf16p panels are converted into it
// per pass (a pass is ~256 KB of panels, reused by every 4-row tile of 256 to 1025 rows); row
// weights (bf16, or f16 copied as they are) likewise.
//
// Register tile: 4 rows x 16 columns. Per k: two weight loads, 8 FMLA by element (the k's lane
// of one 8-k activation register per row). 8 f16 accumulators + 16 f32 + 4 activation + 2
// weight registers = 30 of 32.
//
// Numerics, the contract the test checks bit for bit: x is rounded to f16 (nearest even,
// saturated at +-65504, NaN kept), weights likewise from bf16 (exact for |w| >= 2^-14); for
// each output and each 32-k block in order, h = 0, then h = f16(h + x_k w_k) for k ascending
// (one rounding per FMLA), then acc = acc + f32(h) in f32; bias and residual are added in f32.
// A block's sum is thus within ~2^-11 x 32 of its magnitude in the worst case (random-signed
// terms: ~2^-11 x sqrt(32)), the same order as the bf16 rounding of x and w on the other
// levels, and the f32 sum across blocks keeps long K from growing it. The f16 range is why the
// dispatcher gives it only the vision tower's weights (bf16p, KernelTable::bf16_gemm_panels_only):
// their inputs are LayerNorm'd, GELU'd or attention rows of magnitude ~10, while an LLM's
// activations reach 10^4 and more (massive activations).
#include "backend/cpu/arm/gemm16_neon.h"

namespace edgevl::cpu {
namespace {

// acc + w * x[L], FMLA by element. GCC 12 expands vfmaq_laneq_f16 into a DUP of the lane and
// a vector FMLA (the disassembly of this file had 4 DUPs for every 8 FMLAs); the by-element form
// needs its indexed register in V0-V15, asm's "x".
template <int L>
float16x8_t fmla_lane(float16x8_t acc, float16x8_t w, float16x8_t x) {
  asm("fmla %0.8h, %1.8h, %2.h[%3]" : "+w"(acc) : "w"(w), "x"(x), "i"(L));
  return acc;
}

// The level's traits (gemm16_driver.h).
struct Fp16 : Gemm16Neon<Fp16> {
  static constexpr const char* kPath = "fp16 (fmla .8h)";

  static uint16x4_t round(float32x4_t v) {
    const float32x4_t lim = vdupq_n_f32(65504.f);
    // FMAX / FMIN return a NaN operand (quieted), so NaN stays NaN.
    return vreinterpret_u16_f16(vcvt_f16_f32(vminq_f32(vmaxq_f32(v, vnegq_f32(lim)), lim)));
  }

  static constexpr bool kPanelsInPlace = false;

  // Columns 16p..16p+15 of the weights (bf16p panels, or [N][K] rows of bf16 / f16) -> dst as
  // an f16 panel, zero past K and N.
  static void repack_panel(const Bf16GemmArgs& a, int64_t p, uint16_t* dst) {
    const auto widen = [](uint16x4_t bf16) { return vreinterpretq_f32_u32(vshll_n_u16(bf16, 16)); };
    if (a.w_panels) {
      // A bf16p panel: per k pair, 16 words (k even, k odd) of one column each; LD2 splits a
      // row of 8 words into the 8 columns at k even and at k odd.
      const uint16_t* src = a.w + p * 16 * a.Kp;
      for (int64_t kp = 0; kp < a.Kp / 2; ++kp) {
        for (int half = 0; half < 2; ++half) {
          const uint16x8x2_t eo = vld2q_u16(src + 32 * kp + 16 * half);
          for (int odd = 0; odd < 2; ++odd) {
            uint16_t* d = dst + (2 * kp + odd) * 16 + 8 * half;
            vst1_u16(d, round(widen(vget_low_u16(eo.val[odd]))));
            vst1_u16(d + 4, round(widen(vget_high_u16(eo.val[odd]))));
          }
        }
      }
      return;
    }
    gemm16_repack_rows<Fp16>(a, p, dst);
  }
  // Row weights: f16 as they are, bf16 rounded to f16 (saturated).
  static uint16x4_t from_row(uint16x4_t h, bool f16) {
    return f16 ? h : round(vreinterpretq_f32_u32(vshll_n_u16(h, 16)));
  }
  static int64_t panel_index(int i, int64_t k) { return k * 16 + i; }

  // c[r * 16 + l] = the contract's sum of x(row r, k) w(column l, k) over k < 32 * kblocks,
  // r < MR. x: row 0 of the tile in the block layout; w: the f16 panel at k = 0.
  template <int MR>
  static void micro(const uint16_t* x, const uint16_t* w, int64_t kblocks, float* c) {
    float32x4_t acc[MR][4];
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < 4; ++v) acc[r][v] = vdupq_n_f32(0.f);
    const auto* wh = reinterpret_cast<const float16_t*>(w);
    const auto* xh = reinterpret_cast<const float16_t*>(x);
    for (int64_t kb = 0; kb < kblocks; ++kb, xh += kBlk, wh += kBlk) {
      float16x8_t h[MR][2];
      for (int r = 0; r < MR; ++r) h[r][0] = h[r][1] = vdupq_n_f16(0);
      for (int q = 0; q < 4; ++q) {  // 8 k: one activation register per row, a lane per k
        float16x8_t xv[MR];
        for (int r = 0; r < MR; ++r) xv[r] = vld1q_f16(xh + 32 * r + 8 * q);
        const auto step = [&]<int L>() {
          const float16_t* wk = wh + 16 * (8 * q + L);
          const float16x8_t w0 = vld1q_f16(wk), w1 = vld1q_f16(wk + 8);
          for (int r = 0; r < MR; ++r) {
            h[r][0] = fmla_lane<L>(h[r][0], w0, xv[r]);
            h[r][1] = fmla_lane<L>(h[r][1], w1, xv[r]);
          }
        };
        step.template operator()<0>();
        step.template operator()<1>();
        step.template operator()<2>();
        step.template operator()<3>();
        step.template operator()<4>();
        step.template operator()<5>();
        step.template operator()<6>();
        step.template operator()<7>();
      }
      for (int r = 0; r < MR; ++r)
        for (int j = 0; j < 2; ++j) {
          acc[r][2 * j] = vaddq_f32(acc[r][2 * j], vcvt_f32_f16(vget_low_f16(h[r][j])));
          acc[r][2 * j + 1] = vaddq_f32(acc[r][2 * j + 1], vcvt_high_f32_f16(h[r][j]));
        }
    }
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < 4; ++v) vst1q_f32(c + r * 16 + 4 * v, acc[r][v]);
  }
  static void finish_table(KernelTable& t, int64_t) { t.bf16_gemm_panels_only = true; }
};

}  // namespace

const KernelTable& fp16_kernels(bool every_row) {
  return gemm16_kernels<Fp16>(every_row);
}

}  // namespace edgevl::cpu
