// AMX-INT8 W8A8 / W4A8 GEMM (compiled with the AMX flag set; quant_dispatch.cpp calls it only
// after cpu_features() reported AMX-TILE/INT8 with the Linux tile-data permission granted).
//
// Tiles: tmm0..3 are a 2x2 grid of 16x16 int32 accumulators C[i][j] (tmm 2i+j) over 32
// activation rows x 2 weight panels; tmm4/5 hold two 16-row int8 activation tiles, tmm6/7 the
// two panels' weight tiles, so each A and B tile loaded feeds two TDPBSSD.
// Q8: the packed panel is already the B-tile layout (64-byte block b = tile row b: 16 rows x 4 k),
// so 16 consecutive blocks are one tile of 64 k; only the K tail (Kp % 64) is copied into a
// zero-padded tile so no load reads past the weights.
// Q4: each panel's nibbles are unpacked once per call into signed bytes c - z in [-15, 15]
// (per-thread buffer, reused by every row block), so the integer per group is
// sum xq * (c - z) = sum xq * c - z * sum xq exactly as quant.h defines it, without the
// zero-point correction per output. Groups are accumulated in their own C tiles (G = 32 uses
// 32-k tiles) and scaled in group order like the reference, so results are bit-identical to it.
// That per-group flush makes W4A8 tiles ~2x slower than W8A8's, so large calls (prefill) may
// instead requantize the Q4 panels to int8 per pass and run the Q8 loop (requant_q4_panel).
#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"

#include "backend/cpu/x86/amx/amx_tile.h"

#include <cstring>
#include <vector>

#include "backend/cpu/level_tables.h"
#include "backend/cpu/quant_table.h"

