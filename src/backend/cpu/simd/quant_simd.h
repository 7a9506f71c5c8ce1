#pragma once
// Quantized matmul kernels written once over an integer/float vector-traits type Q (see
// quant_avx2.cpp, quant_avx512vnni.cpp). Each ISA file includes this after defining its traits
// and instantiates the table for its Q; the anonymous namespace keeps every instantiation
// private to that file.
//
// A8 kernels: a register tile of MR activation rows x NP weight panels (16 outputs each) keeps
// MR*NP*16 int32 accumulators; per 4 k it loads NP 64-byte weight blocks and broadcasts one
// int32 (4 int8 activations) per row, so every weight block loaded is used MR times (prefill)
// and the weights stream through exactly once for M = 1 (decode).
// A16 kernels: a 128-deep slice of NP panels is dequantized into a float scratch ([k][16*NP],
// L1-resident), then MR rows x NP panels of float FMA run over it; partial sums live in y.
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/quant_table.h"
#include "backend/cpu/simd/quant_q4_gemv.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

template <class T>
constexpr T qmin(T a, T b) {
  return a < b ? a : b;
}

inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---------------------------------------------------------------- activations

template <class Q>
void quantize_rows_v(const float* x, int64_t M, int64_t K, int64_t ldq, int8_t* xq, float* xs,
                     bool biased) {
  for (int64_t m = 0; m < M; ++m) {
    const float amax = Q::absmax(x + m * K, K);
    xs[m] = amax / 127.f;
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    int8_t* q = xq + m * ldq;
    Q::quant_row(x + m * K, K, inv, q);
    for (int64_t k = K; k < ldq; ++k) q[k] = 0;
    // The row is in L1; a separate pass over the whole buffer (scalar in the dispatcher, which
    // has no ISA flags) took longer than the quantization itself.
    if (biased) {
      auto* u = reinterpret_cast<uint8_t*>(q);
      for (int64_t k = 0; k < ldq; ++k) u[k] ^= 0x80;
    }
  }
}

// ---------------------------------------------------------------- shared pieces

// Calls of at most this many rows (decode, decode batches) stream their weights from DRAM once
// and spend little compute per byte: their A8 kernels prefetch along every panel stream.
constexpr int64_t kStreamRows = 16;

// Software prefetch distance (bytes) along each panel stream in the decode (M = 1) kernels.
// Prefetching past a panel's end touches at most a tile's panels and this far past the packed
// weight, which prefetch tolerates (no fault).
constexpr int64_t kPrefetchAhead = 1024;

// Q8 x A8 tiles of several rows (kStreamRows at most) prefetch each panel stream twice: to L1
// kBatchPrefetchL1 bytes ahead and to L2 kBatchPrefetchL2 ahead. quant_bench
// BM_batch_q8a8_cold/2/{4,9,16} (Zen 4, 2 threads, us, medians of 3, two sweeps): one L1
// prefetch 4 KB ahead 163-171 / 181-201 / 223-286; L1 512 + L2 4096 115-129 / 139-146 /
// 214-220; L1 1024 + L2 4096, 8192 or 16384 and L1 2048 + L2 8192 or 16384 in between (131-161
// at 9 rows). The 1-row GEMV measured no different with the pair (124-170 against 146-154), so
// decode keeps its one prefetch; W4A8 tiles (longer compute per byte) gained nothing either.
constexpr int64_t kBatchPrefetchL1 = 512, kBatchPrefetchL2 = 4096;

// A hint to bring the line at p into L2 (and not L1): prefetcht1 on x86, prfm pldl2keep on
// AArch64.
inline void prefetch_l2(const void* p) {
  __builtin_prefetch(p, 0, 2);
}

// Where panel stream j of an MR x NP tile at wp (panels of pb bytes each) prefetches when the
// consumer is `off` bytes into its panel. Tiles of several rows (decode batches, speculative
// verification) continue past the panel's end in stream j's panel of the next tile
// (wp + NP * pb), the tile this thread most often computes next; running on into panel j + 1
// instead fetches lines that stream j + 1 is reading already and leaves the next tile's other
// streams to start cold. quant_bench BM_batch_q8a8_cold/2/9 (Zen 5, us, medians of 3, 4
// alternated pairs): 137-156 -> 119-136; BM_batch_q4a8_cold/2/8 145-184 -> 141-160. Decode
// (MR = 1) keeps running on: there the next tile measured slower end to end (`edgevl bench
// --tg 64`, qwen2-0.5b w8a8, 2 threads, 6 alternated pairs: 66-80 against 67-88 tok/s, 5 of 6
// slower), though a single-matrix GEMV was no slower.
template <int MR, int NP>
inline const uint8_t* stream_ahead(const uint8_t* wp, int j, int64_t pb, int64_t off) {
  if (MR == 1 || off < pb) return wp + j * pb + off;
  return wp + (NP + j) * pb + (off - pb);
}

