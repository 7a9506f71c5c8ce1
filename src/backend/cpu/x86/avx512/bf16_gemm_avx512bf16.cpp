// AVX-512 BF16 (VDPBF16PS) versions of the AMX-BF16 entry points, for CPUs with AVX512_BF16 but
// no AMX (AMD Zen 4/5, Cooper Lake): the bf16 GEMM (Bf16GemmArgs, every form but the f16
// split x_lo), to_bf16_rows and the fused vision attention (SelfAttnArgs, bf16 contract only).
// Compiled with the AVX-512 + VNNI + BF16 flag set; dispatch.cpp calls into it only after
// cpu_features() reported AVX512_BF16.
//
// Numerics: the same contract as matmul_amx.cpp / attention_amx.cpp. VDPBF16PS multiplies bf16
// pairs exactly and adds both products to the f32 accumulator lane (the pair sum rounded once
// more than an FMA chain would: f32 accumulation, order differs from the other paths).
//
// Layout: the bf16p weight panel (bf16_panels.h) stores, per 64 bytes, 16 output columns x one
// k pair, each dword (k even, k odd) of one column: exactly VDPBF16PS's second operand when the
// activation pair (k even, k odd) of one row is broadcast as a dword. So the panels are read in
// place; bf16 / f16 row weights are repacked into the same layout per pass (as the AMX GEMM
// does). The activations are the tile blocks of Bf16GemmArgs: for a row, a 32-k block is one
// 64-byte line, and 8 consecutive rows of a 16-row group are 8 lines 64 bytes apart.
//
// Register tile: 8 rows x up to 3 panels of 16 columns = 24 zmm accumulators; per k pair, NP
// weight loads and 8 dword broadcasts feed 8 * NP VDPBF16PS. Over a thread's columns, a pass of
// panels (~512 KB) stays in L2 while every 8-row strip of activations (in L1 at K = 1024)
// sweeps it.
// The passes, the epilogues and the rounding of activation rows are gemm16_driver.h's (shared
// with AMX-BF16 and the AArch64 16-bit levels); here are the tile kernel, the repack and the
// attention.
//
// Not here: the near-f32 split forms (Bf16GemmArgs::x_lo / to_bf16_rows_split and
// SelfAttnArgs::split). One VDPBF16PS takes 32 products (16 lanes x 2) at the f32 FMA's
// instruction rate (measured: 2x its FLOP rate); four products per term leave 8 terms per
// instruction, half the 16 of an f32 FMA, so the f32 paths the callers fall back to are faster.
//
// Measured on an EPYC Zen 5 (2 cores, no AMX), machine quiet: register-only peak of VDPBF16PS
// zmm 430-455 GFLOP/s per core (2x f32 FMA's 217-229), 848-910 on 2 cores; kernels_bench
// BM_gemm_bf16/2/1025/{1024/1024, 1024/3072, 1024/4096, 4096/1024}/2 (bf16p, 2 threads, median
// of 3): 646, 660, 648, 691 GFLOP/s (f32 FMA on unpacked weights: 169-205); one 1025 x 64 head
// ~0.94 ms (285 GFLOP/s, 1 thread); edgevl bench vision (InternViT-300M tile, 2 threads):
// 1139-1218 ms against 3517-3966 ms on the f32 path.
#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/x86/avx512/attention_bf16.h"
#include "backend/cpu/x86/avx512/bf16_avx512.h"
#include "backend/cpu/x86/avx512/gemm16_avx512.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

__m512bh bcast_pair(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(v));
}

void self_attention_head(const SelfAttnArgs& a);

// The level's traits (gemm16_driver.h).
struct Vdpbf16 : Gemm16Avx512 {
  // Register tile: 8 rows x up to 3 panels, 24 zmm accumulators.
  static constexpr int kMR = 8, kMaxNP = 3;
  using RowTiles = Gemm16Rows<1, 2, 4, 8>;
  // ~512 KB of panels, in L2 (1-2 MB per core on the CPUs with AVX512_BF16) with room for the
  // activation strip and the next pass's prefetch.
  static constexpr int64_t kPassBytes = 512 << 10;
  static constexpr bool kPanelsInPlace = true;
  // F16 / BF16 row weights from this many rows (fewer: the f32 AVX-512 path, which reads the
  // rows without a repack). kernels_bench BM_gemm_bf16/1/M/896/4864/0 (1 thread, CPU time, Zen
  // 5): M = 1: 489 us here vs 139 us f32; M = 8: 502 vs 1391; M = 128: 4058 vs 8821.
  static constexpr int64_t kMinRows = 8;
  static constexpr const char* kPath = "avx512bf16 (vdpbf16ps)";