namespace edgevl::cpu {
namespace {

// A8 calls with fewer rows stay on AVX-512-VNNI. quant_bench BM_gemm_rows_* (K=896, N=4864,
// 1 thread, medians): Q8 AMX is 0.9x VNNI at M = 8, 1.7x at 12, 2.0x at 16; Q4 (G=32, whose
// per-call nibble unpack is a fixed cost) 0.7x at 8, 0.84x at 12, 1.0x at 16, 1.1x at 24.
constexpr int64_t kAmxMinRows = 16;
// W4A8 calls from this many rows requantize the weights to int8 (requant_q4_panel) when the
// caller allows it. quant_bench BM_gemm_rows_q4a8 (K=896, N=4864, 1 thread, ms, requantized vs
// the W4A8 tiles): M=16 0.57-0.60 vs 0.46-0.48, 24 0.63-0.66 vs 0.64-0.66, 32 0.68-0.70 vs
// 0.74-0.77, 64 0.82 vs 1.29-1.32; BM_gemm512_q4a8 4.4-4.8 vs 11.2-11.6 (the AMX-BF16 route
// this replaced, bf16 activations times dequantized weights: 5.2-6.2).
constexpr int64_t kQ4RequantMinRows = 24;

// kstep = k bytes per A tile row (64, or 32 for Q4 groups of 32).
TileConfig make_config(int kstep) {
  TileConfig c;
  for (int t = 0; t < 4; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  for (int t = 4; t < 6; ++t) c.rows[t] = 16, c.colsb[t] = uint16_t(kstep);
  for (int t = 6; t < 8; ++t) c.rows[t] = uint8_t(kstep / 4), c.colsb[t] = 64;
  return c;
}

// Per-thread buffers: the 2x2 C tiles as int32, the Q8 K-tail tiles, the unpacked Q4 panels and
// the Q4 float accumulators of one 32 x 32 block.
struct Scratch {
  alignas(64) int32_t c[2][4][16 * 16];  // two sets: see q4_block
  alignas(64) float facc[32][32];
  std::vector<int8_t> tails;  // Q8: the K-tail tile of each panel of a pass
  std::vector<int8_t> bq4;    // Q4: the unpacked panels of a pass
  std::vector<int8_t> at;     // the activations relaid out as A tiles (a_tiles)
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The A8 scaling of quant.h: y = float(acc) * (xs[m] * s[n]); the empty asm keeps each product
// rounded (no contraction into an FMA), as in the VNNI kernels.
__m512 mul_rounded(__m512 a, __m512 b) {
  __m512 r = _mm512_mul_ps(a, b);
  asm("" : "+v"(r));
  return r;
}

// Loop order: a pass of panels whose weight tiles (~kPassBytes) stay in L2 is swept by every
// 32-row block, the row block's activations staying in L1. The B tiles then stream as
// contiguous 1 KB blocks; the other order (panels outer) made the A tile loads, 16 rows of
// stride Kp from L2, the bottleneck.
constexpr int64_t kPassBytes = 512 << 10;
int64_t panels_per_pass(int64_t Kp) {
  const int64_t n = kPassBytes / (16 * Kp) / 2 * 2;
  return n > 2 ? n : 2;
}

__mmask16 col_mask(const QuantArgs& a, int64_t n) {
  const int64_t cnt = a.N - n >= 16 ? 16 : a.N - n;
  return __mmask16((1u << cnt) - 1u);
}

template <class T>
void prefetch(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

// Where the A tiles come from. For K up to kRelayoutMaxLdq the activation rows are relaid out
// as A tiles once per call: tile (i, t) = rows 16i..16i+15, k step t (kstep bytes each),
// 16 * kstep contiguous bytes, so a tile load reads whole consecutive cache lines, and a 32-row
// block (28 KB at K=896) stays in L1 while it sweeps a pass of panels. Loading those tiles
// straight from xq (16 rows of stride ldq, half lines for 32-k steps) stalled (~25% of the Q4
// kernel's samples). For larger K a block does not fit in L1 anyway, and the copy of all rows
// cost more than it saved (quant_bench q8a8 K=4864 N=896 M=128: 0.76 ms direct, 0.87 ms
// relaid out), so the tiles are loaded from xq, with the rows prefetched two steps ahead.
constexpr int64_t kRelayoutMaxLdq = 1024;

struct ATiles {
  const int8_t* at;
  int64_t row_tile_bytes;  // from row tile i to i + 1
  int64_t step_bytes;      // from k step t to t + 1
  int64_t stride;          // tile load stride (row to row within a tile)
  const int8_t* tile(int i, int64_t t) const { return at + i * row_tile_bytes + t * step_bytes; }
  ATiles rows_from(int64_t m0) const {
    return ATiles{tile(int(m0 / 16), 0), row_tile_bytes, step_bytes, stride};
  }
  bool direct() const { return stride != step_bytes / 16; }
};
ATiles a_tiles(const QuantArgs& a, int64_t rows, int kstep, std::vector<int8_t>& buf) {
  if (a.ldq > kRelayoutMaxLdq) return ATiles{a.xq, 16 * a.ldq, kstep, a.ldq};
  const int64_t steps = a.ldq / kstep;
  buf.resize(size_t(rows * a.ldq));
  int8_t* dst = buf.data();
  for (int64_t i = 0; i < rows / 16; ++i)
    for (int64_t t = 0; t < steps; ++t)
      for (int r = 0; r < 16; ++r) {
        const int8_t* src = a.xq + (16 * i + r) * a.ldq + t * kstep;
        int8_t* d = dst + ((i * steps + t) * 16 + r) * kstep;
        if (kstep == 64)
          _mm512_storeu_si512(d, _mm512_loadu_si512(src));
        else
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
      }
  return ATiles{dst, steps * 16 * kstep, 16 * kstep, kstep};
}

// Zeros the C tiles in use, then for each k step of one call of `tiles(t)` loads A (rows m0,
// m0 + 16) and B tiles and multiplies them: MR row tiles x NP panel tiles.
template <int MR, int NP, class B>
void tile_steps(const ATiles& xa, int64_t k0, int64_t steps, int kstep, B&& bptr) {
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t k = k0 + t * kstep, ts = k / kstep;
    // Two k steps ahead into L1 (Q8 +6-11% measured, Q4 neutral); prefetch past a buffer's end
    // does not fault.
    for (int l = 0; l < kstep / 4; ++l) {
      prefetch(bptr(0, k) + 32 * kstep + 64 * l);
      if constexpr (NP == 2) prefetch(bptr(1, k) + 32 * kstep + 64 * l);
    }
    if (xa.direct())
      for (int l = 0; l < 16; ++l) {
        prefetch(xa.tile(0, ts + 2) + l * xa.stride);
        if constexpr (MR == 2) prefetch(xa.tile(1, ts + 2) + l * xa.stride);
      }
    EVL_TILE_LOAD(4, xa.tile(0, ts), xa.stride);
    if constexpr (MR == 2) EVL_TILE_LOAD(5, xa.tile(1, ts), xa.stride);
    EVL_TILE_LOAD(6, bptr(0, k), 64);
    if constexpr (NP == 2) EVL_TILE_LOAD(7, bptr(1, k), 64);
    _tile_dpbssd(0, 4, 6);
    if constexpr (NP == 2) _tile_dpbssd(1, 4, 7);
    if constexpr (MR == 2) _tile_dpbssd(2, 5, 6);
    if constexpr (MR == 2 && NP == 2) _tile_dpbssd(3, 5, 7);
  }
}

template <int MR, int NP>
void zero_c() {
  _tile_zero(0);
  if constexpr (NP == 2) _tile_zero(1);
  if constexpr (MR == 2) _tile_zero(2);
  if constexpr (MR == 2 && NP == 2) _tile_zero(3);
}

template <int MR, int NP>
void store_c(int32_t (*c)[256]) {
  EVL_TILE_STORE(0, c[0], 64);
  if constexpr (NP == 2) EVL_TILE_STORE(1, c[1], 64);
  if constexpr (MR == 2) EVL_TILE_STORE(2, c[2], 64);
  if constexpr (MR == 2 && NP == 2) EVL_TILE_STORE(3, c[3], 64);
}

// ---------------------------------------------------------------- Q8

// A block of C tiles whose scaling is still to do: rows m0.., mr row tiles, panels p.., np of
// them, stored in s.c[buf].
struct PendingC {
  int64_t m0 = 0, p = 0;
  int mr = 0, np = 0, buf = 0;
};

// Where the Q8 panels of a pass are: panel p at w + (p - p_base) * q8_panel_bytes.
struct Q8Panels {
  const uint8_t* w;
  int64_t p_base;
  const uint8_t* panel(int64_t p, int64_t pb) const { return w + (p - p_base) * pb; }
};

// The Q8 epilogue of a stored block: y = float(acc) * (xs[m] * s[n]) (+ bias).
void q8_scale_block(const QuantArgs& a, const Q8Panels& w, const int32_t (*c)[256],
                    const PendingC& b) {
  const int64_t pb = qt_q8_panel_bytes(a.Kp);
  for (int j = 0; j < b.np; ++j) {
    const int64_t n = (b.p + j) * 16;
    if (n >= a.N) continue;
    const __mmask16 mk = col_mask(a, n);
    const __m512 sc =
        _mm512_loadu_ps(reinterpret_cast<const float*>(w.panel(b.p + j, pb) + 16 * a.Kp));
    const __m512 bias = a.bias ? _mm512_maskz_loadu_ps(mk, a.bias + n) : _mm512_setzero_ps();
    for (int i = 0; i < b.mr; ++i)
      for (int r = 0; r < 16; ++r) {
        const int64_t m = b.m0 + 16 * i + r;
        if (m >= a.M) break;
        const __m512 acc = _mm512_cvtepi32_ps(_mm512_load_si512(c[2 * i + j] + 16 * r));
        __m512 v = mul_rounded(acc, mul_rounded(_mm512_set1_ps(a.xs[m]), sc));
        if (a.bias) v = _mm512_add_ps(v, bias);
        _mm512_mask_storeu_ps(a.y + m * a.N + n, mk, v);
      }
  }
}

// Multiplies one block and stores its C tiles into s.c[buf], scaling the previous block (if
// any) while the tiles are in flight: the epilogue (a tile store, then 16 row scalings and
// output stores per tile) left the tile unit idle between blocks when it followed its own
// block's multiplications.
template <int MR, int NP>
void q8_block(const QuantArgs& a, Scratch& s, const ATiles& xa, const uint8_t* const* wp,
              const int8_t* const* tails, int64_t nfull, bool tail, const Q8Panels& w,
              const PendingC* prev, int buf) {
  zero_c<MR, NP>();
  tile_steps<MR, NP>(xa, 0, nfull, 64, [&](int j, int64_t k) { return wp[j] + (k / 64) * 1024; });
  if (tail) tile_steps<MR, NP>(xa, nfull * 64, 1, 64, [&](int j, int64_t) { return tails[j]; });
  if (prev) q8_scale_block(a, w, s.c[prev->buf], *prev);
  store_c<MR, NP>(s.c[buf]);
}

// Q8 panels [p0, p1) for all rows; `panels(pp, pe)` gives where a pass's panels are. A
// panel buffer that the next pass refills (own_buffer) has its last block scaled before that.
template <class Panels>
void q8_passes(const QuantArgs& a, int64_t p0, int64_t p1, bool own_buffer, Panels&& panels) {
  load_tile_config(make_config(64));
  Scratch& s = scratch();
  const int64_t pb = qt_q8_panel_bytes(a.Kp);
  const int64_t nfull = a.Kp / 64, rem = a.Kp % 64;
  const int64_t Mp = qt_round_up(a.M, 16);
  const int64_t pass = panels_per_pass(a.Kp);
  const ATiles all = a_tiles(a, Mp, 64, s.at);
  PendingC pending;
  Q8Panels pending_w{nullptr, 0};
  bool have_pending = false;
  for (int64_t pp = p0; pp < p1; pp += pass) {
    const int64_t pe = pp + pass < p1 ? pp + pass : p1;
    if (have_pending && own_buffer) {
      q8_scale_block(a, pending_w, s.c[pending.buf], pending);
      have_pending = false;
    }
    const Q8Panels w = panels(pp, pe);
    if (rem) {
      s.tails.assign(size_t((pe - pp) * 1024), 0);
      for (int64_t p = pp; p < pe; ++p)
        std::memcpy(s.tails.data() + (p - pp) * 1024, w.panel(p, pb) + nfull * 1024,
                    size_t(rem * 16));
    }
    for (int64_t m0 = 0; m0 < Mp; m0 += 32) {
      const bool two_rows = Mp - m0 >= 32;
      const ATiles xa = all.rows_from(m0);
      for (int64_t p = pp; p < pe; p += 2) {
        const int np = pe - p >= 2 ? 2 : 1;
        const uint8_t* wp[2] = {w.panel(p, pb), w.panel(p + np - 1, pb)};
        const int8_t* tails[2] = {s.tails.data() + (p - pp) * 1024,
                                  s.tails.data() + (p + np - 1 - pp) * 1024};
        const bool t = rem != 0;
        const PendingC* prev = have_pending ? &pending : nullptr;
        const Q8Panels& pw = have_pending ? pending_w : w;
        const int buf = have_pending ? 1 - pending.buf : 0;
        if (np == 2 && two_rows) q8_block<2, 2>(a, s, xa, wp, tails, nfull, t, pw, prev, buf);
        if (np == 2 && !two_rows) q8_block<1, 2>(a, s, xa, wp, tails, nfull, t, pw, prev, buf);
        if (np == 1 && two_rows) q8_block<2, 1>(a, s, xa, wp, tails, nfull, t, pw, prev, buf);
        if (np == 1 && !two_rows) q8_block<1, 1>(a, s, xa, wp, tails, nfull, t, pw, prev, buf);
        pending = PendingC{m0, p, two_rows ? 2 : 1, np, buf};
        pending_w = w;
        have_pending = true;
      }
    }
  }
  if (have_pending) q8_scale_block(a, pending_w, s.c[pending.buf], pending);
  _tile_release();
}

void q8_a8_amx(const QuantArgs& a, int64_t p0, int64_t p1) {
  q8_passes(a, p0, p1, false, [&](int64_t, int64_t) { return Q8Panels{a.w, 0}; });
}

// ---------------------------------------------------------------- Q4

// The 16 f16 scales of one Q4 group (quant.h) as floats.
__m512 load_scales(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q4 panel p -> a Q8 panel (quant.h; its row sums are not written: the AMX kernel does not
// read them): q = round((c - z) * s[n][g] / S[n]) with S[n] = max_g s[n][g] * R / 127, R the
// largest |c - z| (8 symmetric, 15 with zero points), so |q| <= 127. The Q4 weight within half
// a Q8 step of its row (max|w| / 254: the Q8 format's own rounding), which lets W4A8 prefill run
// at the int8 rate of W8A8 with one scaling per output instead of one per group of 32.
void requant_q4_panel(const QuantArgs& a, int64_t p, uint8_t* dst) {
  const int64_t G = a.group, ng = a.Kp / G;
  const layout::Q4Layout L = q4_layout_of(a);
  const uint8_t* wp = a.w + p * L.panel_bytes();
  __m512 smax = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g)
    smax = _mm512_max_ps(smax, _mm512_abs_ps(load_scales(wp + L.scales(g))));
  const __m512 S = _mm512_mul_ps(smax, _mm512_set1_ps((a.zero_point ? 15.f : 8.f) / 127.f));
  const __mmask16 nz = _mm512_cmp_ps_mask(S, _mm512_setzero_ps(), _CMP_GT_OQ);
  const __m512 inv_s = _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.f), S);
  _mm512_storeu_ps(reinterpret_cast<float*>(dst + 16 * a.Kp), S);
  const __m512i low = _mm512_set1_epi32(0x0F), byte = _mm512_set1_epi32(0xFF);
  for (int64_t g = 0; g < ng; ++g) {
    const __m512 f = _mm512_mul_ps(load_scales(wp + L.scales(g)), inv_s);
    const __m512i z = a.zero_point ? _mm512_cvtepu8_epi32(_mm_loadu_si128(
                                         reinterpret_cast<const __m128i*>(wp + L.zeros(g))))
                                   : _mm512_set1_epi32(8);
    // k = 8b + 4h + j: nibble h of byte j of each row's dword.
    const auto q = [&](__m512i raw, int shift) {
      const __m512i c = _mm512_and_si512(_mm512_srli_epi32(raw, unsigned(shift)), low);
      return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c, z)), f));
    };
    for (int64_t b = g * G / 8; b < (g + 1) * G / 8; ++b) {
      const __m512i raw = _mm512_loadu_si512(wp + L.codes(g) + (b - g * G / 8) * 64);
      for (int h = 0; h < 2; ++h) {
        const __m512i q0 = _mm512_and_si512(q(raw, 4 * h), byte);
        const __m512i q1 = _mm512_slli_epi32(_mm512_and_si512(q(raw, 8 + 4 * h), byte), 8);
        const __m512i q2 = _mm512_slli_epi32(_mm512_and_si512(q(raw, 16 + 4 * h), byte), 16);
        const __m512i q3 = _mm512_slli_epi32(q(raw, 24 + 4 * h), 24);
        _mm512_storeu_si512(dst + (2 * b + h) * 64,
                            _mm512_or_si512(_mm512_or_si512(q0, q1), _mm512_or_si512(q2, q3)));
      }
    }
  }
}