// Byte KK of every 32-bit lane of a Q8 block (weight k = KK of 4 rows) as floats, exactly. A
// traits type may give byte_f<KK> when it has a shorter form than sign-extending and
// converting (NEON: one table lookup and a fixed-point convert instead of two shifts and a
// convert, a fifth of the A16 head's instructions).
template <class Q, int KK>
typename Q::F q8_byte_f(typename Q::I raw) {
  if constexpr (requires { Q::template byte_f<KK>(raw); })
    return Q::template byte_f<KK>(raw);
  else
    return Q::cvt(Q::template sext<KK>(raw));
}

// Writes one output vector (panel lanes starting at column n) of row m: v (+ bias), only the
// columns < N.
template <class Q>
void store_out(const QuantArgs& a, int64_t m, int64_t n, typename Q::F v) {
  if (n >= a.N) return;
  const int cnt = int(qmin<int64_t>(Q::W, a.N - n));
  if (cnt == Q::W) {
    if (a.bias) v = Q::addf(v, Q::loadf(a.bias + n));
    Q::storef(a.y + m * a.N + n, v);
  } else {
    if (a.bias) v = Q::addf(v, Q::loadf_n(a.bias + n, cnt));
    Q::storef_n(a.y + m * a.N + n, v, cnt);
  }
}

// Runs k.template operator()<MR', NP>(m0, p) for the row count mr <= MR.
template <int MR, int NP, class Kern>
void run_rows(int mr, Kern& k, int64_t m0, int64_t p) {
  if constexpr (MR >= 1) {
    if (mr == MR) return k.template operator()<MR, NP>(m0, p);
    return run_rows<MR - 1, NP>(mr, k, m0, p);
  }
}

// Panels [p0, p1) x all rows. M == 1 (decode) uses a block of NPV panels so that enough
// independent accumulator chains are in flight; otherwise MR x NP register tiles, the NP
// panels' weights staying in cache while all row tiles pass over them.
template <int MR, int NP, int NPV, class Kern>
void drive_a8(const QuantArgs& a, int64_t p0, int64_t p1, Kern& k) {
  int64_t p = p0;
  if (a.M == 1) {
    for (; p + NPV <= p1; p += NPV) k.template operator()<1, NPV>(0, p);
    for (; p < p1; ++p) k.template operator()<1, 1>(0, p);
    return;
  }
  while (p < p1) {
    const bool full = p1 - p >= NP;
    for (int64_t m0 = 0; m0 < a.M; m0 += MR) {
      const int mr = int(qmin<int64_t>(MR, a.M - m0));
      if (full)
        run_rows<MR, NP>(mr, k, m0, p);
      else
        run_rows<MR, 1>(mr, k, m0, p);
    }
    p += full ? NP : 1;
  }
}

// ---------------------------------------------------------------- Q8 x A8

// Panel p of the output is read at w + (p - p_base) * q8_panel_bytes (the packed weights, or a
// buffer of requantized panels starting at panel p_base: see q4_prefill_v).
template <class Q>
struct Q8A8 {
  const QuantArgs& a;
  const uint8_t* w;
  int64_t p_base;
  bool stream = a.M <= kStreamRows;  // prefetch the weights (see kStreamRows)
  template <int MR, int NP>
  void operator()(int64_t m0, int64_t p0) const {
    using I = typename Q::I;
    constexpr int VP = 16 / Q::W;
    const int64_t pb = qt_q8_panel_bytes(a.Kp);
    const uint8_t* wp = w + (p0 - p_base) * pb;
    const int8_t* xr = a.xq + m0 * a.ldq;
    I acc[MR][NP][VP];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) acc[i][j][v] = Q::izero();
    const int64_t nb = a.Kp / 4;
    if (stream)  // decode: the panels' scales and sums, read after the loop
      for (int j = 0; j < NP; ++j) {
        Q::prefetch(wp + j * pb + 16 * a.Kp);
        Q::prefetch(wp + j * pb + 16 * a.Kp + 64);
      }
    for (int64_t b = 0; b < nb; ++b) {
      I w[NP][VP];
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) w[j][v] = Q::loadi(wp + j * pb + b * 64 + v * Q::W * 4);
      // Decode: the weights come from DRAM. A tile of several rows (a decode batch, a
      // speculative verification) streams fewer panels at once and computes longer per block,
      // so it keeps more lines in flight with two prefetches per stream (kBatchPrefetchL2 has
      // the figures). With one L1 prefetch the 9-row call cost the 1-row call plus most of
      // its compute; presumably L1's few miss buffers capped the lines in flight, which L2
      // prefetches are not held to (no counters here to show it).
      if (stream) {
        for (int j = 0; j < NP; ++j) {
          if constexpr (MR == 1) {
            Q::prefetch(stream_ahead<MR, NP>(wp, j, pb, b * 64 + kPrefetchAhead));
          } else {
            Q::prefetch(stream_ahead<MR, NP>(wp, j, pb, b * 64 + kBatchPrefetchL1));
            prefetch_l2(stream_ahead<MR, NP>(wp, j, pb, b * 64 + kBatchPrefetchL2));
          }
        }
      }
      for (int i = 0; i < MR; ++i) {
        const I xb = Q::bcast8(load4(xr + i * a.ldq + 4 * b));
        for (int j = 0; j < NP; ++j)
          for (int v = 0; v < VP; ++v) acc[i][j][v] = Q::dot8(acc[i][j][v], w[j][v], xb);
      }
    }
    for (int j = 0; j < NP; ++j)
      for (int v = 0; v < VP; ++v) {
        const uint8_t* tail = wp + j * pb + 16 * a.Kp + v * Q::W * 4;
        const auto s = Q::loadf(reinterpret_cast<const float*>(tail));
        [[maybe_unused]] const I wsum = Q::loadi(tail + 64);
        for (int i = 0; i < MR; ++i) {
          I r = acc[i][j][v];
          if constexpr (Q::kQ8Biased) r = Q::sub(r, Q::slli7(wsum));
          const auto f = Q::mulf(Q::cvt(r), Q::mulf(Q::set1f(a.xs[m0 + i]), s));
          store_out<Q>(a, m0 + i, (p0 + j) * 16 + v * Q::W, f);
        }
      }
  }
};

