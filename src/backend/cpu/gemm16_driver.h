#pragma once
// The 16-bit GEMM (Bf16GemmArgs in kernel_table.h) written once for every level that has one:
// AMX-BF16 (x86/amx), AVX512-BF16 VDPBF16PS (x86/avx512), AArch64 BFDOT (arm/bf16) and FMLA .8h
// (arm/fp16). The driver owns what the levels share: the passes over a thread's column panels
// (in place, or repacked into a per-thread buffer), the register tiles over M and N, the
// epilogues (bias, residual, GELU into the next matmul's blocks), the rounding of f32 rows into
// activation blocks, and the table pair (its bf16 GEMM from a row threshold on, or for every
// call: the test hook). A level supplies a traits struct L with its tile kernel and constants.
//
// Include only from a level's files: everything is in an anonymous namespace, so each file
// compiles its own copy with its own ISA flags (see core/packed_layout.h).
//
// Traits L:
//   kMR, kMaxNP        the register tile: kMR rows (a divisor of 16, or a multiple of 16) by
//                      up to kMaxNP panels of 16 columns
//   RowTiles           Gemm16Rows<...>: the row counts `tile` is instantiated for, ascending;
//                      a tile of `rows` rows runs the smallest one >= rows
//   kPassBytes         weight panels per pass: about this many bytes (in L2 while every row
//                      tile sweeps them), a multiple of kMaxNP panels
//   kPanelsInPlace     bf16p panels (bf16_panels.h) are its weight layout as they are
//   kSplit             takes Bf16GemmArgs::x_lo (then repack_panel has a 4th argument, the
//                      lo panel, null without x_lo)
//   kMinRows, kPath    KernelTable::bf16_gemm_min_rows of the best table, bf16_path
//   base_table()       the table it extends; finish_table(t, min_rows) sets its extras
//   call_begin(), call_end()           around each bf16_gemm call (AMX: the tile config)
//   repack_panel(a, p, dst)            weight columns 16p..16p+15 into its layout, 16 Kp
//                                      elements, zero past K and N
//   tile<MR, NP, SPLIT>(a, t, c)       the product of MR rows x NP panels (Gemm16Tile t) into
//                                      c (row r, panel j at c + r * 16 kMaxNP + 16 j), or
//                                      straight to the output; says which (Gemm16Acc)
//   V16, zero, load, load_n, add, store, store_n: 16 floats (load_n / store_n: the first cnt)
//   store_rounded(dst, v)              16 floats into the activation format at dst
//   gelu_fn()                          the level's KernelTable::gelu_erf
//   kRowWide, rows_wide(x, dst, lo)    kRowWide floats of a row into blocks (a divisor of 32);
//   kRowTail, rows_tail(x, cnt, dst, lo) cnt <= kRowTail of them, zero past; lo: the lo parts
//                                      (x - hi rounded) where kSplit, else null
#include <cstdint>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/level_tables.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

constexpr int64_t kBlk = 512;  // elements of one 16-row x 32-k activation block

template <int... MRs>
struct Gemm16Rows {};

// Where a tile's product went.
enum class Gemm16Acc {
  kSum,          // c holds x W^T
  kSumWithBias,  // c holds bias + x W^T (the accumulators started from the bias)
  kStored,       // written to the output already
};

// One register tile: rows m0.. x panels p.. of a pass.
struct Gemm16Tile {
  const uint16_t* x;     // row m0 in the activation blocks (row m0 + r at x + 32 r within its
                         // 16-row group; the next 32-k block kBlk elements on)
  const uint16_t* w;     // panel p in the pass's weights, panel p + j at w + j * ws
  const uint16_t* w_lo;  // the lo parts of panel p with the split, else null
  int64_t ws, kblocks;   // elements per panel (16 Kp), Kp / 32
  int64_t m0, p;
};

// The defaults of the optional traits.
struct Gemm16Defaults {
  static constexpr bool kSplit = false;
  static void call_begin() {}
  static void call_end() {}
  static void finish_table(KernelTable&, int64_t) {}
};

// Calls f.template operator()<MR, NP>() with MR the smallest of the row counts >= rows and
// NP = np (1..MaxNP).
template <int MR, int NP, class F>
void gemm16_dispatch_np(int np, F& f) {
  if constexpr (NP > 1)
    if (np < NP) return gemm16_dispatch_np<MR, NP - 1>(np, f);
  f.template operator()<MR, NP>();
}
template <int MaxNP, int MR, int... More, class F>
void gemm16_dispatch(Gemm16Rows<MR, More...>, int rows, int np, F&& f) {
  if constexpr (sizeof...(More) > 0)
    if (rows > MR) return gemm16_dispatch<MaxNP>(Gemm16Rows<More...>{}, rows, np, f);
  gemm16_dispatch_np<MR, MaxNP>(np, f);
}