// W4A8 prefill: each pass's Q4 panels requantized into Q8 panels (above), then the Q8 kernel.
void q4_requant_a8_amx(const QuantArgs& a, int64_t p0, int64_t p1) {
  Scratch& s = scratch();
  const int64_t pb = qt_q8_panel_bytes(a.Kp);
  q8_passes(a, p0, p1, true, [&](int64_t pp, int64_t pe) {
    if (s.bq4.size() < size_t((pe - pp) * pb + 64)) s.bq4.resize(size_t((pe - pp) * pb + 64));
    auto* buf = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(s.bq4.data()) + 63) &
                                           ~uintptr_t(63));
    for (int64_t p = pp; p < pe; ++p) requant_q4_panel(a, p, buf + (p - pp) * pb);
    return Q8Panels{buf, pp};
  });
}

// Panel p -> dst[k / 4][64]: tile row k/4 holds c - z of k..k+3 for the 16 rows (the Q8 block
// layout), for all Kp k.
void unpack_q4_panel(const QuantArgs& a, int64_t p, int8_t* dst) {
  const int64_t G = a.group, ng = a.Kp / G;
  const layout::Q4Layout L = q4_layout_of(a);
  const uint8_t* wp = a.w + p * L.panel_bytes();
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t g = 0; g < ng; ++g) {
    // z of row r replicated into bytes 4r..4r+3, matching the block layout.
    const __m512i z =
        a.zero_point ? _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                              reinterpret_cast<const __m128i*>(wp + L.zeros(g)))),
                                          _mm512_set1_epi32(0x01010101))
                     : _mm512_set1_epi8(8);
    for (int64_t b = g * G / 8; b < (g + 1) * G / 8; ++b) {
      const __m512i raw = _mm512_loadu_si512(wp + L.codes(g) + (b - g * G / 8) * 64);
      _mm512_storeu_si512(dst + 2 * b * 64, _mm512_sub_epi8(_mm512_and_si512(raw, low), z));
      _mm512_storeu_si512(dst + (2 * b + 1) * 64,
                          _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low), z));
    }
  }
}