template <class Q>
void q8_a8_v(const QuantArgs& a, int64_t p0, int64_t p1) {
  Q8A8<Q> k{a, a.w, 0};
  // Decode batches on levels with a row count of their own for them (Q::MR8B, see Avx2Q).
  if constexpr (requires { Q::MR8B; })
    if (a.M > 1 && a.M <= kStreamRows) return drive_a8<Q::MR8B, Q::NP8, Q::NPV>(a, p0, p1, k);
  drive_a8<Q::MR8, Q::NP8, Q::NPV>(a, p0, p1, k);
}

// ---------------------------------------------------------------- Q4 x A8

template <class Q>
struct Q4A8 {
  const QuantArgs& a;
  bool stream = a.M <= kStreamRows;  // prefetch the weights (see kStreamRows)
  template <int MR, int NP>
  void operator()(int64_t m0, int64_t p0) const {
    using I = typename Q::I;
    using F = typename Q::F;
    constexpr int VP = 16 / Q::W;
    const int64_t G = a.group, ng = a.Kp / G;
    const layout::Q4Layout L = q4_layout_of(a);
    const int64_t pb = L.panel_bytes();
    const uint8_t* wp = a.w + p0 * pb;
    const int8_t* xr = a.xq + m0 * a.ldq;
    F facc[MR][NP][VP];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) facc[i][j][v] = Q::zerof();
    for (int64_t g = 0; g < ng; ++g) {
      I acc[MR][NP][VP];
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NP; ++j)
          for (int v = 0; v < VP; ++v) acc[i][j][v] = Q::izero();
      // The scales sit in the panel's one stream (quant.h): the prefetches along the codes run
      // through their lines too, but for one line per pair of groups, which the hardware's
      // stream prefetcher covers (an explicit prefetch of it measured no different).
      const uint8_t* wg = wp + L.codes(g);
      const int8_t* xg = xr + g * G;
      // Levels with kQ4Blocks16 > 0 sum that many blocks in int16 lanes before widening.
      [[maybe_unused]] I acc16[MR][NP][VP];
      if constexpr (Q::kQ4Blocks16 > 0)
        for (int i = 0; i < MR; ++i)
          for (int j = 0; j < NP; ++j)
            for (int v = 0; v < VP; ++v) acc16[i][j][v] = Q::izero();
      // The prefetches run kPrefetchAhead along each panel's stream from its code blocks; the
      // pair's tail lines (scales, zero points) get theirs with the pair's last block, or the
      // stream would have a line per pair no prefetch covers.
      const bool pair_end = g % 2 == 1 || g + 1 == ng;
      for (int64_t b = 0; b < G / 8; ++b) {
        I lo[NP][VP], hi[NP][VP];
        if (stream) {
          const int64_t off = L.codes(g) + b * 64 + kPrefetchAhead;
          for (int j = 0; j < NP; ++j) Q::prefetch(stream_ahead<MR, NP>(wp, j, pb, off));
          if (pair_end && b + 1 == G / 8)
            for (int64_t t = 64; t <= L.tail_bytes(); t += 64)
              for (int j = 0; j < NP; ++j) Q::prefetch(stream_ahead<MR, NP>(wp, j, pb, off + t));
        }
        for (int j = 0; j < NP; ++j)
          for (int v = 0; v < VP; ++v) {
            const I raw = Q::loadi(wg + j * pb + b * 64 + v * Q::W * 4);
            lo[j][v] = Q::nib_lo(raw);
            hi[j][v] = Q::nib_hi(raw);
          }
        for (int i = 0; i < MR; ++i) {
          const I x0 = Q::bcast4(load4(xg + i * a.ldq + 8 * b));
          const I x1 = Q::bcast4(load4(xg + i * a.ldq + 8 * b + 4));
          for (int j = 0; j < NP; ++j)
            for (int v = 0; v < VP; ++v) {
              if constexpr (Q::kQ4Blocks16 > 0) {
                acc16[i][j][v] = Q::dot4_pair16(acc16[i][j][v], lo[j][v], x0, hi[j][v], x1);
              } else {
                acc[i][j][v] = Q::dot4(acc[i][j][v], lo[j][v], x0);
                acc[i][j][v] = Q::dot4(acc[i][j][v], hi[j][v], x1);
              }
            }
        }
        if constexpr (Q::kQ4Blocks16 > 0)
          if ((b + 1) % Q::kQ4Blocks16 == 0 || b + 1 == G / 8)
            for (int i = 0; i < MR; ++i)
              for (int j = 0; j < NP; ++j)
                for (int v = 0; v < VP; ++v) {
                  acc[i][j][v] = Q::widen16(acc[i][j][v], acc16[i][j][v]);
                  acc16[i][j][v] = Q::izero();
                }
      }
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) {
          const uint8_t* panel = wp + j * pb;
          const F s = Q::loadh(panel + L.scales(g) + v * Q::W * 2);
          const I z = a.zero_point ? Q::load_u8x(panel + L.zeros(g) + v * Q::W) : Q::set1i(8);
          for (int i = 0; i < MR; ++i) {
            // Symmetric: z = 8 in every lane, so z * sum is one scalar product (vpmulld is slow).
            const int32_t xgs = a.xgs[(m0 + i) * ng + g];
            const I zs = a.zero_point ? Q::mullo(z, Q::set1i(xgs)) : Q::set1i(8 * xgs);
            const I r = Q::sub(acc[i][j][v], zs);
            facc[i][j][v] =
                Q::addf(facc[i][j][v], Q::mulf(Q::cvt(r), Q::mulf(Q::set1f(a.xs[m0 + i]), s)));
          }
        }
    }
    for (int j = 0; j < NP; ++j)
      for (int v = 0; v < VP; ++v)
        for (int i = 0; i < MR; ++i)
          store_out<Q>(a, m0 + i, (p0 + j) * 16 + v * Q::W, facc[i][j][v]);
  }
};