  // c[r * ldc + 16 j + l] = sum over k < 32 * kblocks of x(row r, k) w(column 16 j + l, k) for
  // r < MR, j < NP. x: row 0 of the tile in the block layout (row r at x + 32 r, the next 32-k
  // block 512 elements on, so the MR rows must sit in one 16-row group); w: panel 0 at k = 0
  // (panel j at w + j * ws, k pair i at + 32 i).
  template <int MR, int NP>
  static void micro(const uint16_t* x, const uint16_t* w, int64_t ws, int64_t kblocks, float* c,
                    int64_t ldc) {
    __m512 acc[MR][NP];
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_setzero_ps();
    const uint16_t* w1 = NP > 1 ? w + ws : w;
    const uint16_t* w2 = NP > 2 ? w + 2 * ws : w;
    for (int64_t kb = 0; kb < kblocks; ++kb, x += kBlk, w += kBlk, w1 += kBlk, w2 += kBlk) {
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        __m512bh wv[NP];
        wv[0] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 32 * i));
        if constexpr (NP > 1) wv[1] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w1 + 32 * i));
        if constexpr (NP > 2) wv[2] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w2 + 32 * i));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const __m512bh xv = bcast_pair(x + 32 * r + 2 * i);
#pragma GCC unroll 3
          for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], xv, wv[j]);
        }
      }
    }
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < NP; ++j) _mm512_storeu_ps(c + r * ldc + 16 * j, acc[r][j]);
  }
  template <int MR, int NP, bool>
  static Gemm16Acc tile(const Bf16GemmArgs&, const Gemm16Tile& t, float* c) {
    micro<MR, NP>(t.x, t.w, t.ws, t.kblocks, c, 16 * kMaxNP);
    return Gemm16Acc::kSum;
  }

  // Weight rows 16p..16p+15 of [N][K] -> dst in the bf16p panel layout, zero past K and N.
  // Those rows are one contiguous block of the source; the next panel's block is prefetched
  // into L2 meanwhile, an even share per 32-k step (the 16 row streams of the transpose alone
  // left the loads waiting: 75% of a small-M call's time went to this repack at K = 896).
  static void repack_panel(const Bf16GemmArgs& a, int64_t p, uint16_t* dst) {
    const char* next = reinterpret_cast<const char*>(a.w + (16 * p + 16) * a.K);
    const int64_t rows_next = a.N - 16 * (p + 1) < 16 ? a.N - 16 * (p + 1) : 16;
    const int64_t next_bytes = rows_next > 0 ? rows_next * a.K * int64_t(sizeof(uint16_t)) : 0;
    const int64_t share = (next_bytes / (a.Kp / 32) + 63) / 64 * 64;
    for (int64_t k0 = 0, off = 0; k0 < a.Kp; k0 += 32) {
      for (int64_t e = off + share; off < e && off < next_bytes; off += 64)
        _mm_prefetch(next + off, _MM_HINT_T1);
      const int64_t valid = a.K - k0 < 32 ? a.K - k0 : 32;
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        const int64_t n = 16 * p + i;
        r[i] = n < a.N && valid > 0 ? load_w32(a, n, k0, valid) : _mm512_setzero_si512();
      }
      transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + (k0 / 2 + i) * 32, r[i]);
    }
  }
  static KernelTable base_table() {
    return avx512_kernels();
  }
  static void finish_table(KernelTable& t, int64_t) {
    // No f16 split (to_bf16_rows_split, SelfAttnArgs::split) and no causal kernel: those
    // callers keep the f32 paths.
    t.self_attention_bf16 = self_attention_head;
  }
};

