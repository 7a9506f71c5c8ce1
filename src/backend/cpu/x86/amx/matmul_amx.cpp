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
// The passes, the epilogues of edge blocks and the rounding of activation rows are
// gemm16_driver.h's (shared with VDPBF16PS and the AArch64 16-bit levels); here are the tile
// kernel, the repack and the split.
#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"

#include "backend/cpu/x86/amx/amx_tile.h"
#include "backend/cpu/x86/avx512/bf16_avx512.h"
#include "backend/cpu/x86/avx512/gemm16_avx512.h"

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

void prefetch(const uint16_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
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

// Accumulator tile t starts at the bias of panel column n (a stride-0 load repeats the 16
// floats in every row), or zero.
#define EVL_TILE_INIT(t, n)              \
  do {                                   \
    if (a.bias)                          \
      EVL_TILE_LOAD(t, a.bias + (n), 0); \
    else                                 \
      _tile_zero(t);                     \
  } while (0)

// The level's traits (gemm16_driver.h).
struct AmxBf16 : Gemm16Avx512 {
  // Register tile: 32 rows x 2 panels, the 2 x 2 accumulator tiles; a tile of 16 rows or of
  // one panel at the ends.
  static constexpr int kMR = 32, kMaxNP = 2;
  using RowTiles = Gemm16Rows<16, 32>;
  // Weight panels per pass: their repacked tiles (~1 MB) stay in L2 while the row blocks
  // sweep. kernels_bench, 1 thread, 1025 rows: 512 KB -> 1 MB took K=4096 from ~650 to ~790
  // GFLOP/s (the 32-row activation strip, 256 KB there, is reused by twice the panels), K=1024
  // equal; 1.5 MB was slower. Splitting K into 256-wide chunks (accumulators parked in L1) did
  // not help in an A/B run (within 3%).
  static constexpr int64_t kPassBytes = 1024 << 10;
  static constexpr bool kPanelsInPlace = true, kSplit = true;
  static constexpr int64_t kMinRows = kAmxBf16MinRows;
  static constexpr const char* kPath = "amx_bf16";
  static constexpr int64_t kLdc = 16 * kMaxNP;  // floats per row of the parked accumulators

  static void call_begin() {
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
    load_tile_config(c);
  }
  static void call_end() { _tile_release(); }

  // Weight rows 16p..16p+15 -> dst[k / 2][16 columns][2]: the VNNI-2 layout, zero past K and N
  // (with dst_lo: the lo parts of the split, into dst_lo).
  static void repack_panel(const Bf16GemmArgs& a, int64_t p, uint16_t* dst, uint16_t* dst_lo) {
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

  // Rows m0.. (ROWS: 16 or 32, one or two A tiles) x panels p.. (NP of 16 columns). Interior
  // blocks start from the bias and without a residual store straight into y; the others park
  // the accumulators in c for the driver's epilogue (masks, the residual, GELU into blocks).
  // SPLIT (Bf16GemmArgs::x_lo): each k step accumulates x_hi w_hi + x_hi w_lo + x_lo w_lo +
  // x_lo w_hi, each accumulator's products 4 tile ops apart like the plain step's; 10 tile
  // loads per 16 multiplies (each pair of loads is kept for two products).
  template <int ROWS, int NP, bool SPLIT>
  static Gemm16Acc tile(const Bf16GemmArgs& a, const Gemm16Tile& t, float* c) {
    constexpr int MR = ROWS / 16;
    const int64_t m0 = t.m0, p = t.p;
    const uint16_t* xa = t.x;
    const uint16_t* wb0 = t.w;
    const uint16_t* wb1 = t.w + (NP - 1) * t.ws;
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
      // Two k steps ahead into L1: tile loads from L2 stall the pipeline (tile registers are
      // not renamed). Past the end of a buffer prefetch does not fault.
      for (int l = 0; l < 16; ++l) {
        prefetch(wb0 + (k + 64) * 16 + 32 * l);
        if constexpr (NP == 2) prefetch(wb1 + (k + 64) * 16 + 32 * l);
        prefetch(xa + (k + 64) * 16 + 32 * l);
        if constexpr (MR == 2) prefetch(xa + 16 * a.ldx + (k + 64) * 16 + 32 * l);
      }
      EVL_TILE_LOAD(4, xa + k * 16, 64);
      EVL_TILE_LOAD(6, wb0 + k * 16, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NP == 2) EVL_TILE_LOAD(7, wb1 + k * 16, 64);
      if constexpr (NP == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (MR == 2) EVL_TILE_LOAD(5, xa + 16 * a.ldx + k * 16, 64);
      if constexpr (MR == 2) _tile_dpbf16ps(2, 5, 6);
      if constexpr (MR == 2 && NP == 2) _tile_dpbf16ps(3, 5, 7);
      // x_lo and w_lo sit at fixed distances from the hi tiles (both are panel-sized buffers).
      if constexpr (SPLIT)
        bf16_block_split_rest<MR, NP>(xa + k * 16, xa + 16 * a.ldx + k * 16, a.x_lo - a.xb,
                                      wb0 + k * 16, wb1 + k * 16, t.w_lo - t.w);
    }
    if (full && !a.residual && !a.yb) {
      float* y = a.y + m0 * a.N + 16 * p;
      const int64_t ld = 4 * a.N;
      EVL_TILE_STORE(0, y, ld);
      if constexpr (NP == 2) EVL_TILE_STORE(1, y + 16, ld);
      if constexpr (MR == 2) EVL_TILE_STORE(2, y + 16 * a.N, ld);
      if constexpr (MR == 2 && NP == 2) EVL_TILE_STORE(3, y + 16 * a.N + 16, ld);
      return Gemm16Acc::kStored;
    }
    // Row 16 i + r, panel j at c + (16 i + r) * kLdc + 16 j.
    EVL_TILE_STORE(0, c, 4 * kLdc);
    if constexpr (NP == 2) EVL_TILE_STORE(1, c + 16, 4 * kLdc);
    if constexpr (MR == 2) EVL_TILE_STORE(2, c + 16 * kLdc, 4 * kLdc);
    if constexpr (MR == 2 && NP == 2) EVL_TILE_STORE(3, c + 16 * kLdc + 16, 4 * kLdc);
    return full ? Gemm16Acc::kSumWithBias : Gemm16Acc::kSum;
  }

  static KernelTable base_table() { return avx512_kernels(); }
  static void finish_table(KernelTable& t, int64_t min_rows) {
    t.f16_split_min_rows = min_rows == 1 ? 1 : kF16SplitMinRows;
    t.self_attention_bf16 = amx_self_attention_bf16;
    t.self_attention_split = true;
    t.causal_attention_amx = true;
  }
};

}  // namespace

const KernelTable& amx_kernels(bool every_row) {
  return gemm16_kernels<AmxBf16>(every_row);
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