// Decode (M = 1) on levels that opt in (Q::kQ4Gemv): the GEMV shaped for the registers
// (quant_q4_gemv.h), NPV4 panels a step.
template <class Q>
constexpr bool q4_gemv_v() {
  if constexpr (requires { Q::kQ4Gemv; })
    return Q::kQ4Gemv;
  else
    return false;
}

template <class Q, int MR, int NP>
void q4_gemv_step(const QuantArgs& a, int64_t m0, int64_t p) {
  alignas(64) float out[MR * 16 * NP];
  q4a8_gemv_panels<Q, MR, NP>(a, m0, p, kPrefetchAhead, out);
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < 16 * NP / Q::W; ++v)
      store_out<Q>(a, m0 + i, p * 16 + v * Q::W, Q::loadf(out + i * 16 * NP + v * Q::W));
}

// Rows m0 .. m0 + mr - 1 (mr <= MR) of panel p.
template <class Q, int MR>
void q4_gemv_rows(const QuantArgs& a, int mr, int64_t m0, int64_t p) {
  if constexpr (MR >= 1) {
    if (mr == MR) return q4_gemv_step<Q, MR, 1>(a, m0, p);
    return q4_gemv_rows<Q, MR - 1>(a, mr, m0, p);
  }
}

template <class Q>
void q4_a8_v(const QuantArgs& a, int64_t p0, int64_t p1) {
  if constexpr (q4_gemv_v<Q>()) {
    if (a.M == 1) {
      int64_t p = p0;
      for (; p + Q::NPV4 <= p1; p += Q::NPV4) q4_gemv_step<Q, 1, Q::NPV4>(a, 0, p);
      for (; p < p1; ++p) q4_gemv_step<Q, 1, 1>(a, 0, p);
      return;
    }
    // Decode batches: tiles of up to 4 rows x 1 panel, each weight block unpacked once for
    // them; the panel stays in L1 while the row tiles pass over it.
    if (a.M <= kStreamRows) {
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t m0 = 0; m0 < a.M; m0 += 4)
          q4_gemv_rows<Q, 4>(a, int(qmin<int64_t>(4, a.M - m0)), m0, p);
      return;
    }
  }
  Q4A8<Q> k{a};
  drive_a8<Q::MR4, Q::NP4, Q::NPV4>(a, p0, p1, k);
}

// ---------------------------------------------------------------- Q4 prefill: requantized

