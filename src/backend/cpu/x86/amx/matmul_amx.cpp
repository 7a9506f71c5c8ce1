// AMX-BF16 GEMM for bf16 weights (compiled with the AMX flag set; dispatch.cpp calls it only
// after cpu_features() reported AMX-TILE/BF16 with the Linux tile-data permission granted).
//
// Numerics (the accuracy contract of a bf16 model): the activations are rounded to bf16 (to
// nearest even, like f32_to_bf16 in core/dtype.h) once per call; TDPBF16PS multiplies bf16
// pairs exactly and accumulates in f32 (order differs from the AVX-512 path; results agree to
// f32 accumulation rounding). The rounded activations are written in 16-row x 32-k tile blocks
// (1 KB each, contiguous and 64-byte aligned: a tile load is 16 whole cache lines, which the
// L1/L2 prefetchers follow). Weights are read straight from the [N][K] bf16 matrix: each pass
// of 16-row panels is repacked into the VNNI-2 B-tile layout (tile row k/2 = 16 columns x the
// bf16 pair k, k+1) in a per-thread buffer, then swept by every 32-row block of activations, so
// the repack is amortized over all M rows and nothing is copied at load time.
// Tiles: tmm0..3 a 2x2 grid of 16x16 f32 accumulators (tmm 2i+j: rows 16i.., panel j),
// tmm4/5 activation tiles (16 rows x 32 k), tmm6/7 weight tiles (32 k x 16 columns).
#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"

#include "backend/cpu/x86/amx/amx_tile.h"
#include "backend/cpu/x86/avx512/bf16_avx512.h"
#include "core/align.h"

#include <vector>

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
namespace {

// Calls with fewer rows use the AVX-512 f32 path. kernels_bench BM_gemm_bf16 (K=896, N=4864,
// 1 thread, CPU time): the per-call weight repack makes AMX 2.4x slower for M <= 4 (GEMV,
// memory-bound), and it is 2.1x faster at M = 8, 2.8x at 16, 4.3x at 64.
constexpr int64_t kAmxBf16MinRows = 8;
// F16 weights (four products per k, both operands split per call) from this many rows:
// kernels_bench BM_gemm_bf16/1/M/896/4864/3 (1 thread) against the AVX-512 f32 path: 2.70 vs
// 2.31 ms at M = 16, 2.77 vs 4.11 at 32, 5.96 vs 14.2 at 128; 1025 x 1024 x 4096: 31 vs 109.
constexpr int64_t kF16SplitMinRows = 32;

void load_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  load_tile_config(c);
}