// facc[r][16j..] += float(c) * (xs[r] * scale[j]) for the valid rows r < rows of one group
// (the reference's per-group step; the C tile of rows 16i.., panel j is c[2i + j]).
template <int MR, int NP>
void scale_group(const int32_t (*c)[256], const float* xs, int64_t rows, const uint8_t* const* scl,
                 float (*facc)[32]) {
  for (int j = 0; j < NP; ++j) {
    const __m512 sc = load_scales(scl[j]);
    for (int i = 0; i < MR; ++i) {
      const int32_t* ct = c[2 * i + j];
      const int64_t n = rows - 16 * i < 16 ? rows - 16 * i : 16;
      const auto row = [&](int64_t r) {
        const __m512 acc = _mm512_cvtepi32_ps(_mm512_load_si512(ct + 16 * r));
        const __m512 v = mul_rounded(acc, mul_rounded(_mm512_set1_ps(xs[16 * i + r]), sc));
        float* f = facc[16 * i + r] + 16 * j;
        _mm512_store_ps(f, _mm512_add_ps(_mm512_load_ps(f), v));
      };
      if (n == 16) {  // the common case, unrolled (this loop runs once per group)
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) row(r);
      } else {
        for (int64_t r = 0; r < n; ++r) row(r);
      }
    }
  }
}