// Q4 panel p -> a Q8 panel (quant.h layout, row sums included) with one scale per row:
// S[n] = max_g |s[n][g]| * R / 127 (R = 8 symmetric, 15 with zero points, the largest |c - z|),
// q = round_even((c - z) * (s[n][g] * (1 / S[n]))), so |q| <= 127 and each weight stays within
// half a Q8 step of its Q4 value. The same arithmetic as the AMX route (requant_q4_panel in
// quant_amx.cpp) and the scalar model in quant_test.cpp (Q4RequantPrefillMatchesOracle).
template <class Q>
void requant_q4_panel_v(const QuantArgs& a, int64_t p, uint8_t* dst) {
  using I = typename Q::I;
  using F = typename Q::F;
  constexpr int VP = 16 / Q::W;
  const int64_t G = a.group, ng = a.Kp / G;
  const layout::Q4Layout L = q4_layout_of(a);
  const uint8_t* wp = a.w + p * L.panel_bytes();
  // The group's 16 scales as floats (f16 in the panel).
  alignas(64) float sg[16];
  const auto load_scales = [&](int64_t g) {
    for (int v = 0; v < VP; ++v)
      Q::storef(sg + v * Q::W, Q::loadh(wp + L.scales(g) + v * Q::W * 2));
  };
  alignas(64) float S[16], inv_s[16], f[16];
  for (int r = 0; r < 16; ++r) S[r] = 0.f;
  for (int64_t g = 0; g < ng; ++g) {
    load_scales(g);
    for (int r = 0; r < 16; ++r) {
      const float av = sg[r] < 0.f ? -sg[r] : sg[r];
      if (av > S[r]) S[r] = av;
    }
  }
  for (int r = 0; r < 16; ++r) {
    S[r] = S[r] * ((a.zero_point ? 15.f : 8.f) / 127.f);
    inv_s[r] = S[r] > 0.f ? 1.f / S[r] : 0.f;
  }
  std::memcpy(dst + 16 * a.Kp, S, 64);
  I sum[VP];
  for (int v = 0; v < VP; ++v) sum[v] = Q::izero();
  for (int64_t g = 0; g < ng; ++g) {
    load_scales(g);
    for (int r = 0; r < 16; ++r) f[r] = sg[r] * inv_s[r];
    for (int v = 0; v < VP; ++v) {
      const F fv = Q::loadf(f + v * Q::W);
      const I z = a.zero_point ? Q::load_u8x(wp + L.zeros(g) + v * Q::W) : Q::set1i(8);
      const auto q = [&](I c) { return Q::cvtr(Q::mulf(Q::cvt(Q::sub(c, z)), fv)); };
      for (int64_t b = g * G / 8; b < (g + 1) * G / 8; ++b) {
        const I raw = Q::loadi(wp + L.codes(g) + (b - g * G / 8) * 64 + v * Q::W * 4);
        // k = 8b + 4h + i: nibble h of byte i of each row's dword -> byte i of block 2b + h.
        const auto put = [&](int h, I q0, I q1, I q2, I q3) {
          sum[v] = Q::addi(sum[v], Q::addi(Q::addi(q0, q1), Q::addi(q2, q3)));
          const I lo =
              Q::ori(Q::andi(q0, Q::set1i(0xFF)), Q::template slli<8>(Q::andi(q1, Q::set1i(0xFF))));
          const I hi =
              Q::ori(Q::template slli<16>(Q::andi(q2, Q::set1i(0xFF))), Q::template slli<24>(q3));
          Q::storei(dst + (2 * b + h) * 64 + v * Q::W * 4, Q::ori(lo, hi));
        };
        put(0, q(Q::template nib<0>(raw)), q(Q::template nib<8>(raw)), q(Q::template nib<16>(raw)),
            q(Q::template nib<24>(raw)));
        put(1, q(Q::template nib<4>(raw)), q(Q::template nib<12>(raw)), q(Q::template nib<20>(raw)),
            q(Q::template nib<28>(raw)));
      }
    }
  }
  for (int v = 0; v < VP; ++v) Q::storei(dst + 16 * a.Kp + 64 + v * Q::W * 4, sum[v]);
}

// W4A8 prefill (QuantTable::q4_prefill): each NP8 panels requantized to Q8 (above) into a
// per-thread buffer right before the Q8 register tiles sweep all rows over them, so the int8
// panels are written and read from L1 / L2 and W4A8 runs at the W8A8 rate with one scaling per
// output instead of one per group.
template <class Q>
void q4_prefill_v(const QuantArgs& a, int64_t p0, int64_t p1) {
  thread_local std::vector<uint8_t> buf;
  const int64_t pb = qt_q8_panel_bytes(a.Kp);
  constexpr int64_t pass = Q::NP8;
  if (buf.size() < size_t(pass * pb + 64)) buf.resize(size_t(pass * pb + 64));
  uint8_t* b = align64(buf.data());
  for (int64_t pp = p0; pp < p1; pp += pass) {
    const int64_t pe = qmin(pp + pass, p1);
    for (int64_t p = pp; p < pe; ++p) requant_q4_panel_v<Q>(a, p, b + (p - pp) * pb);
    Q8A8<Q> k{a, b, pp};
    drive_a8<Q::MR8, Q::NP8, Q::NPV>(a, pp, pe, k);
  }
}

// ---------------------------------------------------------------- A16 (dequantize + FMA)

constexpr int64_t kA16Depth = 128;  // k slice; a multiple of every group size

