// AMX-BF16 full (non-causal) attention of one head: the vision tower's 1025-token attention.
// Compiled with the AMX flag set; dispatch.cpp calls it only on CPUs with AMX-BF16.
//
// Numerics: the contract of self_attention_head_bf16 in kernels.h (q, k, v rounded to bf16;
// scores in f32; e = exp(scale * (s - max)) rounded to bf16 for P V; the sum of the f32 e
// divides the output). exp is a degree-4 minimax polynomial of 2^f (relative error < 2.7e-6,
// far below the bf16 rounding of e that follows); bf16 rounding is VCVTNE2PS2BF16 (nearest
// even, denormals to zero: a difference below 1e-38).
//
// Why fused: as separate steps (matmul Q K^T, softmax over memory, matmul P V) the head spent
// most of its time outside the tile multiplies — repacking K and V per call, rounding P to
// bf16 in an extra pass, and a softmax pass over a 1025 x 1040 float matrix. Here K and V are
// rounded once per head straight into the VNNI-2 B-tile layout, and for each block of 32 query
// rows the scores (32 x keys floats, ~130 KB, in L2), the exp and the bf16 P tiles never leave
// the core's caches.
//
// Split (SelfAttnArgs::split, the near-f32 contract of self_attention_head_split): q, k, v and
// e are each split into bf16 hi + lo (x - hi rounded again: 16 significant bits), every tile
// product becomes the four hi/lo products (Bf16GemmArgs::x_lo in matmul_amx.cpp does the same),
// and the sum of e divides as before: four times the tile work of the bf16 contract.
//
// Tiles (all 16 rows x 64 bytes): tmm0..3 a 2 x 2 grid of f32 accumulators (rows 0-15/16-31 x
// two 16-column tiles), tmm4/5 the two A tiles (rows 0-15 / 16-31), tmm6/7 the two B tiles.
#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"

#include <cmath>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/x86/amx/amx_tile.h"
#include "backend/cpu/x86/avx512/attention_bf16.h"
#include "backend/cpu/x86/avx512/bf16_avx512.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

constexpr int64_t kTile = 512;  // bf16 elements of one 16 x 32 tile (1 KB)

struct Buffers {
  std::vector<uint16_t> kb, vb, qa, pa;  // with split: the lo parts after the hi ones
  std::vector<float> s, o;
  std::vector<float> inv_sum;
};

template <class T>
T* aligned(std::vector<T>& v, size_t n) {
  v.resize(n + 64 / sizeof(T));
  return align64(v.data());
}

// The tiles of one operand of gemm_32x32: hi parts, and with SPLIT the lo parts `lo` elements
// further on (the lo buffers mirror the hi ones).
struct Operand {
  const uint16_t *p0, *p1;  // rows 0-15 / 16-31 (A) or columns 0-15 / 16-31 (B)
  int64_t lo;
};

// C (32 x 32 floats at c, row stride ldc) = sum over ksteps of A (rows 0-15 at a0, 16-31 at
// a1) times B (columns 0-15 at b0, 16-31 at b1); each operand advances one tile per k step.
// SPLIT: the products hi hi, hi lo, lo lo, lo hi per k step (10 tile loads per 16 multiplies).
template <bool SPLIT>
void gemm_32x32(const Operand& A, const Operand& B, int64_t ksteps, float* c, int64_t ldc) {
  const uint16_t *a0 = A.p0, *a1 = A.p1, *b0 = B.p0, *b1 = B.p1;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < ksteps; ++k) {
    EVL_TILE_LOAD(4, a0 + k * kTile, 64);
    EVL_TILE_LOAD(6, b0 + k * kTile, 64);
    _tile_dpbf16ps(0, 4, 6);
    EVL_TILE_LOAD(7, b1 + k * kTile, 64);
    _tile_dpbf16ps(1, 4, 7);
    EVL_TILE_LOAD(5, a1 + k * kTile, 64);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    if constexpr (SPLIT)
      bf16_block_split_rest<2, 2>(a0 + k * kTile, a1 + k * kTile, A.lo, b0 + k * kTile,
                                  b1 + k * kTile, B.lo);
  }
  const int64_t ld = ldc * 4;
  EVL_TILE_STORE(0, c, ld);
  EVL_TILE_STORE(1, c + 16, ld);
  EVL_TILE_STORE(2, c + 16 * ldc, ld);
  EVL_TILE_STORE(3, c + 16 * ldc + 16, ld);
}

