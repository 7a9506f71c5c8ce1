// Armv8.2 dot product (FEAT_DotProd: SDOT) kernels of the quantized matmuls. Compiled with
// -march=armv8.2-a+dotprod (the _dotprod suffix); the dispatcher calls them only after
// getauxval(AT_HWCAP) reported asimddp.
//
// W8A8: SDOT by element. One 16-byte load of an activation row holds 16 k = 4 groups of 4, and
// SDOT's lane index picks the group, so 4 weight blocks (16 rows x 4 k each, quant.h) run
// against one load with no broadcast; the template's form (quant_simd.h: a scalar load and a
// DUP per row and 4 k) spends 2 of every ~6 instructions on that. The other kernels (W4A8,
// A16) are the template's over the NEON traits with SDOT as the int8 dot product.
#include "backend/cpu/arm/neon/quant_neon.h"

namespace edgevl::cpu {
namespace {

struct DotprodQ : NeonQ {
  // SDOT needs no temporaries: 5 rows x 1 panel = 20 int32 accumulators + 4 weight vectors + 5
  // broadcasts of the 32 registers. (6 rows need 34: GCC spilled 3 accumulators every 4 k.)
  static constexpr int MR8 = 5;
  // W4A8 prefill requantized to int8 panels (q4_prefill_v), as on the x86 VNNI levels: the
  // W4A8 kernel unpacks the nibbles for every row tile (counted under qemu, qwen2-0.5b layer
  // shape: 5.3 M instructions a prefill token against 1.7 M for W8A8).
  static constexpr int64_t kQ4PrefillMinRows = 32;
  static I dot8(I acc, I w, I xb) {
    return vdotq_s32(acc, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(xb));
  }
  static I dot4(I acc, I c, I xb) { return dot8(acc, c, xb); }  // codes 0..15 are valid s8
};

// acc[v] += block (16 rows x 4 k, rows 4v .. 4v+3 in register v) times k group L of x.
template <int L>
void sdot_block(int32x4_t* acc, const int8_t* w, int8x16_t x) {
  for (int v = 0; v < 4; ++v) acc[v] = vdotq_laneq_s32(acc[v], vld1q_s8(w + 16 * v), x, L);
}

// Rows m0 .. m0 + MR - 1 x panels p0 .. p0 + NP - 1 of a W8A8 call (drive_a8's kernel).
// Activation rows are zero-padded to a multiple of 16 k (QuantTable::ldq_align), so whole
// 16-byte loads stay inside a row; the weights end at Kp / 4 blocks, so the last group runs
// only the blocks that exist.
struct Q8A8Lane {
  const QuantArgs& a;
  bool stream = a.M <= kStreamRows;  // decode: prefetch along the panel streams
  template <int MR, int NP>
  void operator()(int64_t m0, int64_t p0) const {
    const int64_t pb = qt_q8_panel_bytes(a.Kp), nb = a.Kp / 4;
    const uint8_t* wp = a.w + p0 * pb;
    const int8_t* xr = a.xq + m0 * a.ldq;
    int32x4_t acc[MR][NP][4];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < 4; ++v) acc[i][j][v] = vdupq_n_s32(0);
    const auto group = [&]<int Blocks>(int64_t b) {  // blocks b .. b + Blocks - 1
      int8x16_t x[MR];
      for (int i = 0; i < MR; ++i) x[i] = vld1q_s8(xr + i * a.ldq + 4 * b);
      for (int j = 0; j < NP; ++j) {
        const int8_t* w = reinterpret_cast<const int8_t*>(wp + j * pb + b * 64);
        if (stream) NeonQ::prefetch(w + (MR == 1 ? 1 : 4) * kPrefetchAhead);
        for (int i = 0; i < MR; ++i) {
          sdot_block<0>(acc[i][j], w, x[i]);
          if constexpr (Blocks > 1) sdot_block<1>(acc[i][j], w + 64, x[i]);
          if constexpr (Blocks > 2) sdot_block<2>(acc[i][j], w + 128, x[i]);
          if constexpr (Blocks > 3) sdot_block<3>(acc[i][j], w + 192, x[i]);
        }
      }
    };
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) group.template operator()<4>(b);
    if (nb - b == 3) group.template operator()<3>(b);
    if (nb - b == 2) group.template operator()<2>(b);
    if (nb - b == 1) group.template operator()<1>(b);
    // The template's epilogue (quant_simd.h Q8A8), so every level rounds alike.
    for (int j = 0; j < NP; ++j)
      for (int v = 0; v < 4; ++v) {
        const float32x4_t s =
            NeonQ::loadf(reinterpret_cast<const float*>(wp + j * pb + 16 * a.Kp) + 4 * v);
        for (int i = 0; i < MR; ++i) {
          const float32x4_t f =
              NeonQ::mulf(NeonQ::cvt(acc[i][j][v]), NeonQ::mulf(NeonQ::set1f(a.xs[m0 + i]), s));
          store_out<NeonQ>(a, m0 + i, (p0 + j) * 16 + 4 * v, f);
        }
      }
  }
};

// Register tiles: 4 rows x 1 panel = 16 accumulators + 4 activation + 4 weight registers
// (with 5 rows GCC shuffled and spilled registers: 121 instructions per 80 SDOT against 94 per
// 64 here); decode (M = 1) 1 row x 4 panels = 16 accumulators.
void q8_a8_dotprod(const QuantArgs& a, int64_t p0, int64_t p1) {
  Q8A8Lane k{a};
  drive_a8<4, 1, 4>(a, p0, p1, k);
}

}  // namespace

const QuantTable& quant_dotprod_kernels() {
  static const QuantTable t = [] {
    QuantTable q = make_quant_table<DotprodQ>("dotprod");
    q.q8_a8 = q8_a8_dotprod;
    q.ldq_align = 16;  // whole 16-k activation loads (Q8A8Lane)
    return q;
  }();
  return t;
}

}  // namespace edgevl::cpu
