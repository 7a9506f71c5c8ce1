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
// flushed), f32 accumulation as the x86 VDPBF16PS contract states.
#include <arm_neon.h>

#include <cstring>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

constexpr int kMR = 4;         // rows of the register tile (a divisor of the 16-row groups)
constexpr int64_t kBlk = 512;  // bf16 elements of one 16-row x 32-k activation block

// Bf16 / f16 row weights from this many rows; fewer take the f32 NEON path, which reads the
// rows without a repack (the x86 bf16 levels' threshold).
constexpr int64_t kMinRows = 8;

// f32 -> bf16 round to nearest even, NaN kept quiet: core/dtype.h f32_to_bf16 bit for bit
// (a private copy: an inline function compiled with this file's flags must not be shared).
uint16x4_t round_bf16(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t nan =
      vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
  const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), odd));
  const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000u));
  return vshrn_n_u32(vbslq_u32(nan, quiet, rounded), 16);
}

// c[r * 16 + l] = sum over k < 32 * kblocks of x(row r, k) w(column l, k), r < MR. x: row 0
// of the tile in the block layout (row r at x + 32 r, the next 32-k block kBlk elements on);
// w: the panel at k = 0 (pair i at w + 32 i).
template <int MR>
void micro(const uint16_t* x, const uint16_t* w, int64_t kblocks, float* c) {
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

void micro_rows(int rows, const uint16_t* x, const uint16_t* w, int64_t kblocks, float* c) {
  switch (rows) {
    case 4: return micro<4>(x, w, kblocks, c);
    case 3: return micro<3>(x, w, kblocks, c);
    case 2: return micro<2>(x, w, kblocks, c);
    default: return micro<1>(x, w, kblocks, c);
  }
}

// Panels per pass: ~256 KB, in the L2 of an A76-class core (256-512 KB) with the activation
// strip beside it.
int64_t panels_per_pass(int64_t Kp) {
  const int64_t n = (256 << 10) / (32 * Kp);
  return n > 1 ? n : 1;
}

// Weight rows 16p..16p+15 of [N][K] (bf16, or f16 rounded to bf16) -> dst in the bf16p panel
// layout, zero past K and N.
void repack_panel(const Bf16GemmArgs& a, int64_t p, uint16_t* dst) {
  std::memset(dst, 0, size_t(16 * a.Kp) * sizeof(uint16_t));
  for (int i = 0; i < 16; ++i) {
    const int64_t n = 16 * p + i;
    if (n >= a.N) break;
    const uint16_t* src = a.w + n * a.K;
    for (int64_t k = 0; k < a.K; k += 4) {
      const int64_t cnt = a.K - k < 4 ? a.K - k : 4;
      alignas(8) uint16_t in[4] = {0, 0, 0, 0}, out[4];
      std::memcpy(in, src + k, size_t(cnt) * sizeof(uint16_t));
      const uint16x4_t h = vld1_u16(in);
      vst1_u16(out, a.w_f16 ? round_bf16(vcvt_f32_f16(vreinterpret_f16_u16(h))) : h);
      for (int64_t e = 0; e < cnt; ++e) dst[((k + e) / 2) * 32 + i * 2 + (k + e) % 2] = out[e];
    }
  }
}

// The tile of rows m0.. (`rows` of them in c) x panel p to the output: y (+ bias, + residual;
// rows < M, columns < N) or the GELU'd bf16 blocks yb (rows of the 16-row group past M zero).
void epilogue(const Bf16GemmArgs& a, float* c, int64_t m0, int rows, int64_t p) {
  const int64_t n = p * 16;
  if (a.yb) {
    static const auto gelu = neon_kernels().gelu_erf;
    for (int r = 0; r < rows; ++r)
      for (int v = 0; v < 4; ++v) {
        const float32x4_t b = a.bias ? vld1q_f32(a.bias + n + 4 * v) : vdupq_n_f32(0.f);
        vst1q_f32(c + r * 16 + 4 * v, vaddq_f32(vld1q_f32(c + r * 16 + 4 * v), b));
      }
    if (rows > 0) gelu(c, c, rows * 16);
    for (int r = 0; r < kMR; ++r) {
      const int64_t m = m0 + r;
      uint16_t* dst = a.yb + (m / 16) * 16 * a.ldyb + (n / 32) * kBlk + (m % 16) * 32 + n % 32;
      for (int v = 0; v < 4; ++v)
        vst1_u16(dst + 4 * v, r < rows ? round_bf16(vld1q_f32(c + r * 16 + 4 * v)) : vdup_n_u16(0));
    }
    return;
  }
  if (n >= a.N) return;
  const int64_t cnt = a.N - n < 16 ? a.N - n : 16;
  for (int r = 0; r < rows; ++r) {
    const int64_t m = m0 + r;
    float v[16];
    std::memcpy(v, c + r * 16, sizeof(v));
    for (int64_t j = 0; j < cnt; ++j) {
      if (a.bias) v[j] += a.bias[n + j];
      // (x W^T + b) + residual, read before y is written (y may be the residual).
      if (a.residual) v[j] += a.residual[m * a.N + n + j];
    }
    std::memcpy(a.y + m * a.N + n, v, size_t(cnt) * sizeof(float));
  }
}

struct Scratch {
  alignas(64) float c[kMR * 16];
  std::vector<uint16_t> wb;  // repacked panels of one pass
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void bf16_gemm_cols(const Bf16GemmArgs& a, int64_t n0, int64_t n1) {
  Scratch& s = scratch();
  const int64_t panel_elems = 16 * a.Kp, kblocks = a.Kp / 32;
  const int64_t pass = panels_per_pass(a.Kp);
  const int64_t P0 = n0 / 16, P1 = (n1 + 15) / 16;
  const int64_t Mp = (a.M + 15) / 16 * 16;
  for (int64_t pp = P0; pp < P1; pp += pass) {
    const int64_t pe = pp + pass < P1 ? pp + pass : P1;
    const uint16_t* wbuf;
    if (a.w_panels) {
      wbuf = a.w + pp * panel_elems;
    } else {
      const size_t need = size_t((pe - pp) * panel_elems + 32);
      if (s.wb.size() < need) s.wb.resize(need);
      uint16_t* buf = align64(s.wb.data());
      for (int64_t p = pp; p < pe; ++p) repack_panel(a, p, buf + (p - pp) * panel_elems);
      wbuf = buf;
    }
    for (int64_t m0 = 0; m0 < Mp; m0 += kMR) {
      const int64_t left = a.M - m0;
      const int rows = left <= 0 ? 0 : left < kMR ? int(left) : kMR;
      if (rows == 0 && !a.yb) break;
      const uint16_t* xa = a.xb + (m0 / 16) * 16 * a.ldx + (m0 % 16) * 32;
      for (int64_t p = pp; p < pe; ++p) {
        if (rows > 0) micro_rows(rows, xa, wbuf + (p - pp) * panel_elems, kblocks, s.c);
        epilogue(a, s.c, m0, rows, p);
      }
    }
  }
}

// x[M][K] -> xb in 16 x 32 blocks (Bf16GemmArgs), rows M.. of the last 16-row group and k >= K
// zero; the rounding of f32_to_bf16, bit for bit.
void to_bf16_rows(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb) {
  const int64_t Mp = (M + 15) / 16 * 16;
  for (int64_t m = 0; m < Mp; ++m) {
    const int64_t row = (m / 16) * 16 * ld + (m % 16) * 32;
    for (int64_t k = 0; k < ld; k += 4) {
      const int64_t cnt = m >= M || K - k <= 0 ? 0 : (K - k < 4 ? K - k : 4);
      alignas(16) float in[4] = {0.f, 0.f, 0.f, 0.f};
      if (cnt == 4)
        std::memcpy(in, x + m * K + k, sizeof(in));
      else if (cnt > 0)
        std::memcpy(in, x + m * K + k, size_t(cnt) * sizeof(float));
      vst1_u16(xb + row + (k / 32) * kBlk + k % 32, round_bf16(vld1q_f32(in)));
    }
  }
}

KernelTable make_table(int64_t min_rows) {
  KernelTable t = neon_kernels();
  t.bf16_gemm = bf16_gemm_cols;
  t.to_bf16_rows = to_bf16_rows;
  t.bf16_gemm_min_rows = min_rows;
  t.bf16_path = "bf16 (bfdot)";
  return t;
}

}  // namespace

const KernelTable& bf16_kernels(bool all_rows) {
  static const KernelTable all = make_table(1);
  static const KernelTable best = make_table(kMinRows);
  return all_rows ? all : best;
}

}  // namespace edgevl::cpu
