// Armv8.6 int8 matrix multiply (FEAT_I8MM: SMMLA) for the W8A8 GEMM and the W4A8 prefill.
// Compiled with -march=...+i8mm (the _i8mm suffix); the dispatcher calls it only after
// getauxval(AT_HWCAP2) reported i8mm.
//
// SMMLA multiplies a 2 x 8 int8 block by an 8 x 2 one into a 2 x 2 int32 block: 32
// multiply-adds per instruction, twice SDOT's, but both operands must hold 8 consecutive k of
// two rows. The Q8 panel layout (quant.h: blocks of 16 rows x 4 k) holds 4, so each panel is
// repacked once per call (two blocks zipped: rows 2c, 2c+1 x 8 k per 16 bytes, into a
// thread-local buffer that stays in L1/L2) and every row tile then sweeps over it. An
// activation operand is 8 k of two rows, two 8-byte loads: the table asks for rows padded with
// zeros to a multiple of 8 k and an even row count (QuantTable::ldq_align, row_align). A decode
// row (M = 1) would waste half of every SMMLA: those calls, and the A16 ones, go to the dotprod
// table.
//
// Integer accumulation is exact and the scaling is the template's (quant_simd.h Q8A8), so the
// results are bit-identical to the dotprod and scalar kernels.
#include <vector>

#include "backend/cpu/arm/neon/quant_neon.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

// A Q8 panel (16 rows, blocks of 16 rows x 4 k) -> SMMLA operands: step s (k = 8s .. 8s+7), row
// pair c (rows 2c, 2c+1) at dst + s * 128 + c * 16. ZIP1/ZIP2 of the 32-bit lanes of blocks 2s
// and 2s+1 put each row's two 4-k words side by side. An odd last block pairs with zeros.
void repack_panel(const uint8_t* wp, int64_t Kp, int64_t ks, int8_t* dst) {
  const int64_t nb = Kp / 4;
  const int32x4_t zero = vdupq_n_s32(0);
  for (int64_t s = 0; s < ks; ++s) {
    const int32x4x4_t b0 = vld1q_s32_x4(reinterpret_cast<const int32_t*>(wp + 2 * s * 64));
    const bool full = 2 * s + 1 < nb;
    int32x4x4_t b1 = {{zero, zero, zero, zero}};
    if (full) b1 = vld1q_s32_x4(reinterpret_cast<const int32_t*>(wp + (2 * s + 1) * 64));
    int32x4x4_t lo, hi;
    for (int q = 0; q < 4; ++q) {  // rows 4q .. 4q+3
      lo.val[q] = vzip1q_s32(b0.val[q], b1.val[q]);
      hi.val[q] = vzip2q_s32(b0.val[q], b1.val[q]);
    }
    int32_t* d = reinterpret_cast<int32_t*>(dst + s * 128);
    vst1q_s32_x4(d, int32x4x4_t{{lo.val[0], hi.val[0], lo.val[1], hi.val[1]}});
    vst1q_s32_x4(d + 16, int32x4x4_t{{lo.val[2], hi.val[2], lo.val[3], hi.val[3]}});
  }
}

// MP row pairs (rows 2 r0 .. 2 (r0 + MP) - 1) x one repacked panel: 8 SMMLA accumulators per
// pair (a 2 x 2 block of outputs each). MP = 2: 16 accumulators + 8 weight operands + 2
// activation operands of the 32 vector registers (MP = 3 needs 35: GCC spilled 3 accumulators
// per step, 51 instructions per 768 multiply-adds against 30 per 512 here).
template <int MP>
void smmla_tile(const QuantArgs& a, int64_t r0, int64_t ks, const int8_t* wr, const float* scales,
                int64_t p) {
  int32x4_t acc[MP][8];
#pragma GCC unroll 8
  for (int i = 0; i < MP; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) acc[i][c] = vdupq_n_s32(0);
  const int8_t* xr = a.xq + 2 * r0 * a.ldq;
  const int64_t ldq = a.ldq;
  for (int64_t s = 0; s < ks; ++s, xr += 8, wr += 128) {
    int8x16_t x[MP];
#pragma GCC unroll 8
    for (int i = 0; i < MP; ++i)
      x[i] = vcombine_s8(vld1_s8(xr + 2 * i * ldq), vld1_s8(xr + (2 * i + 1) * ldq));
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const int8x16_t w = vld1q_s8(wr + 16 * c);
#pragma GCC unroll 8
      for (int i = 0; i < MP; ++i) acc[i][c] = vmmlaq_s32(acc[i][c], x[i], w);
    }
  }
  // acc[i][c] = [(m, 2c), (m, 2c+1), (m+1, 2c), (m+1, 2c+1)] with m = 2 (r0 + i): the 64-bit
  // zips of two neighbours give 4 consecutive outputs of row m (ZIP1) and of row m+1 (ZIP2).
  alignas(16) int32_t rows[2 * MP][16];