// Small M (decode): dequantize in registers and FMA straight from the packed weights, so the
// weights stream through once with no scratch round trip. Two accumulators per output vector
// (alternating k) halve the FMA dependency chains. x is read from the zero-padded copy xpad.
template <class Q>
struct A16DirectQ8 {
  const QuantArgs& a;
  template <int MR, int NP>
  void operator()(int64_t m0, int64_t p0) const {
    using F = typename Q::F;
    constexpr int VP = 16 / Q::W;
    const int64_t pb = qt_q8_panel_bytes(a.Kp);
    const uint8_t* wp = a.w + p0 * pb;
    const float* xr = a.xpad + m0 * a.Kp;
    F acc[MR][NP][VP][2];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) acc[i][j][v][0] = acc[i][j][v][1] = Q::zerof();
    for (int64_t b = 0; b < a.Kp / 4; ++b)
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) {
          if (MR == 1 && v == 0) Q::prefetch(wp + j * pb + b * 64 + kPrefetchAhead);
          const auto raw = Q::loadi(wp + j * pb + b * 64 + v * Q::W * 4);
          const F w0 = q8_byte_f<Q, 0>(raw), w1 = q8_byte_f<Q, 1>(raw);
          const F w2 = q8_byte_f<Q, 2>(raw), w3 = q8_byte_f<Q, 3>(raw);
          for (int i = 0; i < MR; ++i) {
            const float* xk = xr + i * a.Kp + 4 * b;
            acc[i][j][v][0] = Q::fmaf(Q::set1f(xk[0]), w0, acc[i][j][v][0]);
            acc[i][j][v][1] = Q::fmaf(Q::set1f(xk[1]), w1, acc[i][j][v][1]);
            acc[i][j][v][0] = Q::fmaf(Q::set1f(xk[2]), w2, acc[i][j][v][0]);
            acc[i][j][v][1] = Q::fmaf(Q::set1f(xk[3]), w3, acc[i][j][v][1]);
          }
        }
    for (int j = 0; j < NP; ++j)
      for (int v = 0; v < VP; ++v) {
        const F s =
            Q::loadf(reinterpret_cast<const float*>(wp + j * pb + 16 * a.Kp + v * Q::W * 4));
        for (int i = 0; i < MR; ++i)
          store_out<Q>(a, m0 + i, (p0 + j) * 16 + v * Q::W,
                       Q::mulf(Q::addf(acc[i][j][v][0], acc[i][j][v][1]), s));
      }
  }
};

// Per group: acc = sum x * c (codes as floats), then y += s * (acc - z * sum x).
template <class Q>
struct A16DirectQ4 {
  const QuantArgs& a;
  template <int MR, int NP>
  void operator()(int64_t m0, int64_t p0) const {
    using F = typename Q::F;
    constexpr int VP = 16 / Q::W;
    const int64_t G = a.group, ng = a.Kp / G;
    const layout::Q4Layout L = q4_layout_of(a);
    const int64_t pb = L.panel_bytes();
    const uint8_t* wp = a.w + p0 * pb;
    const float* xr = a.xpad + m0 * a.Kp;
    F facc[MR][NP][VP];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) facc[i][j][v] = Q::zerof();
    for (int64_t g = 0; g < ng; ++g) {
      F acc[MR][NP][VP][2];
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NP; ++j)
          for (int v = 0; v < VP; ++v) acc[i][j][v][0] = acc[i][j][v][1] = Q::zerof();
      for (int64_t b = 0; b < G / 8; ++b)
        for (int j = 0; j < NP; ++j)
          for (int v = 0; v < VP; ++v) {
            if (MR == 1 && v == 0) Q::prefetch(wp + j * pb + L.codes(g) + b * 64 + kPrefetchAhead);
            const auto raw = Q::loadi(wp + j * pb + L.codes(g) + b * 64 + v * Q::W * 4);
            F c[8];
            c[0] = Q::cvt(Q::template nib<0>(raw));
            c[1] = Q::cvt(Q::template nib<8>(raw));
            c[2] = Q::cvt(Q::template nib<16>(raw));
            c[3] = Q::cvt(Q::template nib<24>(raw));
            c[4] = Q::cvt(Q::template nib<4>(raw));
            c[5] = Q::cvt(Q::template nib<12>(raw));
            c[6] = Q::cvt(Q::template nib<20>(raw));
            c[7] = Q::cvt(Q::template nib<28>(raw));
            for (int i = 0; i < MR; ++i) {
              const float* xk = xr + i * a.Kp + g * G + 8 * b;
              for (int e = 0; e < 8; ++e)
                acc[i][j][v][e & 1] = Q::fmaf(Q::set1f(xk[e]), c[e], acc[i][j][v][e & 1]);
            }
          }
      float xsum[MR];
      for (int i = 0; i < MR; ++i) {
        float t = 0.f;
        for (int64_t k = 0; k < G; ++k) t += xr[i * a.Kp + g * G + k];
        xsum[i] = t;
      }
      for (int j = 0; j < NP; ++j)
        for (int v = 0; v < VP; ++v) {
          const uint8_t* panel = wp + j * pb;
          const F s = Q::loadh(panel + L.scales(g) + v * Q::W * 2);
          const F z =
              Q::cvt(a.zero_point ? Q::load_u8x(panel + L.zeros(g) + v * Q::W) : Q::set1i(8));
          for (int i = 0; i < MR; ++i) {
            const F d = Q::fnmaf(z, Q::set1f(xsum[i]), Q::addf(acc[i][j][v][0], acc[i][j][v][1]));
            facc[i][j][v] = Q::fmaf(s, d, facc[i][j][v]);
          }
        }
    }
    for (int j = 0; j < NP; ++j)
      for (int v = 0; v < VP; ++v)
        for (int i = 0; i < MR; ++i)
          store_out<Q>(a, m0 + i, (p0 + j) * 16 + v * Q::W, facc[i][j][v]);
  }
};