// Panels in the next register tile, `left` (> 0) remaining: MaxNP at a time, but 2 + 2 rather
// than 3 + 1 (a 1-panel tile loads as many activations as a 3-panel one for a third of the
// products).
template <int MaxNP>
int gemm16_group_panels(int64_t left) {
  if (MaxNP >= 3 && left == MaxNP + 1) return int(left / 2);
  return left < MaxNP ? int(left) : MaxNP;
}

template <class L>
int64_t gemm16_panels_per_pass(int64_t Kp) {
  const int64_t n = L::kPassBytes / (32 * Kp) / L::kMaxNP * L::kMaxNP;
  return n > L::kMaxNP ? n : L::kMaxNP;
}

template <class L>
struct Gemm16Scratch {
  alignas(64) float c[L::kMR * 16 * L::kMaxNP];
  std::vector<uint16_t> wb;  // repacked panels of one pass
};

// The tile of rows m0.. (`rows` of them below M, in c) x panels p.. (np) to the output: y (+
// bias unless the accumulators started from it, + residual; rows < M, columns < N) or the GELU'd
// blocks yb (the tile's rows up to row_end, those past M zero).
template <class L>
void gemm16_epilogue(const Bf16GemmArgs& a, float* c, int64_t m0, int rows, int row_end, int64_t p,
                     int np, bool bias_in_c) {
  constexpr int64_t ldc = 16 * L::kMaxNP;
  if (a.yb) {
    static const auto gelu = L::gelu_fn();
    for (int j = 0; j < np; ++j) {
      const int64_t n = (p + j) * 16;
      const auto bias = a.bias && !bias_in_c ? L::load(a.bias + n) : L::zero();
      for (int r = 0; r < rows; ++r)
        L::store(c + r * ldc + 16 * j, L::add(L::load(c + r * ldc + 16 * j), bias));
    }
    if (rows > 0) gelu(c, c, rows * ldc);
    for (int r = 0; r < row_end; ++r) {
      const int64_t m = m0 + r;
      for (int j = 0; j < np; ++j) {
        const int64_t n = (p + j) * 16;
        uint16_t* dst = a.yb + (m / 16) * 16 * a.ldyb + (n / 32) * kBlk + (m % 16) * 32 + n % 32;
        L::store_rounded(dst, r < rows ? L::load(c + r * ldc + 16 * j) : L::zero());
      }
    }
    return;
  }
  const bool add_bias = a.bias && !bias_in_c;
  for (int j = 0; j < np; ++j) {
    const int64_t n = (p + j) * 16;
    if (n >= a.N) break;
    const int64_t cnt = a.N - n < 16 ? a.N - n : 16;
    const auto bias = add_bias ? L::load_n(a.bias + n, cnt) : L::zero();
    for (int r = 0; r < rows; ++r) {
      const int64_t m = m0 + r;
      auto v = L::load(c + r * ldc + 16 * j);
      if (add_bias) v = L::add(v, bias);
      // (x W^T + b) + residual, the order of the unfused matmul and add. The residual row is
      // read before y is written, so y may be the residual itself (an in-place add).
      if (a.residual) v = L::add(v, L::load_n(a.residual + m * a.N + n, cnt));
      L::store_n(a.y + m * a.N + n, v, cnt);
    }
  }
}

// Every row tile of the pass's panels [pp, pe) (weights at wbuf, with the split their lo parts
// at wlo).
template <class L, bool SPLIT>
void gemm16_sweep(const Bf16GemmArgs& a, Gemm16Scratch<L>& s, int64_t pp, int64_t pe,
                  const uint16_t* wbuf, const uint16_t* wlo) {
  const int64_t Mp = (a.M + 15) / 16 * 16;
  Gemm16Tile t{};
  t.ws = 16 * a.Kp;
  t.kblocks = a.Kp / 32;
  for (int64_t m0 = 0; m0 < Mp; m0 += L::kMR) {
    const int64_t left = a.M - m0;
    const int rows = left <= 0 ? 0 : left < L::kMR ? int(left) : L::kMR;
    if (rows == 0 && !a.yb) break;
    const int row_end = Mp - m0 < L::kMR ? int(Mp - m0) : L::kMR;
    t.x = a.xb + (m0 / 16) * 16 * a.ldx + (m0 % 16) * 32;
    t.m0 = m0;
    for (int64_t p = pp; p < pe;) {
      const int np = gemm16_group_panels<L::kMaxNP>(pe - p);
      t.p = p;
      t.w = wbuf + (p - pp) * t.ws;
      t.w_lo = SPLIT ? wlo + (p - pp) * t.ws : nullptr;
      Gemm16Acc acc = Gemm16Acc::kSum;
      if (rows > 0)
        gemm16_dispatch<L::kMaxNP>(typename L::RowTiles{}, rows, np, [&]<int MR, int NP>() {
          acc = L::template tile<MR, NP, SPLIT>(a, t, s.c);
        });
      if (acc != Gemm16Acc::kStored)
        gemm16_epilogue<L>(a, s.c, m0, rows, row_end, p, np, acc == Gemm16Acc::kSumWithBias);
      p += np;
    }
  }
}

