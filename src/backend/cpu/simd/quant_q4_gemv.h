#pragma once
// W4A8 decode GEMV for levels whose Q4 x A8 products go through int16 sums (Q::kQ4Blocks16 ==
// 4: vpmaddubsw without VNNI), written so that it streams instead of computing: one activation
// row in steps of NPV4 panels; decode batches in tiles of up to 4 rows x 1 panel (2.28 -> 1.49
// instructions per weight byte at 4 rows). The general register-tile kernel (quant_simd.h Q4A8)
// keeps its int16, int32 and float accumulators of 4 panels in arrays that GCC spilled every block
// on AVX2 (16 ymm), which made W4A8 cost as many instructions per call as W8A8 for half the bytes
// (callgrind, K=896 N=4864, 1 thread: 1.28 M instructions a call, 0.52 per weight byte, against
// W8A8's 0.28; this kernel: 0.94 M, 0.38 per byte).
//
// Here the loops are shaped for the registers: per 32 k (a chunk of 4 blocks) the int16 sums of
// the NP panels' 2*NP vectors live in registers with the two activation broadcasts and the
// nibble mask; the int32 group sums (G > 32 only) and the float row accumulators are touched
// once per chunk / group, so they may sit in memory. The arithmetic is the W4A8 definition of
// quant.h, integer-exact, with the float scaling in the same order as the scalar reference:
// acc_g = sum_k xq * c - z * sum_k xq, y += float(acc_g) * (a * s_g), group by group.
//
// Include only from quant_simd.h (anonymous namespace: each ISA file gets its own copy).
#include <cstdint>
#include <cstring>

#include "backend/cpu/quant_table.h"

namespace edgevl::cpu {
namespace {

// An empty asm on each int16 sum after its block: without it GCC 12 reassociated the sums
// (integer vector adds) into a tree over all four blocks, computing every product first and
// spilling them (W4A8 decode, AVX2: 0.45 instructions per weight byte instead of 0.38).
template <class T>
inline void pin_vec(T& v) {
#if defined(__x86_64__)
  asm("" : "+x"(v));
#else
  (void)v;
#endif
}

// One block (8 k of the 16 x NP outputs) of MR rows (activations at x[i], 8 * B bytes in) into
// the int16 sums s16[i]: B == 0 starts them. The weights are loaded and unpacked once for all
// rows; each row broadcasts its 8 activations from memory (a load, no ALU work).
template <class Q, int MR, int NP, int B>
inline void q4a8_gemv_block(const uint8_t* const* wj, int64_t off, const int8_t* const* x,
                            typename Q::I (*s16)[NP * 16 / Q::W]) {
  using I = typename Q::I;
  constexpr int VP = 16 / Q::W;
  for (int j = 0; j < NP; ++j)
    for (int v = 0; v < VP; ++v) {
      const I raw = Q::loadi(wj[j] + off + B * 64 + v * Q::W * 4);
      const I lo = Q::nib_lo(raw), hi = Q::nib_hi(raw);
      for (int i = 0; i < MR; ++i) {
        int32_t x0, x1;
        std::memcpy(&x0, x[i] + 8 * B, 4);
        std::memcpy(&x1, x[i] + 8 * B + 4, 4);
        I& acc = s16[i][j * VP + v];
        if constexpr (B == 0)  // a zero accumulator would cost an add more
          acc = Q::dot4_pair16(Q::izero(), lo, Q::bcast4(x0), hi, Q::bcast4(x1));
        else
          acc = Q::dot4_pair16(acc, lo, Q::bcast4(x0), hi, Q::bcast4(x1));
        pin_vec(acc);
      }
    }
}

// Rows m0 .. m0 + MR - 1 x panels p0 .. p0 + NP - 1 into out[MR][16 * NP] (no bias). `ahead`:
// software prefetch distance along each panel's stream, in bytes; tiles of several rows (decode
// batches) run on into the next tile's panels (quant_simd.h stream_ahead has the reason).
template <class Q, int MR, int NP>
void q4a8_gemv_panels(const QuantArgs& a, int64_t m0, int64_t p0, int64_t ahead, float* out) {
  using I = typename Q::I;
  using F = typename Q::F;
  static_assert(Q::kQ4Blocks16 == 4, "one chunk of 4 blocks (32 k) per int16 sum");
  constexpr int VP = 16 / Q::W, NV = NP * VP;
  const int64_t G = a.group, ng = a.Kp / G;
  const layout::Q4Layout L = q4_layout_of(a);
  const int64_t pb = L.panel_bytes();
  const uint8_t* wj[NP];
  for (int j = 0; j < NP; ++j) wj[j] = a.w + (p0 + j) * pb;
  const auto prefetch = [&](int j, int64_t pos) {
    if (MR == 1 || pos < pb)
      Q::prefetch(wj[j] + pos);
    else
      Q::prefetch(wj[j] + NP * pb + (pos - pb));
  };
  const int8_t* xr[MR];
  F xs[MR];
  for (int i = 0; i < MR; ++i) {
    xr[i] = a.xq + (m0 + i) * a.ldq;
    xs[i] = Q::set1f(a.xs[m0 + i]);
  }
  F facc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) facc[i][v] = Q::zerof();
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t codes = L.codes(g);
    // The pair's tail lines (scales, zero points) are in the stream too but no code block's
    // prefetch lands on them: theirs go with the pair's second group.
    if (g % 2 == 1 || g + 1 == ng)
      for (int64_t t = 64; t <= L.tail_bytes(); t += 64)
        for (int j = 0; j < NP; ++j) prefetch(j, codes + 8 * G - 64 + ahead + t);
    I acc[MR][NV];
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = Q::izero();
    for (int64_t c = 0; c < G / 32; ++c) {
      const int64_t off = codes + c * 256;
      const int8_t* xc[MR];
      for (int i = 0; i < MR; ++i) xc[i] = xr[i] + g * G + c * 32;
      for (int b = 0; b < 4; ++b)
        for (int j = 0; j < NP; ++j) prefetch(j, off + b * 64 + ahead);
      I s16[MR][NV];
      q4a8_gemv_block<Q, MR, NP, 0>(wj, off, xc, s16);
      q4a8_gemv_block<Q, MR, NP, 1>(wj, off, xc, s16);
      q4a8_gemv_block<Q, MR, NP, 2>(wj, off, xc, s16);
      q4a8_gemv_block<Q, MR, NP, 3>(wj, off, xc, s16);
      for (int i = 0; i < MR; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] = Q::widen16(acc[i][v], s16[i][v]);
    }
    for (int i = 0; i < MR; ++i) {
      const int32_t xgs = a.xgs[(m0 + i) * ng + g];
      const I zs8 = Q::set1i(8 * xgs);
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) {
          const F s = Q::loadh(wj[j] + L.scales(g) + v * Q::W * 2);
          // Symmetric: z = 8 in every lane, so z * sum is one scalar product (vpmulld is slow).
          const I zs = a.zero_point
                           ? Q::mullo(Q::load_u8x(wj[j] + L.zeros(g) + v * Q::W), Q::set1i(xgs))
                           : zs8;
          const I r = Q::sub(acc[i][j * VP + v], zs);
          facc[i][j * VP + v] = Q::addf(facc[i][j * VP + v], Q::mulf(Q::cvt(r), Q::mulf(xs[i], s)));
        }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) Q::storef(out + i * 16 * NP + v * Q::W, facc[i][v]);
}

}  // namespace
}  // namespace edgevl::cpu