// Q8 panel p, k in [k0, k0 + kc) (multiples of 4) -> dst[k - k0][0..16) = s * q, row stride ld.
template <class Q>
void deq_q8(const QuantArgs& a, int64_t p, int64_t k0, int64_t kc, float* dst, int64_t ld) {
  const uint8_t* wp = a.w + p * qt_q8_panel_bytes(a.Kp);
  for (int v = 0; v < 16 / Q::W; ++v) {
    const auto s = Q::loadf(reinterpret_cast<const float*>(wp + 16 * a.Kp + v * Q::W * 4));
    for (int64_t b = k0 / 4; b < (k0 + kc) / 4; ++b) {
      const auto raw = Q::loadi(wp + b * 64 + v * Q::W * 4);
      float* d = dst + (4 * b - k0) * ld + v * Q::W;
      Q::storef(d, Q::mulf(q8_byte_f<Q, 0>(raw), s));
      Q::storef(d + ld, Q::mulf(q8_byte_f<Q, 1>(raw), s));
      Q::storef(d + 2 * ld, Q::mulf(q8_byte_f<Q, 2>(raw), s));
      Q::storef(d + 3 * ld, Q::mulf(q8_byte_f<Q, 3>(raw), s));
    }
  }
}

// Q4 panel p, k in [k0, k0 + kc) (multiples of G) -> dst[k - k0][0..16) = s * (c - z).
template <class Q>
void deq_q4(const QuantArgs& a, int64_t p, int64_t k0, int64_t kc, float* dst, int64_t ld) {
  const int64_t G = a.group;
  const layout::Q4Layout L = q4_layout_of(a);
  const uint8_t* wp = a.w + p * L.panel_bytes();
  for (int v = 0; v < 16 / Q::W; ++v)
    for (int64_t g = k0 / G; g < (k0 + kc) / G; ++g) {
      const auto s = Q::loadh(wp + L.scales(g) + v * Q::W * 2);
      const auto z = a.zero_point ? Q::load_u8x(wp + L.zeros(g) + v * Q::W) : Q::set1i(8);
      for (int64_t b = 0; b < G / 8; ++b) {
        const auto raw = Q::loadi(wp + L.codes(g) + b * 64 + v * Q::W * 4);
        float* d = dst + (g * G + 8 * b - k0) * ld + v * Q::W;
        const auto put = [&](int e, typename Q::I c) {
          Q::storef(d + e * ld, Q::mulf(Q::cvt(Q::sub(c, z)), s));
        };
        put(0, Q::template nib<0>(raw));
        put(1, Q::template nib<8>(raw));
        put(2, Q::template nib<16>(raw));
        put(3, Q::template nib<24>(raw));
        put(4, Q::template nib<4>(raw));
        put(5, Q::template nib<12>(raw));
        put(6, Q::template nib<20>(raw));
        put(7, Q::template nib<28>(raw));
      }
    }
}