struct Scratch {
  alignas(64) float c[4][16 * 16];
  std::vector<uint16_t> wb;  // repacked panels of one pass
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Weight panels per pass: their repacked tiles (~1 MB) stay in L2 while the row blocks sweep.
// kernels_bench, 1 thread, 1025 rows: 512 KB -> 1 MB took K=4096 from ~650 to ~790 GFLOP/s
// (the 32-row activation strip, 256 KB there, is reused by twice the panels), K=1024 equal;
// 1.5 MB was slower. Splitting K into 256-wide chunks (accumulators parked in L1) did not help
// in an A/B run (within 3%).
int64_t panels_per_pass(int64_t Kp) {
  const int64_t n = (1024 << 10) / (32 * Kp) / 2 * 2;
  return n > 2 ? n : 2;
}

void prefetch(const uint16_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

// 32 weights of row n from k0 (count valid, zero beyond) as bf16; F16 weights are converted
// exactly to f32 and then rounded to bf16 (losing 3 mantissa bits: the opt-in of
// matmul_bf16_compute).
__m512i load_w32(const Bf16GemmArgs& a, int64_t n, int64_t k0, int64_t valid) {
  const __mmask32 mk = valid == 32 ? ~__mmask32(0) : __mmask32((1u << valid) - 1u);
  const __m512i raw = _mm512_maskz_loadu_epi16(mk, a.w + n * a.K + k0);
  if (!a.w_f16) return raw;
  const __m256i lo = round_bf16(_mm512_cvtph_ps(_mm512_castsi512_si256(raw)));
  const __m256i hi = round_bf16(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 32 f16 weights of row n from k0 split exactly into bf16 hi + lo (an f16 has 11 significant
// bits: hi keeps 8, the rest fits lo), for Bf16GemmArgs::x_lo.
void split_w32(const Bf16GemmArgs& a, int64_t n, int64_t k0, int64_t valid, __m512i* hi,
               __m512i* lo) {
  const __mmask32 mk = valid == 32 ? ~__mmask32(0) : __mmask32((1u << valid) - 1u);
  const __m512i raw = _mm512_maskz_loadu_epi16(mk, a.w + n * a.K + k0);
  const __m512 f0 = _mm512_cvtph_ps(_mm512_castsi512_si256(raw));
  const __m512 f1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1));
  *hi = round_bf16_x2(f0, f1);
  *lo = round_bf16_x2(_mm512_sub_ps(f0, bf16_hi_f32(f0)), _mm512_sub_ps(f1, bf16_hi_f32(f1)));
}

// Weight rows 16p..16p+15 -> dst[k / 2][16 columns][2]: the VNNI-2 layout, zero past K and N
// (with dst_lo: the lo parts of the split, into dst_lo).
void repack_panel(const Bf16GemmArgs& a, int64_t p, uint16_t* dst, uint16_t* dst_lo) {
  for (int64_t k0 = 0; k0 < a.Kp; k0 += 32) {
    const int64_t valid = a.K - k0 < 32 ? a.K - k0 : 32;
    __m512i r[16], rl[16];
    for (int i = 0; i < 16; ++i) {
      const int64_t n = 16 * p + i;
      r[i] = rl[i] = _mm512_setzero_si512();
      if (n < a.N && dst_lo) split_w32(a, n, k0, valid, &r[i], &rl[i]);
      if (n < a.N && !dst_lo) r[i] = load_w32(a, n, k0, valid);
      // The 16 rows are 16 DRAM streams: fetch 512 bytes ahead in each (prefill +1-6%).
      if (n < a.N) prefetch(a.w + n * a.K + k0 + 256);
    }
    transpose16(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + (k0 / 2 + i) * 32, r[i]);
    if (!dst_lo) continue;
    transpose16(rl);
    for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst_lo + (k0 / 2 + i) * 32, rl[i]);
  }
}

// Accumulator tile t starts at the bias of panel column n (a stride-0 load repeats the 16
// floats in every row), or zero.
#define EVL_TILE_INIT(t, n)              \
  do {                                   \
    if (a.bias)                          \
      EVL_TILE_LOAD(t, a.bias + (n), 0); \
    else                                 \
      _tile_zero(t);                     \
  } while (0)

// The accumulators of an MR x NP block into the scratch tiles (s.c[2i + j]: rows 16i.., panel j).
template <int MR, int NP>
void park_tiles(Scratch& s) {
  EVL_TILE_STORE(0, s.c[0], 64);
  if constexpr (NP == 2) EVL_TILE_STORE(1, s.c[1], 64);
  if constexpr (MR == 2) EVL_TILE_STORE(2, s.c[2], 64);
  if constexpr (MR == 2 && NP == 2) EVL_TILE_STORE(3, s.c[3], 64);
}

// The fused epilogue (Bf16GemmArgs::yb): the accumulators of rows m0.. x panels p.. (bias
// already in them when `full`) get the bias (edge blocks), GELU, and are rounded into the
// bf16 blocks of the next matmul's input; rows past M of the last 16-row group become zero
// there. The same GELU kernel and the same rounding as the unfused ops: bit-identical results.
template <int MR, int NP>
void gelu_to_blocks(const Bf16GemmArgs& a, Scratch& s, int64_t m0, int64_t p, bool full) {
  static const auto gelu = avx512_kernels().gelu_erf;
  park_tiles<MR, NP>(s);
  for (int j = 0; j < NP; ++j) {
    const int64_t n = (p + j) * 16;
    if (n >= a.N) continue;
    const int64_t cnt = a.N - n < 16 ? a.N - n : 16;
    const __mmask16 mk = __mmask16((1u << cnt) - 1u);
    const __m512 bias =
        a.bias && !full ? _mm512_maskz_loadu_ps(mk, a.bias + n) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      float* c = s.c[2 * i + j];
      for (int r = 0; r < 16; ++r)
        _mm512_store_ps(c + 16 * r, _mm512_add_ps(_mm512_load_ps(c + 16 * r), bias));
      gelu(c, c, 256);
      for (int r = 0; r < 16; ++r) {
        const int64_t m = m0 + 16 * i + r;
        const __mmask16 valid = m < a.M ? mk : 0;
        uint16_t* dst = a.yb + (m / 16) * 16 * a.ldyb + (n / 32) * 512 + (m % 16) * 32 + n % 32;
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst),
                           round_bf16(_mm512_maskz_load_ps(valid, c + 16 * r)));
      }
    }
  }
}