// ---- Vision attention ----------------------------------------------------------------------
//
// One head, the bf16 contract of self_attention_head_bf16 (kernels.h): per block of 32 query
// rows, S = Q K^T (Q in activation blocks, K as bf16p panels of 16 keys x head_dim), softmax
// rows into P (activation blocks over the keys), O = P V (V as panels of 16 dims x keys), all
// on the GEMM's register tile. Scores, P and O stay in L2; K and V are rounded once per head.

constexpr int64_t kQB = 32;  // query rows per block

struct AttnBuffers {
  std::vector<uint16_t> kp, vp, qa, pa;
  std::vector<float> s, o;
};

template <class T>
T* aligned(std::vector<T>& v, size_t n) {
  v.resize(n + 64 / sizeof(T));
  return align64(v.data());
}

// 32 floats from src (valid of them, zero past) rounded to bf16 (VCVTNE2PS2BF16).
__m512i load_bf16x32(const float* src, int64_t valid) {
  if (valid >= 32) return to_bf16x32(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16));
  return to_bf16x32(_mm512_maskz_loadu_ps(tail_mask(valid), src),
                    _mm512_maskz_loadu_ps(tail_mask(valid - 16), src + 16));
}

// Runs a [rows_total][kblocks * 32] x panels product into c (row stride ldc): rows in 8-row
// tiles (all within 16-row groups), panels [0, npanels) in groups of up to 3.
void tile_product(const uint16_t* xa, int64_t ldx, int64_t rows_total, const uint16_t* w,
                  int64_t ws, int64_t npanels, int64_t kblocks, float* c, int64_t ldc) {
  constexpr int kMR = Vdpbf16::kMR;
  for (int64_t m0 = 0; m0 < rows_total; m0 += kMR) {
    const int rows = rows_total - m0 < kMR ? int(rows_total - m0) : kMR;
    const uint16_t* x = xa + (m0 / 16) * 16 * ldx + (m0 % 16) * 32;
    for (int64_t p = 0; p < npanels;) {
      const int np = gemm16_group_panels<Vdpbf16::kMaxNP>(npanels - p);
      gemm16_dispatch<Vdpbf16::kMaxNP>(Vdpbf16::RowTiles{}, rows, np, [&]<int MR, int NP>() {
        Vdpbf16::micro<MR, NP>(x, w + p * ws, ws, kblocks, c + m0 * ldc + 16 * p, ldc);
      });
      p += np;
    }
  }
}