// 32 floats as bf16 (lo, hi halves of the 32) and, with `rest`, what rounding left of them
// (x - bf16(x), rounded to bf16 too: split_bf16x32 of x86/avx512/attention_bf16.h in two parts).
__m512i bf16x32_and_rest(__m512 lo, __m512 hi, __m512i* rest) {
  __m512i parts[2];
  split_bf16x32(lo, hi, rest ? 2 : 1, parts);
  if (rest) *rest = parts[1];
  return parts[0];
}

// 32 floats from src (valid of them, zero past) rounded to bf16 (and the rest, see above).
__m512i load_bf16x32(const float* src, int64_t valid, __m512i* rest = nullptr) {
  if (valid >= 32) return bf16x32_and_rest(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16), rest);
  return bf16x32_and_rest(_mm512_maskz_loadu_ps(tail_mask(valid), src),
                          _mm512_maskz_loadu_ps(tail_mask(valid - 16), src + 16), rest);
}

template <bool SPLIT>
void self_attention_head(const SelfAttnArgs& a) {
  // head_dim is padded to a multiple of 32 with zero dims (they add nothing to q.k, and O
  // columns past head_dim are not stored).
  const int64_t n = a.n, hd = a.head_dim, hdp = (hd + 31) / 32 * 32;
  const int64_t nkk = hdp / 32;           // k steps of S = Q K^T
  const int64_t np = (n + 31) / 32 * 32;  // keys and query rows, padded
  const int64_t nks = np / 32;            // k steps of O = P V
  const int64_t ndt = hdp / 16;           // 16-dim column tiles of O (even)
  thread_local Buffers buf;
  // K as B tiles of S: [key block of 16][kk][pair r][key c][2] = K[16 jb + c][32 kk + 2 r + t].
  uint16_t* kb = aligned(buf.kb, size_t((SPLIT ? 2 : 1) * np * hdp));
  // V as B tiles of O: [dim tile dt][ks][pair r][dim c][2] = V[32 ks + 2 r + t][16 dt + c].
  uint16_t* vb = aligned(buf.vb, size_t((SPLIT ? 2 : 1) * np * hdp));
  uint16_t* qa = aligned(buf.qa, size_t((SPLIT ? 2 : 1) * 32 * hdp));  // [half][kk][16 rows][32]
  uint16_t* pa = aligned(buf.pa, size_t((SPLIT ? 2 : 1) * 32 * np));   // [half][ks][16 rows][32]
  float* s = aligned(buf.s, size_t(32 * np));                          // [32 rows][np] scores
  float* o = aligned(buf.o, size_t(32 * hdp));                         // [32 rows][hdp]
  float* inv_sum = aligned(buf.inv_sum, 32);
  // With SPLIT the lo parts follow the hi ones in the same buffers, these many elements on.
  const int64_t k_lo = np * hdp, v_lo = np * hdp, q_lo = 32 * hdp, p_lo = 32 * np;

  // K: for each block of 16 keys and 32 dims, the 16 keys' bf16 pairs as dword rows,
  // transposed so that tile row r holds pair r of every key.
  for (int64_t jb = 0; jb < np / 16; ++jb)
    for (int64_t kk = 0; kk < nkk; ++kk) {
      __m512i r[16], rl[16];
      for (int c = 0; c < 16; ++c) {
        const int64_t key = 16 * jb + c;
        r[c] = rl[c] = _mm512_setzero_si512();
        if (key < n)
          r[c] = load_bf16x32(a.k + key * a.ldkv + 32 * kk, hd - 32 * kk, SPLIT ? &rl[c] : nullptr);
      }
      transpose16(r);
      uint16_t* dst = kb + (jb * nkk + kk) * kTile;
      for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + 32 * i, r[i]);
      if constexpr (SPLIT) {
        transpose16(rl);
        for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + k_lo + 32 * i, rl[i]);
      }
    }
  // V: tile row r of (dt, ks) interleaves keys 32 ks + 2r (low half) and + 2r + 1 (high).
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t key = 0; key < np; key += 2)
    for (int64_t dt = 0; dt < ndt; ++dt) {
      const auto row = [&](int64_t k) {
        return k < n && 16 * dt < hd ? _mm512_loadu_ps(a.v + k * a.ldkv + 16 * dt)
                                     : _mm512_setzero_ps();
      };
      __m512i rest;
      const __m512i h = bf16x32_and_rest(row(key), row(key + 1), SPLIT ? &rest : nullptr);
      uint16_t* dst = vb + (dt * nks + key / 32) * kTile + (key % 32) / 2 * 32;
      _mm512_store_si512(dst, _mm512_permutexvar_epi16(interleave, h));
      if constexpr (SPLIT)
        _mm512_store_si512(dst + v_lo, _mm512_permutexvar_epi16(interleave, rest));
    }

  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  load_tile_config(cfg);
  // exp(scale (s - max)) = 2^(s * scale2 - max * scale2).
  const float scale2 = a.scale * 1.44269504089f;
  const __m512 scale = _mm512_set1_ps(scale2);
  for (int64_t r0 = 0; r0 < n; r0 += 32) {
    const int64_t rows = n - r0 < 32 ? n - r0 : 32;
    for (int64_t i = 0; i < 32; ++i)
      for (int64_t kk = 0; kk < nkk; ++kk) {
        __m512i rest = _mm512_setzero_si512();
        const __m512i q = i < rows ? load_bf16x32(a.q + (r0 + i) * a.ldq + 32 * kk, hd - 32 * kk,
                                                  SPLIT ? &rest : nullptr)
                                   : _mm512_setzero_si512();
        uint16_t* dst = qa + ((i / 16) * nkk + kk) * kTile + (i % 16) * 32;
        _mm512_store_si512(dst, q);
        if constexpr (SPLIT) _mm512_store_si512(dst + q_lo, rest);
      }
    // S = Q K^T, 32 keys at a time.
    for (int64_t j = 0; j < np; j += 32)
      gemm_32x32<SPLIT>(Operand{qa, qa + nkk * kTile, q_lo},
                        Operand{kb + (j / 16) * nkk * kTile, kb + (j / 16 + 1) * nkk * kTile, k_lo},
                        nkk, s + j, np);
    // e = exp(scale (s - max)) over the n real keys, rounded into the P tiles; padded keys 0.
    for (int64_t i = 0; i < 32; ++i) {
      uint16_t* prow = pa + (i / 16) * nks * kTile + (i % 16) * 32;
      if (i >= rows) {
        for (int64_t ks = 0; ks < nks; ++ks) {
          _mm512_store_si512(prow + ks * kTile, _mm512_setzero_si512());
          if constexpr (SPLIT) _mm512_store_si512(prow + p_lo + ks * kTile, _mm512_setzero_si512());
        }
        continue;
      }
      const float* srow = s + i * np;
      __m512 mx = _mm512_set1_ps(-INFINITY);
      for (int64_t j = 0; j < n; j += 16)
        mx = _mm512_mask_max_ps(mx, tail_mask(n - j), mx, _mm512_loadu_ps(srow + j));
      const __m512 shift = _mm512_set1_ps(-_mm512_reduce_max_ps(mx) * scale2);
      const auto e16 = [&](int64_t j) {
        return exp2_nonpositive(_mm512_fmadd_ps(_mm512_load_ps(srow + j), scale, shift));
      };
      const auto store_p = [&](uint16_t* dst, __m512 e0, __m512 e1) {
        __m512i rest;
        _mm512_store_si512(dst, bf16x32_and_rest(e0, e1, SPLIT ? &rest : nullptr));
        if constexpr (SPLIT) _mm512_store_si512(dst + p_lo, rest);
      };
      __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
      int64_t ks = 0;
      for (; 32 * ks + 32 <= n; ++ks) {
        const __m512 e0 = e16(32 * ks), e1 = e16(32 * ks + 16);
        sum0 = _mm512_add_ps(sum0, e0);
        sum1 = _mm512_add_ps(sum1, e1);
        store_p(prow + ks * kTile, e0, e1);
      }
      for (; ks < nks; ++ks) {  // the last, partial block: padded keys get 0
        const int64_t j = 32 * ks;
        const __m512 e0 = _mm512_maskz_mov_ps(tail_mask(n - j), e16(j));
        const __m512 e1 = _mm512_maskz_mov_ps(tail_mask(n - j - 16), e16(j + 16));
        sum0 = _mm512_add_ps(sum0, e0);
        sum1 = _mm512_add_ps(sum1, e1);
        store_p(prow + ks * kTile, e0, e1);
      }
      const __m512 sum = _mm512_add_ps(sum0, sum1);
      inv_sum[i] = 1.0f / _mm512_reduce_add_ps(sum);
    }
    // O = P V, 32 dims at a time, then divided by the row sums.
    for (int64_t dt = 0; dt < ndt; dt += 2)
      gemm_32x32<SPLIT>(Operand{pa, pa + nks * kTile, p_lo},
                        Operand{vb + dt * nks * kTile, vb + (dt + 1) * nks * kTile, v_lo}, nks,
                        o + 16 * dt, hdp);
    store_attention_rows(a, r0, 32, rows, o, hdp, inv_sum);
  }
  _tile_release();
}

}  // namespace

void amx_self_attention_bf16(const SelfAttnArgs& a) {
  if (a.split)
    self_attention_head<true>(a);
  else
    self_attention_head<false>(a);
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
