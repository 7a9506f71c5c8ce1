#pragma once
// The driver shared by the AArch64 16-bit GEMMs (bf16 on BFDOT in arm/bf16, fp16 on FMLA .8h in
// arm/fp16): the Bf16GemmArgs contract of kernel_table.h with the activation blocks in the
// level's own 16-bit format, column panels in passes that fit L2, a 4-row register tile and
// the epilogues (bias, residual, GELU into the next matmul's blocks). Include only from files
// under src/backend/cpu/arm/<level>/: everything is in an anonymous namespace, so each file
// gets its own copy compiled with its own flags.
//
// A format F provides:
//   uint16x4_t round(float32x4_t)   f32 -> the 16-bit activation format (blocks, GELU output)
//   bool kPanelsInPlace             bf16p panels (bf16_panels.h) are its weight layout as is
//   repack_panel(a, p, dst)         weight columns 16p..16p+15 into its layout (16 * Kp
//                                   elements, one 32-k block every 512), zero past K and N;
//                                   for row weights gemm16_repack_rows with from_row and
//                                   panel_index
//   micro<MR>(x, w, kblocks, c)     c[r * 16 + l] = row r < MR of x (block layout, row 0 at
//                                   x, the next 32-k block kBlk on) . column l of panel w
#include <arm_neon.h>

#include <cstring>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

constexpr int kMR = 4;         // rows of the register tile (a divisor of the 16-row groups)
constexpr int64_t kBlk = 512;  // elements of one 16-row x 32-k activation block

// Panels per pass: ~256 KB, in the L2 of an A76-class core (256-512 KB) with the activation
// strip beside it.
inline int64_t panels_per_pass(int64_t Kp) {
  const int64_t n = (256 << 10) / (32 * Kp);
  return n > 1 ? n : 1;
}

// The tile of rows m0.. (`rows` of them in c) x panel p to the output: y (+ bias, + residual;
// rows < M, columns < N) or the GELU'd blocks yb (rows of the 16-row group past M zero).
template <class F>
void gemm16_epilogue(const Bf16GemmArgs& a, float* c, int64_t m0, int rows, int64_t p) {
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
        vst1_u16(dst + 4 * v, r < rows ? F::round(vld1q_f32(c + r * 16 + 4 * v)) : vdup_n_u16(0));
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

// The micro kernel for a tile of 1..kMR rows.
template <class F>
void gemm16_micro_rows(int rows, const uint16_t* x, const uint16_t* w, int64_t kblocks, float* c) {
  switch (rows) {
    case 4: return F::template micro<4>(x, w, kblocks, c);
    case 3: return F::template micro<3>(x, w, kblocks, c);
    case 2: return F::template micro<2>(x, w, kblocks, c);
    default: return F::template micro<1>(x, w, kblocks, c);
  }
}

// Kernel table bf16_gemm: output columns [n0, n1).
template <class F>
void gemm16_cols(const Bf16GemmArgs& a, int64_t n0, int64_t n1) {
  struct Scratch {
    alignas(64) float c[kMR * 16];
    std::vector<uint16_t> wb;  // repacked panels of one pass
  };
  thread_local Scratch s;
  const int64_t panel_elems = 16 * a.Kp, kblocks = a.Kp / 32;
  const int64_t pass = panels_per_pass(a.Kp);
  const int64_t P0 = n0 / 16, P1 = (n1 + 15) / 16;
  const int64_t Mp = (a.M + 15) / 16 * 16;
  for (int64_t pp = P0; pp < P1; pp += pass) {
    const int64_t pe = pp + pass < P1 ? pp + pass : P1;
    const uint16_t* wbuf;
    if (a.w_panels && F::kPanelsInPlace) {
      wbuf = a.w + pp * panel_elems;
    } else {
      const size_t need = size_t((pe - pp) * panel_elems + 32);
      if (s.wb.size() < need) s.wb.resize(need);
      uint16_t* buf = align64(s.wb.data());
      for (int64_t p = pp; p < pe; ++p) F::repack_panel(a, p, buf + (p - pp) * panel_elems);
      wbuf = buf;
    }
    for (int64_t m0 = 0; m0 < Mp; m0 += kMR) {
      const int64_t left = a.M - m0;
      const int rows = left <= 0 ? 0 : left < kMR ? int(left) : kMR;
      if (rows == 0 && !a.yb) break;
      const uint16_t* xa = a.xb + (m0 / 16) * 16 * a.ldx + (m0 % 16) * 32;
      for (int64_t p = pp; p < pe; ++p) {
        if (rows > 0) gemm16_micro_rows<F>(rows, xa, wbuf + (p - pp) * panel_elems, kblocks, s.c);
        gemm16_epilogue<F>(a, s.c, m0, rows, p);
      }
    }
  }
}

// Kernel table to_bf16_rows: x[M][K] -> xb in 16 x 32 blocks (Bf16GemmArgs) in F's format, rows
// M.. of the last 16-row group and k >= K zero.
template <class F>
void gemm16_rows(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb) {
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
      vst1_u16(xb + row + (k / 32) * kBlk + k % 32, F::round(vld1q_f32(in)));
    }
  }
}

}  // namespace
}  // namespace edgevl::cpu