#pragma GCC unroll 8
  for (int i = 0; i < MP; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < 4; ++v) {
      const int64x2_t e = vreinterpretq_s64_s32(acc[i][2 * v]);
      const int64x2_t o = vreinterpretq_s64_s32(acc[i][2 * v + 1]);
      vst1q_s32(rows[2 * i] + 4 * v, vreinterpretq_s32_s64(vzip1q_s64(e, o)));
      vst1q_s32(rows[2 * i + 1] + 4 * v, vreinterpretq_s32_s64(vzip2q_s64(e, o)));
    }
  for (int r = 0; r < 2 * MP && 2 * r0 + r < a.M; ++r) {
    const int64_t m = 2 * r0 + r;
    for (int v = 0; v < 4; ++v) {
      const float32x4_t s = NeonQ::loadf(scales + 4 * v);
      const float32x4_t f = NeonQ::mulf(NeonQ::cvt(vld1q_s32(rows[r] + 4 * v)),
                                        NeonQ::mulf(NeonQ::set1f(a.xs[m]), s));
      store_out<NeonQ>(a, m, p * 16 + 4 * v, f);
    }
  }
}

// All rows against output panel p, whose Q8 form (16 * Kp codes then the 16 scales) is q8.
void panel_all_rows(const QuantArgs& a, int64_t ks, const uint8_t* q8, int64_t p, int8_t* wr) {
  repack_panel(q8, a.Kp, ks, wr);
  const float* scales = reinterpret_cast<const float*>(q8 + 16 * a.Kp);
  const int64_t pairs = (a.M + 1) / 2;
  int64_t r = 0;
  for (; r + 2 <= pairs; r += 2) smmla_tile<2>(a, r, ks, wr, scales, p);
  if (r < pairs) smmla_tile<1>(a, r, ks, wr, scales, p);
}

int8_t* repack_buffer(int64_t ks) {
  thread_local std::vector<int8_t> buf;
  if (buf.size() < size_t(ks * 128 + 64)) buf.resize(size_t(ks * 128 + 64));
  return align64(buf.data());
}

void q8_a8_i8mm(const QuantArgs& a, int64_t p0, int64_t p1) {
  const int64_t ks = (a.Kp + 7) / 8;
  int8_t* wr = repack_buffer(ks);
  const int64_t pb = qt_q8_panel_bytes(a.Kp);
  for (int64_t p = p0; p < p1; ++p) panel_all_rows(a, ks, a.w + p * pb, p, wr);
}

// W4A8 prefill (QuantTable::q4_prefill): each Q4 panel requantized to a Q8 panel by the
// template's requant_q4_panel_v (the arithmetic every ISA's route shares), then SMMLA.
void q4_prefill_i8mm(const QuantArgs& a, int64_t p0, int64_t p1) {
  const int64_t ks = (a.Kp + 7) / 8;
  int8_t* wr = repack_buffer(ks);
  thread_local std::vector<uint8_t> q8;
  const int64_t pb = qt_q8_panel_bytes(a.Kp);
  if (q8.size() < size_t(pb + 64)) q8.resize(size_t(pb + 64));
  uint8_t* panel = align64(q8.data());
  for (int64_t p = p0; p < p1; ++p) {
    requant_q4_panel_v<NeonQ>(a, p, panel);
    panel_all_rows(a, ks, panel, p, wr);
  }
}

}  // namespace

// W4A8 calls of at least this many rows take the requantized route (SMMLA at the W8A8 rate);
// below it the dotprod W4A8 kernel, exact to the W4A8 definition. The same threshold as the
// x86 VNNI tables; not tuned on AArch64 hardware.
constexpr int64_t kI8mmQ4PrefillMinRows = 32;

const QuantTable& quant_i8mm_kernels() {
  static const QuantTable t = [] {
    const QuantTable& dot = quant_dotprod_kernels();
    QuantTable q = dot;
    q.name = "i8mm+dotprod";
    q.q8_a8 = q8_a8_i8mm;
    q.fallback = &dot;  // decode rows and A16 calls
    q.min_rows_a8 = 2;
    q.ldq_align = 8;  // whole 8-k operands, zero past Kp
    q.row_align = 2;  // whole row pairs, a zero row after an odd M
    q.q4_prefill = q4_prefill_i8mm;
    q.q4_prefill_min_rows = kI8mmQ4PrefillMinRows;
    return q;
  }();
  return t;
}

}  // namespace edgevl::cpu