// Rows m0.. (MR tiles of 16) x panels p.. (NP of 16 columns). Interior blocks start from the
// bias and store straight into y; edge blocks (rows past M or columns past N) and, with a
// residual, every block go through the scratch tiles (masks, the residual added on the way).
// SPLIT (Bf16GemmArgs::x_lo): each k step accumulates x_hi w_hi + x_hi w_lo + x_lo w_lo +
// x_lo w_hi (wl: the lo panels), each accumulator's products 4 tile ops apart like the plain
// step's; 10 tile loads per 16 multiplies (each pair of loads is kept for two products).
template <int MR, int NP, bool SPLIT>
void block(const Bf16GemmArgs& a, Scratch& s, int64_t m0, int64_t p, const uint16_t* const* wb,
           const uint16_t* const* wl) {
  const uint16_t* xa = a.xb + m0 * a.ldx;
  const uint16_t* xl = SPLIT ? a.x_lo + m0 * a.ldx : nullptr;
  const bool full = m0 + 16 * MR <= a.M && (p + NP) * 16 <= a.N;
  if (full) {
    EVL_TILE_INIT(0, 16 * p);
    if constexpr (NP == 2) EVL_TILE_INIT(1, 16 * p + 16);
    if constexpr (MR == 2) EVL_TILE_INIT(2, 16 * p);
    if constexpr (MR == 2 && NP == 2) EVL_TILE_INIT(3, 16 * p + 16);
  } else {
    _tile_zero(0);
    if constexpr (NP == 2) _tile_zero(1);
    if constexpr (MR == 2) _tile_zero(2);
    if constexpr (MR == 2 && NP == 2) _tile_zero(3);
  }
  for (int64_t k = 0; k < a.Kp; k += 32) {
    // Two k steps ahead into L1: tile loads from L2 stall the pipeline (tile registers are not
    // renamed). Past the end of a buffer prefetch does not fault.
    for (int l = 0; l < 16; ++l) {
      prefetch(wb[0] + (k + 64) * 16 + 32 * l);
      if constexpr (NP == 2) prefetch(wb[1] + (k + 64) * 16 + 32 * l);
      prefetch(xa + (k + 64) * 16 + 32 * l);
      if constexpr (MR == 2) prefetch(xa + 16 * a.ldx + (k + 64) * 16 + 32 * l);
    }
    EVL_TILE_LOAD(4, xa + k * 16, 64);
    EVL_TILE_LOAD(6, wb[0] + k * 16, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NP == 2) EVL_TILE_LOAD(7, wb[1] + k * 16, 64);
    if constexpr (NP == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MR == 2) EVL_TILE_LOAD(5, xa + 16 * a.ldx + k * 16, 64);
    if constexpr (MR == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MR == 2 && NP == 2) _tile_dpbf16ps(3, 5, 7);
    // x_lo and w_lo sit at fixed distances from the hi tiles (both are panel-sized buffers).
    if constexpr (SPLIT)
      bf16_block_split_rest<MR, NP>(xa + k * 16, xa + 16 * a.ldx + k * 16, xl - xa, wb[0] + k * 16,
                                    wb[1] + k * 16, wl[0] - wb[0]);
  }
  if (a.yb) return gelu_to_blocks<MR, NP>(a, s, m0, p, full);
  if (full && !a.residual) {
    float* y = a.y + m0 * a.N + 16 * p;
    const int64_t ld = 4 * a.N;
    EVL_TILE_STORE(0, y, ld);
    if constexpr (NP == 2) EVL_TILE_STORE(1, y + 16, ld);
    if constexpr (MR == 2) EVL_TILE_STORE(2, y + 16 * a.N, ld);
    if constexpr (MR == 2 && NP == 2) EVL_TILE_STORE(3, y + 16 * a.N + 16, ld);
    return;
  }
  park_tiles<MR, NP>(s);
  for (int j = 0; j < NP; ++j) {
    const int64_t n = (p + j) * 16;
    if (n >= a.N) continue;
    const int64_t cnt = a.N - n < 16 ? a.N - n : 16;
    const __mmask16 mk = __mmask16((1u << cnt) - 1u);
    const bool add_bias = a.bias && !full;  // full blocks started from the bias
    const __m512 bias = add_bias ? _mm512_maskz_loadu_ps(mk, a.bias + n) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < 16; ++r) {
        const int64_t m = m0 + 16 * i + r;
        if (m >= a.M) break;
        __m512 v = _mm512_load_ps(s.c[2 * i + j] + 16 * r);
        if (add_bias) v = _mm512_add_ps(v, bias);
        // (x W^T + b) + residual, the order of the unfused matmul and add. The residual row is
        // read before y is written, so y may be the residual itself (an in-place add).
        if (a.residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, a.residual + m * a.N + n));
        _mm512_mask_storeu_ps(a.y + m * a.N + n, mk, v);
      }
  }
}