// Kernel table bf16_gemm: output columns [n0, n1) (n0 a multiple of 16).
template <class L>
void gemm16_cols(const Bf16GemmArgs& a, int64_t n0, int64_t n1) {
  L::call_begin();
  thread_local Gemm16Scratch<L> s;
  const bool split = L::kSplit && a.x_lo != nullptr;
  const int64_t panel_elems = 16 * a.Kp;
  const int64_t pass = gemm16_panels_per_pass<L>(a.Kp);
  const int64_t P0 = n0 / 16, P1 = (n1 + 15) / 16;
  const auto group = [](int64_t left) { return gemm16_group_panels<L::kMaxNP>(left); };
  for (int64_t pp = P0, pe; pp < P1; pp = pe) {
    // Whole register tiles of the chunk's panels (grouped from its end, so that no pass ends
    // in a narrower tile than it must) up to the pass size.
    pe = pp + group(P1 - pp);
    while (pe < P1 && pe - pp + group(P1 - pe) <= pass) pe += group(P1 - pe);
    const uint16_t* wbuf;
    const uint16_t* wlo = nullptr;
    if (a.w_panels && L::kPanelsInPlace) {
      wbuf = a.w + pp * panel_elems;  // packed at compile time, read in place
    } else {
      // 64-byte aligned: an AMX tile row or a zmm load straddling two cache lines costs two.
      const size_t need = size_t((split ? 2 : 1) * (pe - pp) * panel_elems + 32);
      if (s.wb.size() < need) s.wb.resize(need);
      uint16_t* buf = align64(s.wb.data());
      uint16_t* buf_lo = split ? buf + (pe - pp) * panel_elems : nullptr;
      for (int64_t p = pp; p < pe; ++p) {
        const int64_t o = (p - pp) * panel_elems;
        if constexpr (L::kSplit)
          L::repack_panel(a, p, buf + o, split ? buf_lo + o : nullptr);
        else
          L::repack_panel(a, p, buf + o);
      }
      wbuf = buf;
      wlo = buf_lo;
    }
    if (split)
      gemm16_sweep<L, L::kSplit>(a, s, pp, pe, wbuf, wlo);
    else
      gemm16_sweep<L, false>(a, s, pp, pe, wbuf, nullptr);
  }
  L::call_end();
}

// Kernel table to_bf16_rows (LO: to_bf16_rows_split): x[M][K] -> xb in 16 x 32 blocks
// (Bf16GemmArgs) in the level's format, rows M.. of the last 16-row group and k >= K zero.
template <class L, bool LO>
void gemm16_rows(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb, uint16_t* xl) {
  const int64_t Mp = (M + 15) / 16 * 16;
  const int64_t Kw = K / L::kRowWide * L::kRowWide;
  for (int64_t m = 0; m < Mp; ++m) {
    const int64_t row = (m / 16) * 16 * ld + (m % 16) * 32;
    int64_t k = 0;
    if (m < M)
      for (; k < Kw; k += L::kRowWide) {
        const int64_t o = row + (k / 32) * kBlk + k % 32;
        L::rows_wide(x + m * K + k, xb + o, LO ? xl + o : nullptr);
      }
    for (; k < ld; k += L::kRowTail) {
      const int64_t cnt = m >= M || K - k <= 0 ? 0 : (K - k < L::kRowTail ? K - k : L::kRowTail);
      const int64_t o = row + (k / 32) * kBlk + k % 32;
      L::rows_tail(x + m * K + k, cnt, xb + o, LO ? xl + o : nullptr);
    }
  }
}
template <class L>
void gemm16_rows_hi(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb) {
  gemm16_rows<L, false>(x, M, K, ld, xb, nullptr);
}

// The level's table: its base table plus the 16-bit GEMM for calls of at least min_rows rows.
template <class L>
KernelTable gemm16_table(int64_t min_rows) {
  KernelTable t = L::base_table();
  t.bf16_gemm = gemm16_cols<L>;
  t.to_bf16_rows = gemm16_rows_hi<L>;
  if constexpr (L::kSplit) t.to_bf16_rows_split = gemm16_rows<L, true>;
  t.bf16_gemm_min_rows = min_rows;
  t.bf16_path = L::kPath;
  L::finish_table(t, min_rows);
  return t;
}

// The level's kernels(bool every_row) entry point of kernel_table.h.
template <class L>
const KernelTable& gemm16_kernels(bool every_row) {
  return level_table<gemm16_table<L>, L::kMinRows>(every_row);
}

}  // namespace
}  // namespace edgevl::cpu