template <int MR, int NP>
void q4_block(const QuantArgs& a, Scratch& s, const ATiles& xa, int64_t m0, int64_t p,
              const int8_t* const* bq, int kstep) {
  const int64_t G = a.group, ng = a.Kp / G;
  const layout::Q4Layout L = q4_layout_of(a);
  const int64_t pb = L.panel_bytes();
  const int64_t rows = a.M - m0 < 16 * MR ? a.M - m0 : 16 * MR;
  const uint8_t* panels[2] = {a.w + p * pb, a.w + (p + NP - 1) * pb};
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < NP; ++j) _mm512_store_ps(s.facc[r] + 16 * j, _mm512_setzero_ps());
  // Software pipeline: the tiles of group g are multiplied while the vector units scale group
  // g - 1 from the other C buffer (without it each group waits for its own tile store).
  for (int64_t g = 0; g <= ng; ++g) {
    if (g < ng) {
      zero_c<MR, NP>();
      tile_steps<MR, NP>(xa, g * G, G / kstep, kstep,
                         [&](int j, int64_t k) { return bq[j] + (k / 4) * 64; });
    }
    if (g > 0) {
      const uint8_t* scl[2] = {panels[0] + L.scales(g - 1), panels[1] + L.scales(g - 1)};
      scale_group<MR, NP>(s.c[(g - 1) & 1], a.xs + m0, rows, scl, s.facc);
    }
    if (g < ng) store_c<MR, NP>(s.c[g & 1]);
  }
  for (int j = 0; j < NP; ++j) {
    const int64_t n = (p + j) * 16;
    if (n >= a.N) continue;
    const __mmask16 mk = col_mask(a, n);
    const __m512 bias = a.bias ? _mm512_maskz_loadu_ps(mk, a.bias + n) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      __m512 v = _mm512_load_ps(s.facc[r] + 16 * j);
      if (a.bias) v = _mm512_add_ps(v, bias);
      _mm512_mask_storeu_ps(a.y + (m0 + r) * a.N + n, mk, v);
    }
  }
}

