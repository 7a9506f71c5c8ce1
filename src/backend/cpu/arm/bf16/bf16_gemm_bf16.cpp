// Armv8.6 BFloat16 (FEAT_BF16: BFDOT) versions of the bf16 GEMM entry points (Bf16GemmArgs in
// kernel_table.h: every form but the f16 split x_lo) and to_bf16_rows, for the vision tower's
// bf16 matmuls. Compiled with -march=...+bf16 (the _bf16 suffix); the dispatcher calls it
// only after getauxval(AT_HWCAP2) reported bf16. The attention kernel of the x86 bf16 levels
// (self_attention_bf16) is not here: callers keep the f32 path for it.
//
// Layout: a bf16p panel (bf16_panels.h) stores, per 64 bytes, 16 output columns x one k pair,
// each 32-bit word (k even, k odd) of one column. BFDOT by element multiplies four such words
// (4 columns) by one pair of a second register and adds both products to each f32 lane, so
// the panels are read in place: 4 loads give a k pair's 16 columns, and one 16-byte load of
// an activation row gives 4 pairs, picked by lane. Bf16 / f16 row weights are repacked into
// the panel layout per pass. (BFMMLA does twice the multiply-adds per instruction but wants
// 4 consecutive k of two columns in a register: both operands would need zips, as SMMLA's do.)
//
// Register tile: 4 rows x 16 columns = 16 accumulators; per k pair one 4-register weight load
// and 16 BFDOT. Numerics: products of bf16 are exact; BFDOT adds the pair to the accumulator
// with its own rounding (Arm's BFloat16 rules: round to odd for the pair sum, denormals
// flushed), f32 accumulation as the x86 VDPBF16PS contract states. The passes over column
// panels and the epilogues are gemm16_driver.h's, shared with the other 16-bit levels.
#include "backend/cpu/arm/gemm16_neon.h"

namespace edgevl::cpu {
namespace {

// The level's traits (gemm16_driver.h).
struct Bfdot : Gemm16Neon<Bfdot> {
  static constexpr const char* kPath = "bf16 (bfdot)";

  // f32 -> bf16 round to nearest even, NaN kept quiet: core/dtype.h f32_to_bf16 bit for bit
  // (a private copy: an inline function compiled with this file's flags must not be shared).
  static uint16x4_t round(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t nan =
        vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), odd));
    const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000u));
    return vshrn_n_u32(vbslq_u32(nan, quiet, rounded), 16);
  }

  static constexpr bool kPanelsInPlace = true;

  // Row weights (bf16, or f16 rounded to bf16) -> the bf16p panel layout.
  static uint16x4_t from_row(uint16x4_t h, bool f16) {
    return f16 ? round(vcvt_f32_f16(vreinterpret_f16_u16(h))) : h;
  }
  static int64_t panel_index(int i, int64_t k) { return (k / 2) * 32 + i * 2 + k % 2; }
  static void repack_panel(const Bf16GemmArgs& a, int64_t p, uint16_t* dst) {
    gemm16_repack_rows<Bfdot>(a, p, dst);
  }

  // c[r * 16 + l] = sum over k < 32 * kblocks of x(row r, k) w(column l, k), r < MR. x: row 0
  // of the tile in the block layout (row r at x + 32 r, the next 32-k block kBlk elements on);
  // w: the panel at k = 0 (pair i at w + 32 i).
  template <int MR>
  static void micro(const uint16_t* x, const uint16_t* w, int64_t kblocks, float* c) {
    float32x4_t acc[MR][4];
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < 4; ++v) acc[r][v] = vdupq_n_f32(0.f);
    for (int64_t kb = 0; kb < kblocks; ++kb, x += kBlk, w += kBlk) {
      for (int q = 0; q < 4; ++q) {  // 8 k: four pairs, one lane each of the activation register
        bfloat16x8_t xv[MR];
        for (int r = 0; r < MR; ++r) xv[r] = vreinterpretq_bf16_u16(vld1q_u16(x + 32 * r + 8 * q));
        const auto step = [&]<int L>() {
          const uint16x8x4_t raw = vld1q_u16_x4(w + 32 * (4 * q + L));
          for (int v = 0; v < 4; ++v) {
            const bfloat16x8_t wv = vreinterpretq_bf16_u16(raw.val[v]);
            for (int r = 0; r < MR; ++r) acc[r][v] = vbfdotq_laneq_f32(acc[r][v], wv, xv[r], L);
          }
        };
        step.template operator()<0>();
        step.template operator()<1>();
        step.template operator()<2>();
        step.template operator()<3>();
      }
    }
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < 4; ++v) vst1q_f32(c + r * 16 + 4 * v, acc[r][v]);
  }
};

}  // namespace

const KernelTable& bf16_kernels(bool every_row) {
  return gemm16_kernels<Bfdot>(every_row);
}

}  // namespace edgevl::cpu