template <bool SPLIT>
void sweep(const Bf16GemmArgs& a, Scratch& s, int64_t Mp, int64_t pp, int64_t pe,
           const uint16_t* wbuf, const uint16_t* wlo, int64_t panel_elems) {
  for (int64_t m0 = 0; m0 < Mp; m0 += 32) {
    const bool two_rows = Mp - m0 >= 32;
    for (int64_t p = pp; p < pe; p += 2) {
      const int np = pe - p >= 2 ? 2 : 1;
      const int64_t o0 = (p - pp) * panel_elems, o1 = (p + np - 1 - pp) * panel_elems;
      const uint16_t* wb[2] = {wbuf + o0, wbuf + o1};
      const uint16_t* wl[2] = {SPLIT ? wlo + o0 : nullptr, SPLIT ? wlo + o1 : nullptr};
      if (np == 2 && two_rows) block<2, 2, SPLIT>(a, s, m0, p, wb, wl);
      if (np == 2 && !two_rows) block<1, 2, SPLIT>(a, s, m0, p, wb, wl);
      if (np == 1 && two_rows) block<2, 1, SPLIT>(a, s, m0, p, wb, wl);
      if (np == 1 && !two_rows) block<1, 1, SPLIT>(a, s, m0, p, wb, wl);
    }
  }
}