void self_attention_head(const SelfAttnArgs& a) {
  const int64_t n = a.n, hd = a.head_dim, hdp = (hd + 31) / 32 * 32;
  const int64_t nkp = (n + 15) / 16;       // key panels of S
  const int64_t npk = (n + 31) / 32 * 32;  // keys padded: P's k extent, V panels' k extent
  const int64_t ndp = hd / 16;             // dim panels of O
  thread_local AttnBuffers buf;
  // K panels: key c of panel jb, dims (2i, 2i + 1) at kp[jb * 16 * hdp + 32 i + 2 c + {0,1}].
  uint16_t* kp = aligned(buf.kp, size_t(nkp * 16 * hdp));
  // V panels: dim c of panel dt, keys (2i, 2i + 1) at vp[dt * 16 * npk + 32 i + 2 c + {0,1}].
  uint16_t* vp = aligned(buf.vp, size_t(ndp * 16 * npk));
  uint16_t* qa = aligned(buf.qa, size_t(kQB * hdp));  // Q rows in activation blocks
  uint16_t* pa = aligned(buf.pa, size_t(kQB * npk));  // P rows in activation blocks
  float* s = aligned(buf.s, size_t(kQB * npk));       // [32][npk] scores
  float* o = aligned(buf.o, size_t(kQB * hdp));       // [32][hdp]

  for (int64_t jb = 0; jb < nkp; ++jb)
    for (int64_t kk = 0; kk < hdp / 32; ++kk) {
      __m512i r[16];
      for (int c = 0; c < 16; ++c) {
        const int64_t key = 16 * jb + c;
        r[c] = key < n ? load_bf16x32(a.k + key * a.ldkv + 32 * kk, hd - 32 * kk)
                       : _mm512_setzero_si512();
        // The rows are ldkv apart (the executor's q/k/v rows): the next panel's keys ahead.
        if (key + 16 < n) {
          _mm_prefetch(reinterpret_cast<const char*>(a.k + (key + 16) * a.ldkv + 32 * kk),
                       _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(a.k + (key + 16) * a.ldkv + 32 * kk + 16),
                       _MM_HINT_T0);
        }
      }
      transpose16(r);
      uint16_t* dst = kp + jb * 16 * hdp + kk * kBlk;
      for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + 32 * i, r[i]);
    }
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t key = 0; key < npk; key += 2)
    for (int64_t dt = 0; dt < ndp; ++dt) {
      const auto row = [&](int64_t k) {
        return k < n ? _mm512_loadu_ps(a.v + k * a.ldkv + 16 * dt) : _mm512_setzero_ps();
      };
      for (int64_t ahead = key + 8; ahead < key + 10 && ahead < n; ++ahead)
        _mm_prefetch(reinterpret_cast<const char*>(a.v + ahead * a.ldkv + 16 * dt), _MM_HINT_T0);
      const __m512i h = to_bf16x32(row(key), row(key + 1));
      _mm512_store_si512(vp + dt * 16 * npk + key * 16, _mm512_permutexvar_epi16(interleave, h));
    }

  const float scale2 = a.scale * 1.44269504089f;  // exp(scale x) = 2^(scale2 x)
  const __m512 scale = _mm512_set1_ps(scale2);
  float inv_sum[kQB];
  for (int64_t r0 = 0; r0 < n; r0 += kQB) {
    const int64_t rows = n - r0 < kQB ? n - r0 : kQB;
    const int64_t rows16 = (rows + 15) / 16 * 16;
    for (int64_t i = 0; i < rows16; ++i)
      for (int64_t kk = 0; kk < hdp / 32; ++kk) {
        const __m512i q = i < rows ? load_bf16x32(a.q + (r0 + i) * a.ldq + 32 * kk, hd - 32 * kk)
                                   : _mm512_setzero_si512();
        _mm512_store_si512(qa + (i / 16) * 16 * hdp + kk * kBlk + (i % 16) * 32, q);
      }
    tile_product(qa, hdp, rows, kp, 16 * hdp, nkp, hdp / 32, s, npk);
    for (int64_t i = 0; i < rows16; ++i) {
      uint16_t* prow = pa + (i / 16) * 16 * npk + (i % 16) * 32;
      if (i >= rows) {
        for (int64_t j = 0; j < npk; j += 32)
          _mm512_store_si512(prow + j * 16, _mm512_setzero_si512());
        continue;
      }
      const float* srow = s + i * npk;
      __m512 mx = _mm512_set1_ps(-INFINITY);
      for (int64_t j = 0; j < n; j += 16)
        mx = _mm512_mask_max_ps(mx, tail_mask(n - j), mx, _mm512_loadu_ps(srow + j));
      const __m512 shift = _mm512_set1_ps(-_mm512_reduce_max_ps(mx) * scale2);
      __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
      for (int64_t j = 0; j < npk; j += 32) {
        const __mmask16 m0 = tail_mask(n - j), m1 = tail_mask(n - j - 16);
        const __m512 e0 = _mm512_maskz_mov_ps(
            m0,
            exp2_nonpositive(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, srow + j), scale, shift)));
        const __m512 e1 =
            _mm512_maskz_mov_ps(m1, exp2_nonpositive(_mm512_fmadd_ps(
                                        _mm512_maskz_loadu_ps(m1, srow + j + 16), scale, shift)));
        sum0 = _mm512_add_ps(sum0, e0);
        sum1 = _mm512_add_ps(sum1, e1);
        _mm512_store_si512(prow + j * 16, to_bf16x32(e0, e1));
      }
      inv_sum[i] = 1.0f / _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
    }
    tile_product(pa, npk, rows, vp, 16 * npk, ndp, npk / 32, o, hdp);
    store_attention_rows(a, r0, kQB, rows, o, hdp, inv_sum);
  }
}

}  // namespace

const KernelTable& avx512bf16_kernels(bool every_row) {
  return gemm16_kernels<Vdpbf16>(every_row);
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