void q4_a8_amx(const QuantArgs& a, int64_t p0, int64_t p1) {
  const int kstep = a.group == 32 ? 32 : 64;
  load_tile_config(make_config(kstep));
  Scratch& s = scratch();
  const int64_t panel_tile_bytes = 16 * a.Kp;  // Kp / 4 tile rows of 64 bytes
  const int64_t pass = panels_per_pass(a.Kp);
  const int64_t Mp = qt_round_up(a.M, 16);
  const ATiles all = a_tiles(a, Mp, kstep, s.at);
  for (int64_t pp = p0; pp < p1; pp += pass) {
    const int64_t pe = pp + pass < p1 ? pp + pass : p1;
    if (s.bq4.size() < size_t((pe - pp) * panel_tile_bytes))
      s.bq4.resize(size_t((pe - pp) * panel_tile_bytes));
    for (int64_t p = pp; p < pe; ++p)
      unpack_q4_panel(a, p, s.bq4.data() + (p - pp) * panel_tile_bytes);
    for (int64_t m0 = 0; m0 < Mp; m0 += 32) {
      const bool two_rows = Mp - m0 >= 32;
      const ATiles xa = all.rows_from(m0);
      for (int64_t p = pp; p < pe; p += 2) {
        const int np = pe - p >= 2 ? 2 : 1;
        const int8_t* bq[2] = {s.bq4.data() + (p - pp) * panel_tile_bytes,
                               s.bq4.data() + (p + np - 1 - pp) * panel_tile_bytes};
        if (np == 2 && two_rows) q4_block<2, 2>(a, s, xa, m0, p, bq, kstep);
        if (np == 2 && !two_rows) q4_block<1, 2>(a, s, xa, m0, p, bq, kstep);
        if (np == 1 && two_rows) q4_block<2, 1>(a, s, xa, m0, p, bq, kstep);
        if (np == 1 && !two_rows) q4_block<1, 1>(a, s, xa, m0, p, bq, kstep);
      }
    }
  }
  _tile_release();
}

QuantTable make_amx_table(int64_t min_rows) {
  const QuantTable& vnni = quant_avx512vnni_kernels();
  QuantTable t = vnni;
  t.name = "amx+avx512vnni";
  t.q8_x_biased = false;  // TDPBSSD multiplies signed by signed bytes
  t.q8_a8 = q8_a8_amx;
  t.q4_a8 = q4_a8_amx;
  t.fallback = &vnni;
  t.min_rows_a8 = min_rows;
  t.ldq_align = 64;
  t.row_align = 16;
  t.panel_align = 2;  // the 2 panels of a 2x2 block of C tiles
  t.even_chunks = true;
  t.q4_group_sums = false;  // c - z is unpacked into the weight tiles
  // The forced "amx" level (every_row) keeps q4_a8 at every M: it is the W4A8 kernel the
  // bit-identity tests check.
  if (min_rows > 1) {
    t.q4_prefill = q4_requant_a8_amx;
    t.q4_prefill_min_rows = kQ4RequantMinRows;
  }
  return t;
}

}  // namespace

const QuantTable& quant_amx_kernels(bool every_row) {
  return level_table<make_amx_table, kAmxMinRows>(every_row);
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