void bf16_gemm_cols(const Bf16GemmArgs& a, int64_t n0, int64_t n1) {
  load_config();
  Scratch& s = scratch();
  const bool split = a.x_lo != nullptr;
  const int64_t panel_elems = 16 * a.Kp;
  const int64_t pass = panels_per_pass(a.Kp);
  const int64_t P0 = n0 / 16, P1 = (n1 + 15) / 16;
  const int64_t Mp = (a.M + 15) / 16 * 16;
  for (int64_t pp = P0; pp < P1; pp += pass) {
    const int64_t pe = pp + pass < P1 ? pp + pass : P1;
    // 64-byte aligned: a tile row straddling two cache lines costs two loads (measured: the
    // kernel ran at ~half speed on std::vector's 16-byte alignment).
    const uint16_t* wbuf;
    const uint16_t* wlo = nullptr;
    if (a.w_panels) {
      wbuf = a.w + pp * panel_elems;  // packed at compile time, read in place
    } else {
      const size_t need = size_t((split ? 2 : 1) * (pe - pp) * panel_elems + 32);
      if (s.wb.size() < need) s.wb.resize(need);
      uint16_t* buf = align64(s.wb.data());
      uint16_t* buf_lo = split ? buf + (pe - pp) * panel_elems : nullptr;
      for (int64_t p = pp; p < pe; ++p) {
        const int64_t o = (p - pp) * panel_elems;
        repack_panel(a, p, buf + o, split ? buf_lo + o : nullptr);
      }
      wlo = buf_lo;
      wbuf = buf;
    }
    if (split)
      sweep<true>(a, s, Mp, pp, pe, wbuf, wlo, panel_elems);
    else
      sweep<false>(a, s, Mp, pp, pe, wbuf, nullptr, panel_elems);
  }
  _tile_release();
}

// x[M][K] -> xb in 16 x 32 tile blocks (see Bf16GemmArgs), rows M.. of the last 16-row group
// and k >= K zero; with xl, also the lo parts x - hi rounded to bf16 (Bf16GemmArgs::x_lo).
void rows_to_blocks(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb, uint16_t* xl) {
  const int64_t Mp = (M + 15) / 16 * 16;
  const int64_t K32 = K / 32 * 32;
  for (int64_t m = 0; m < Mp; ++m) {
    const int64_t row = (m / 16) * 16 * ld + (m % 16) * 32;
    int64_t k = 0;
    if (m < M)
      for (; k < K32; k += 32) {
        const __m512 v0 = _mm512_loadu_ps(x + m * K + k), v1 = _mm512_loadu_ps(x + m * K + k + 16);
        _mm512_storeu_si512(xb + row + (k / 32) * 512, round_bf16_x2(v0, v1));
        if (xl)
          _mm512_storeu_si512(xl + row + (k / 32) * 512,
                              round_bf16_x2(_mm512_sub_ps(v0, bf16_hi_f32(v0)),
                                            _mm512_sub_ps(v1, bf16_hi_f32(v1))));
      }
    for (; k < ld; k += 16) {
      const int64_t cnt = m >= M || K - k <= 0 ? 0 : (K - k < 16 ? K - k : 16);
      const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << cnt) - 1u), x + m * K + k);
      const int64_t o = row + (k / 32) * 512 + k % 32;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xb + o), round_bf16(v));
      if (xl)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(xl + o),
                            round_bf16(_mm512_sub_ps(v, bf16_hi_f32(v))));
    }
  }
}

void to_bf16_rows(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb) {
  rows_to_blocks(x, M, K, ld, xb, nullptr);
}

KernelTable make_table(int64_t min_rows) {
  KernelTable t = avx512_kernels();
  t.bf16_gemm = bf16_gemm_cols;
  t.to_bf16_rows = to_bf16_rows;
  t.to_bf16_rows_split = rows_to_blocks;
  t.f16_split_min_rows = min_rows == 1 ? 1 : kF16SplitMinRows;
  t.bf16_gemm_min_rows = min_rows;
  t.self_attention_bf16 = amx_self_attention_bf16;
  t.self_attention_split = true;
  t.causal_attention_amx = true;
  t.bf16_path = "amx_bf16";
  return t;
}

}  // namespace

const KernelTable& amx_kernels(bool all_rows) {
  static const KernelTable all = make_table(1);
  static const KernelTable best = make_table(kAmxBf16MinRows);
  return all_rows ? all : best;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