// Rows m0.. x NP panels from a dequantized slice sw ([k][16 * NP]) of kv valid k at k0.
template <class Q, int MR, int NP>
void a16_tile(const QuantArgs& a, int64_t m0, int64_t p0, const float* sw, int64_t k0, int64_t kv,
              bool last) {
  using F = typename Q::F;
  constexpr int NV = 16 * NP / Q::W;
  F acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int jv = 0; jv < NV; ++jv) {
      const int64_t n = p0 * 16 + jv * Q::W;
      const int cnt = int(qmin<int64_t>(Q::W, a.N - n));
      if (k0 == 0 || cnt <= 0)
        acc[i][jv] = Q::zerof();
      else if (cnt == Q::W)
        acc[i][jv] = Q::loadf(a.y + (m0 + i) * a.N + n);
      else
        acc[i][jv] = Q::loadf_n(a.y + (m0 + i) * a.N + n, cnt);
    }
  const float* xr = a.x + m0 * a.K + k0;
  for (int64_t k = 0; k < kv; ++k) {
    F w[NV];
    for (int jv = 0; jv < NV; ++jv) w[jv] = Q::loadf(sw + k * 16 * NP + jv * Q::W);
    for (int i = 0; i < MR; ++i) {
      const F xb = Q::set1f(xr[i * a.K + k]);
      for (int jv = 0; jv < NV; ++jv) acc[i][jv] = Q::fmaf(xb, w[jv], acc[i][jv]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int jv = 0; jv < NV; ++jv) {
      const int64_t n = p0 * 16 + jv * Q::W;
      if (n >= a.N) continue;
      const int cnt = int(qmin<int64_t>(Q::W, a.N - n));
      F v = acc[i][jv];
      if (last && a.bias)
        v = Q::addf(v, cnt == Q::W ? Q::loadf(a.bias + n) : Q::loadf_n(a.bias + n, cnt));
      if (cnt == Q::W)
        Q::storef(a.y + (m0 + i) * a.N + n, v);
      else
        Q::storef_n(a.y + (m0 + i) * a.N + n, v, cnt);
    }
}

template <class Q, int NP, int MR = Q::MRF>
void a16_rows(int mr, const QuantArgs& a, int64_t m0, int64_t p, const float* sw, int64_t k0,
              int64_t kv, bool last) {
  if constexpr (MR >= 1) {
    if (mr == MR) return a16_tile<Q, MR, NP>(a, m0, p, sw, k0, kv, last);
    return a16_rows<Q, NP, MR - 1>(mr, a, m0, p, sw, k0, kv, last);
  }
}

template <class Q, bool IsQ4>
void a16_v(const QuantArgs& a, int64_t p0, int64_t p1, float* scratch) {
  constexpr int NP = Q::NPF;
  static_assert(kA16Depth * 16 * NP <= kQuantScratchFloats);
  for (int64_t p = p0; p < p1;) {
    const int np = p1 - p >= NP ? NP : 1;
    // Kp - K < G <= kA16Depth (Q4) and Kp - K < 4 (Q8), so every slice holds at least one real k.
    for (int64_t k0 = 0; k0 < a.Kp; k0 += kA16Depth) {
      const int64_t kc = qmin(kA16Depth, a.Kp - k0), kv = qmin(kA16Depth, a.K - k0);
      const bool last = k0 + kA16Depth >= a.Kp;
      for (int j = 0; j < np; ++j) {
        if constexpr (IsQ4)
          deq_q4<Q>(a, p + j, k0, kc, scratch + j * 16, 16 * np);
        else
          deq_q8<Q>(a, p + j, k0, kc, scratch + j * 16, 16 * np);
      }
      for (int64_t m0 = 0; m0 < a.M; m0 += Q::MRF) {
        const int mr = int(qmin<int64_t>(Q::MRF, a.M - m0));
        if (np == NP)
          a16_rows<Q, NP>(mr, a, m0, p, scratch, k0, kv, last);
        else
          a16_rows<Q, 1>(mr, a, m0, p, scratch, k0, kv, last);
      }
    }
    p += np;
  }
}

// Row-invariant calls of several rows (a decode batch through the LM head), with the same
// per-row arithmetic as the M = 1 path: tiles of 8 rows x 1 panel, so that each weight block
// is converted to floats once for all of them. quant_bench BM_batch_head_q8a16 (K=896,
// N=151936, 1 thread, ms of CPU time, Zen 5 shared with a build): 8 x 1 tiles for every M gave
// M=2 5.6, M=4 6.7, M=8 22.3; 4 x 2 (M 3..4) and 2 x 4 (M=2) tiles, for more accumulator
// chains, 14.6 and 8.1. AVX2 (two vectors per panel, 16 registers) keeps the direct kernel's
// small tiles.
template <class Q, class Kern>
void drive_a16_batch(const QuantArgs& a, int64_t p0, int64_t p1, Kern& k) {
  if constexpr (Q::W == 16)
    drive_a8<8, 1, 1>(a, p0, p1, k);
  else
    drive_a8<kA16DirectRows, Q::NPV / 2, Q::NPV>(a, p0, p1, k);
}

template <class Q>
void q8_a16_v(const QuantArgs& a, int64_t p0, int64_t p1, float* scratch) {
  if (a.a16_direct_any_m && a.M > 1) {
    A16DirectQ8<Q> k{a};
    return drive_a16_batch<Q>(a, p0, p1, k);
  }
  if (a.M <= kA16DirectRows) {
    A16DirectQ8<Q> k{a};
    return drive_a8<kA16DirectRows, Q::NPV / 2, Q::NPV>(a, p0, p1, k);
  }
  a16_v<Q, false>(a, p0, p1, scratch);
}
template <class Q>
void q4_a16_v(const QuantArgs& a, int64_t p0, int64_t p1, float* scratch) {
  if (a.a16_direct_any_m && a.M > 1) {
    A16DirectQ4<Q> k{a};
    return drive_a16_batch<Q>(a, p0, p1, k);
  }
  if (a.M <= kA16DirectRows) {
    A16DirectQ4<Q> k{a};
    return drive_a8<kA16DirectRows, Q::NPV / 2, Q::NPV>(a, p0, p1, k);
  }
  a16_v<Q, true>(a, p0, p1, scratch);
}

template <class Q>
QuantTable make_quant_table(const char* name) {
  QuantTable t{name,       quantize_rows_v<Q>, Q::kQ8Biased, q8_a8_v<Q>,
               q4_a8_v<Q>, q8_a16_v<Q>,        q4_a16_v<Q>};
  if constexpr (Q::kQ4PrefillMinRows > 0) {
    t.q4_prefill = q4_prefill_v<Q>;
    t.q4_prefill_min_rows = Q::kQ4PrefillMinRows;
  }
  return t;
}

}  // namespace
}  // namespace edgevl::cpu
