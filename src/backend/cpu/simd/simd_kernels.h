#pragma once
// Kernels written once over a vector-traits type V (Avx2, Avx512, ...). Each *_<isa>.cpp file
// includes this after its traits header and instantiates the table for its V; the anonymous
// namespace keeps every instantiation private to that file.
#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
namespace {

template <class T>
constexpr T min_of(T a, T b) {
  return a < b ? a : b;
}

// A chunk of a row (head_dim, a norm's dim): all W lanes (kFull) or the n-lane tail. Hot loops take
// kFull as a template argument instead of testing n on every iteration: with the tail path (on AVX2
// and NEON a memcpy through a stack buffer) inside the loop, GCC kept the loop's accumulators in
// memory and stored each one on every iteration, and AVX2 decode attention ran at 0.4x its speed.
template <class V, bool kFull, class T>
typename V::R load_w(const T* p, int n) {
  if constexpr (kFull)
    return V::load(p);
  else
    return V::load_n(p, n);
}

// ---------------------------------------------------------------- elementwise math

// exp(x), Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r, times 2^n.
// Relative error ~1e-7 over the clamped range; below -87.3 it returns ~1e-38 rather than 0.
template <class V>
typename V::R vexp(typename V::R x) {
  using R = typename V::R;
  x = V::max(V::min(x, V::set1(88.3762626647949f)), V::set1(-87.3365447504019f));
  const R n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  R r = V::fnma(n, V::set1(0.693359375f), x);
  r = V::fnma(n, V::set1(-2.12194440e-4f), r);
  R p = V::set1(1.9875691500e-4f);
  p = V::fma(p, r, V::set1(1.3981999507e-3f));
  p = V::fma(p, r, V::set1(8.3334519073e-3f));
  p = V::fma(p, r, V::set1(4.1665795894e-2f));
  p = V::fma(p, r, V::set1(1.6666665459e-1f));
  p = V::fma(p, r, V::set1(5.0000001201e-1f));
  p = V::fma(p, V::mul(r, r), V::add(r, V::set1(1.f)));
  return V::mul(p, V::pow2(n));
}

template <class V>
typename V::R vsilu_mul(typename V::R g, typename V::R u) {
  const auto one = V::set1(1.f);
  return V::mul(V::div(g, V::add(one, vexp<V>(V::sub(V::zero(), g)))), u);
}

// GELU(x) = x * Phi(x). Phi from Abramowitz-Stegun 7.1.26 (|erf error| < 1.5e-7), computing
// q = 1 - erf(|x|/sqrt2) directly so the negative tail has no cancellation.
template <class V>
typename V::R vgelu(typename V::R x) {
  using R = typename V::R;
  const R z = V::mul(V::abs(x), V::set1(0.70710678118654752f));
  const R t = V::div(V::set1(1.f), V::fma(z, V::set1(0.3275911f), V::set1(1.f)));
  R p = V::set1(1.061405429f);
  p = V::fma(p, t, V::set1(-1.453152027f));
  p = V::fma(p, t, V::set1(1.421413741f));
  p = V::fma(p, t, V::set1(-0.284496736f));
  p = V::fma(p, t, V::set1(0.254829592f));
  const R q = V::mul(V::mul(p, t), vexp<V>(V::sub(V::zero(), V::mul(z, z))));
  const R half_q = V::mul(q, V::set1(0.5f));
  const R phi = V::select_neg(x, half_q, V::sub(V::set1(1.f), half_q));
  return V::mul(x, phi);
}

// GELU, tanh form: 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3);
// vexp's clamp keeps the far negative tail at x / (1 + 2^127) ~ 0.
template <class V>
typename V::R vgelu_tanh(typename V::R x) {
  const auto u2 = V::mul(V::mul(x, V::set1(-2.f * 0.7978845608028654f)),
                         V::fma(V::mul(x, x), V::set1(0.044715f), V::set1(1.f)));
  return V::div(x, V::add(V::set1(1.f), vexp<V>(u2)));
}

template <class V>
void silu_mul_v(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W)
    V::store(out + i, vsilu_mul<V>(V::load(gate + i), V::load(up + i)));
  if (i < n) {
    const int r = int(n - i);
    V::store_n(out + i, vsilu_mul<V>(V::load_n(gate + i, r), V::load_n(up + i, r)), r);
  }
}

template <class V>
void gelu_tanh_v(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(out + i, vgelu_tanh<V>(V::load(x + i)));
  if (i < n) V::store_n(out + i, vgelu_tanh<V>(V::load_n(x + i, int(n - i))), int(n - i));
}

template <class V>
void gelu_erf_v(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(out + i, vgelu<V>(V::load(x + i)));
  if (i < n) V::store_n(out + i, vgelu<V>(V::load_n(x + i, int(n - i))), int(n - i));
}

// kernels.h argmax. Blocks of 32 vectors are reduced to their maximum with V::max(x, acc),
// which skips a NaN x on x86 (the second operand is returned); the first block holding the
// largest value is then scanned for it. A level whose max propagates NaN (NEON) and a row
// with no value above -inf take the scalar kernel.
template <class V>
int64_t argmax_v(const float* x, int64_t n) {
  using R = typename V::R;
  constexpr int64_t kBlock = 32 * V::W;
  float best = -__builtin_inff();
  int64_t best_block = -1;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const float* p = x + b0;
    const int64_t len = min_of(kBlock, n - b0);
    R m0 = V::set1(-__builtin_inff()), m1 = m0;  // two chains: max has a latency of several
    int64_t i = 0;
    for (; i + 2 * V::W <= len; i += 2 * V::W) {
      m0 = V::max(V::load(p + i), m0);
      m1 = V::max(V::load(p + i + V::W), m1);
    }
    for (; i + V::W <= len; i += V::W) m0 = V::max(V::load(p + i), m0);
    float m = V::hmax(V::max(m0, m1));
    for (; i < len; ++i) m = p[i] > m ? p[i] : m;
    if (m != m) return scalar_kernels().argmax(x, n);
    if (m > best) best = m, best_block = b0;
  }
  if (best_block < 0) return scalar_kernels().argmax(x, n);
  int64_t i = best_block;
  while (x[i] != best) ++i;
  return i;
}

// In place: row = softmax(scale * row). Three passes over a row: max, exp and sum, normalise.
template <class V>
void softmax_rows_v(float* x, int64_t rows, int64_t cols, float scale) {
  using R = typename V::R;
  const R vs = V::set1(scale);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    R vm = V::set1(-__builtin_inff());
    int64_t i = 0;
    for (; i + V::W <= cols; i += V::W) vm = V::max(vm, V::mul(V::load(row + i), vs));
    float m = V::hmax(vm);
    for (; i < cols; ++i) m = std::max(m, row[i] * scale);
    const R vmax = V::set1(m);
    R acc = V::zero();
    for (i = 0; i + V::W <= cols; i += V::W) {
      const R e = vexp<V>(V::sub(V::mul(V::load(row + i), vs), vmax));
      V::store(row + i, e);
      acc = V::add(acc, e);
    }
    if (i < cols) {
      const int n = int(cols - i);
      const R e = vexp<V>(V::sub(V::mul(V::load_n(row + i, n), vs), vmax));
      V::store_n(row + i, e, n);
      acc = V::add(acc, V::load_n(row + i, n));
    }
    const R inv = V::set1(1.0f / V::hsum(acc));
    for (i = 0; i + V::W <= cols; i += V::W) V::store(row + i, V::mul(V::load(row + i), inv));
    if (i < cols)
      V::store_n(row + i, V::mul(V::load_n(row + i, int(cols - i)), inv), int(cols - i));
  }
}

template <class V>
void add_v(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(out + i, V::add(V::load(a + i), V::load(b + i)));
  if (i < n) {
    const int r = int(n - i);
    V::store_n(out + i, V::add(V::load_n(a + i, r), V::load_n(b + i, r)), r);
  }
}

template <class V, class T>
void convert_v(const T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(dst + i, V::load(src + i));
  if (i < n) V::store_n(dst + i, V::load_n(src + i, int(n - i)), int(n - i));
}

template <class V>
void convert_to_f32_v(const void* src, DType t, float* dst, int64_t n) {
  switch (t) {
    case DType::F16: return convert_v<V>(static_cast<const f16_t*>(src), dst, n);
    case DType::BF16: return convert_v<V>(static_cast<const bf16_t*>(src), dst, n);
    default: return convert_v<V>(static_cast<const float*>(src), dst, n);  // F32, checked by caller
  }
}

// ---------------------------------------------------------------- norms

template <class V>
float sum_sq(const float* x, int64_t n) {
  auto a0 = V::zero(), a1 = V::zero();  // two chains hide the FMA latency
  int64_t i = 0;
  for (; i + 2 * V::W <= n; i += 2 * V::W) {
    const auto u = V::load(x + i), v = V::load(x + i + V::W);
    a0 = V::fma(u, u, a0);
    a1 = V::fma(v, v, a1);
  }
  for (; i < n; i += V::W) {
    const auto u = V::load_n(x + i, int(min_of<int64_t>(V::W, n - i)));
    a0 = V::fma(u, u, a0);
  }
  return V::hsum(V::add(a0, a1));
}

template <class V>
void rmsnorm_v(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const auto inv = V::set1(1.f / __builtin_sqrtf(sum_sq<V>(xr, dim) / float(dim) + eps));
    int64_t i = 0;
    for (; i + V::W <= dim; i += V::W)
      V::store(yr + i, V::mul(V::mul(V::load(xr + i), inv), V::load(w + i)));
    if (i < dim) {
      const int n = int(dim - i);
      V::store_n(yr + i, V::mul(V::mul(V::load_n(xr + i, n), inv), V::load_n(w + i, n)), n);
    }
  }
}

// Whole vectors in the loops, the tail after them (see load_w: a tail load inside the loop costs
// AVX2 a memcpy per vector; the vision tower's LayerNorms ran at 3 GB/s for it).
template <class V>
void layernorm_v(const float* x, const float* w, const float* b, float eps, int64_t rows,
                 int64_t dim, float* y) {
  const int64_t full = dim / V::W * V::W;
  const int tail = int(dim - full);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    auto s = V::zero();
    for (int64_t i = 0; i < full; i += V::W) s = V::add(s, V::load(xr + i));
    if (tail) s = V::add(s, V::load_n(xr + full, tail));
    const float mean0 = V::hsum(s) / float(dim);
    auto vm = V::set1(mean0);
    auto ss = V::zero(), sd = V::zero();
    for (int64_t i = 0; i < full; i += V::W) {
      const auto d = V::sub(V::load(xr + i), vm);
      ss = V::fma(d, d, ss);
      sd = V::add(sd, d);
    }
    if (tail) {
      // Masked-off lanes load 0 and would add mean^2: zero them via a masked load of (x - mean).
      alignas(64) float buf[V::W] = {};
      V::store_n(buf, V::sub(V::load_n(xr + full, tail), vm), tail);
      const auto d = V::load(buf);
      ss = V::fma(d, d, ss);
      sd = V::add(sd, d);
    }
    // Corrected two-pass: the float sum of a row with a large mean is off by ~1e-4 of the mean;
    // sum(x - mean0) measures that error exactly enough to remove it (and its effect on var).
    const float corr = V::hsum(sd) / float(dim);
    vm = V::set1(mean0 + corr);
    const float var = V::hsum(ss) / float(dim) - corr * corr;
    const auto inv = V::set1(1.f / __builtin_sqrtf((var > 0.f ? var : 0.f) + eps));
    auto norm = [&]<bool kFull>(int64_t i, int n) {
      auto v = V::mul(V::sub(load_w<V, kFull>(xr + i, n), vm), inv);
      if (w) v = V::mul(v, load_w<V, kFull>(w + i, n));
      if (b) v = V::add(v, load_w<V, kFull>(b + i, n));
      if constexpr (kFull)
        V::store(yr + i, v);
      else
        V::store_n(yr + i, v, n);
    };
    for (int64_t i = 0; i < full; i += V::W) norm.template operator()<true>(i, V::W);
    if (tail) norm.template operator()<false>(full, tail);
  }
}

// ---------------------------------------------------------------- matmul

// Register tile: MR rows of x times NR rows of W, dot products along K. Both operands are
// contiguous in K, so no repacking is needed; the reductions happen once per tile.
// With Prefetch, also requests the same columns of the next NR weight rows: in the GEMV path
// those come from DRAM, and a stream of short rows gives the hardware prefetcher little to go on.
template <class V, int MR, int NR, class WT, bool Prefetch>
void mm_tile(const float* x, int64_t ldx, const WT* w, int64_t ldw, int64_t K, float* out) {
  using R = typename V::R;
  R acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  int64_t k = 0;
  for (; k + V::W <= K; k += V::W) {
    R wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = V::load(w + j * ldw + k);
    if constexpr (Prefetch)
      for (int j = 0; j < NR; ++j) V::prefetch(w + (NR + j) * ldw + k);
    for (int i = 0; i < MR; ++i) {
      const R xv = V::load(x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, wv[j], acc[i][j]);
    }
  }
  if (k < K) {
    const int n = int(K - k);
    R wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = V::load_n(w + j * ldw + k, n);
    for (int i = 0; i < MR; ++i) {
      const R xv = V::load_n(x + i * ldx + k, n);
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR == 4) {
      V::hsum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3], out + i * NR);
    } else {
      for (int j = 0; j < NR; ++j) out[i * NR + j] = V::hsum(acc[i][j]);
    }
  }
}

template <class V, int NR, class WT, bool Stream, int MR = V::MR>
void mm_tile_rows(int mr, const float* x, int64_t ldx, const WT* w, int64_t ldw, int64_t K,
                  float* out) {
  if constexpr (MR >= 1) {
    if (mr == MR) return mm_tile<V, MR, NR, WT, Stream>(x, ldx, w, ldw, K, out);
    return mm_tile_rows<V, NR, WT, Stream, MR - 1>(mr, x, ldx, w, ldw, K, out);
  }
}

// Computes the [mr x nc] block of y at (m0, n0) from weight rows w (stride ldw) over k-range
// [0, kc) of x starting at column k0; accumulate adds onto y instead of starting from bias.
// Stream: w is the model's weights read once from memory (GEMV path), not a panel in cache.
template <class V, class WT, bool Stream>
void mm_block(const MatmulArgs& a, int64_t m0, int mr, int64_t n0, int64_t nc, const WT* w,
              int64_t ldw, int64_t k0, int64_t kc, bool accumulate) {
  constexpr int NR = V::NR;
  alignas(64) float sums[V::MR * NR];
  const float* x = a.x + m0 * a.K + k0;
  for (int64_t j = 0; j < nc;) {
    const int nr = nc - j >= NR ? NR : 1;
    if (nr == NR)
      mm_tile_rows<V, NR, WT, Stream>(mr, x, a.K, w + j * ldw, ldw, kc, sums);
    else
      mm_tile_rows<V, 1, WT, Stream>(mr, x, a.K, w + j * ldw, ldw, kc, sums);
    for (int i = 0; i < mr; ++i) {
      float* yr = a.y + (m0 + i) * a.N + n0 + j;
      for (int jj = 0; jj < nr; ++jj) {
        const float base = accumulate ? yr[jj] : (a.bias ? a.bias[n0 + j + jj] : 0.f);
        yr[jj] = base + sums[i * nr + jj];
      }
    }
    j += nr;
  }
}

// ---------------------------------------------------------------- matmul on weight panels

// Weights in panels of 16 columns, read by panel_tile one panel row at a time: a row holds the
// 16 columns' weights at kStep consecutive k.
// - bf16p (bf16_panels.h), read in place: a 64-byte row is 16 columns x the k pair (2j, 2j + 1);
//   shifting each dword left by 16 gives the columns' f32 weights at k = 2j, masking off its low
//   half those at 2j + 1 - one instruction per weight vector, shared by all rows of the tile.
// - f32 [k][16], which matmul_cols_t converts f16 / bf16 / f32 row-major weights into (scratch).
struct Bf16PairPanel {
  using T = uint16_t;
  static constexpr int kStep = 2, kRow = 32;
  template <class V>
  static void load(const T* p, typename V::R* w) {
    V::load_bf16_pairs(p, w[0], w[1]);
  }
};
struct F32Panel {
  using T = float;
  static constexpr int kStep = 1, kRow = 16;
  template <class V>
  static void load(const T* p, typename V::R* w) {
    w[0] = V::load(p);
  }
};

// Register tile: MR rows of x times NP adjacent 16-column panels (pstride elements apart), x[m][k]
// broadcast, f32 FMA over panel rows [j0, j1): row i of the tile reads x[i * ldx + j * kStep + s]
// for panel row j. Columns [0, cols) (cols <= 16 NP) go to y (row stride ldy): y = bias + sum
// (accumulate false) or y += sum. odd_tail (bf16p, K odd): row j1 holds k = 2 * j1, whose pair
// partner past K is padding (and past the end of x's row).
// NP = V::NPP panels (3 on AVX-512, where one zmm covers a whole panel and a single-panel tile
// fed each broadcast to one FMA: 24 FMAs + 25 loads a step ran at half the FMA peak on Zen 5).
template <class V, class P, int MR, int NP>
void panel_tile(const float* x, int64_t ldx, const typename P::T* w, int64_t pstride, int64_t j0,
                int64_t j1, bool odd_tail, float* y, int64_t ldy, int cols, const float* bias,
                bool accumulate) {
  using R = typename V::R;
  constexpr int VP = 16 / V::W, S = P::kStep, NV = NP * VP;
  R acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V::zero();
  auto load_row = [&](int64_t j, R(*wv)[S]) {
    for (int q = 0; q < NP; ++q)
      for (int v = 0; v < VP; ++v)
        P::template load<V>(w + q * pstride + j * P::kRow + v * V::W * S, wv[q * VP + v]);
  };
  for (int64_t j = j0; j < j1; ++j) {
    R wv[NV][S];
    load_row(j, wv);
    for (int i = 0; i < MR; ++i)
      for (int s = 0; s < S; ++s) {
        const R xs = V::set1(x[i * ldx + j * S + s]);
        for (int v = 0; v < NV; ++v) acc[i][v] = V::fma(xs, wv[v][s], acc[i][v]);
      }
  }
  if (odd_tail) {
    R wv[NV][S];
    load_row(j1, wv);
    for (int i = 0; i < MR; ++i) {
      const R xs = V::set1(x[i * ldx + j1 * S]);
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fma(xs, wv[v][0], acc[i][v]);
    }
  }
  for (int v = 0; v < NV; ++v) {
    const int c0 = v * V::W;
    if (c0 >= cols) break;
    const int n = int(min_of<int64_t>(V::W, cols - c0));
    for (int i = 0; i < MR; ++i) {
      float* yr = y + i * ldy + c0;
      R r = acc[i][v];
      if (accumulate)
        r = V::add(r, n == V::W ? V::load(yr) : V::load_n(yr, n));
      else if (bias)
        r = V::add(r, n == V::W ? V::load(bias + c0) : V::load_n(bias + c0, n));
      if (n == V::W)
        V::store(yr, r);
      else
        V::store_n(yr, r, n);
    }
  }
}

template <class V, class P, int NP, int MR = V::MRP>
void panel_tile_rows(int mr, const float* x, int64_t ldx, const typename P::T* w, int64_t pstride,
                     int64_t j0, int64_t j1, bool odd_tail, float* y, int64_t ldy, int cols,
                     const float* bias, bool accumulate) {
  if constexpr (MR >= 1) {
    if (mr == MR)
      return panel_tile<V, P, MR, NP>(x, ldx, w, pstride, j0, j1, odd_tail, y, ldy, cols, bias,
                                      accumulate);
    return panel_tile_rows<V, P, NP, MR - 1>(mr, x, ldx, w, pstride, j0, j1, odd_tail, y, ldy, cols,
                                             bias, accumulate);
  }
}

// The row tiles of columns [n, n + cols) on the panels from w (cols <= 16 V::NPP), on
// ceil(cols / 16) panels at once.
template <class V, class P, int NP = V::NPP>
void panel_tiles(int64_t m0, int64_t m1, const float* x, int64_t ldx, const typename P::T* w,
                 int64_t pstride, int64_t j0, int64_t j1, bool odd_tail, float* y, int64_t ldy,
                 int cols, const float* bias, bool accumulate) {
  if constexpr (NP > 1) {
    if (cols <= 16 * (NP - 1))
      return panel_tiles<V, P, NP - 1>(m0, m1, x, ldx, w, pstride, j0, j1, odd_tail, y, ldy, cols,
                                       bias, accumulate);
  }
  for (int64_t m = m0; m < m1; m += V::MRP) {
    const int mr = int(min_of<int64_t>(V::MRP, m1 - m));
    panel_tile_rows<V, P, NP>(mr, x + m * ldx, ldx, w, pstride, j0, j1, odd_tail, y + m * ldy, ldy,
                              cols, bias, accumulate);
  }
}

// Columns of the next panel tile with `left` columns to go: the panels left split evenly over
// the fewest tiles of at most V::NPP (64 columns at NPP 3: two tiles of 2 panels, not 3 + 1,
// whose single-panel tile feeds each broadcast to one FMA).
template <class V>
int64_t tile_cols(int64_t left) {
  const int64_t panels = (left + 15) / 16, tiles = (panels + V::NPP - 1) / V::NPP;
  return min_of<int64_t>(left, 16 * ((panels + tiles - 1) / tiles));
}

template <class V, class WT>
void matmul_cols_t(const MatmulArgs& a, int64_t n0, int64_t n1, float* scratch) {
  const WT* w = static_cast<const WT*>(a.w);
  if (a.M <= V::MR || a.K == 0) {
    // Decode / tiny batch: one pass over the weight rows, converting on the fly.
    mm_block<V, WT, true>(a, 0, int(a.M), n0, n1 - n0, w + n0 * a.K, a.K, 0, a.K, false);
    return;
  }
  // Prefill: a block of NC weight rows x KC k is converted once into scratch as f32 panels of
  // 16 columns ([k][16], zero past the block's last column), then every row tile of x runs over
  // each group of V::NPP panels (panel_tile: x broadcast, no horizontal sums). The group (16 KB
  // a panel: 48 KB on AVX-512) stays in L1 / L2 while the row tiles pass; x is read once per
  // group from L2 / L3.
  // Each weight is converted once per call (the dot-product tiles this replaced converted it
  // again for every 96 rows, and ran at ~0.55 of the FMA peak against ~0.8 for this form).
  const int64_t KC = min_of<int64_t>(a.K, 256);
  const int64_t NC = kMatmulScratchFloats / KC / 16 * 16;
  for (int64_t nb = n0; nb < n1; nb += NC) {
    const int64_t nc = min_of(NC, n1 - nb);
    for (int64_t kb = 0; kb < a.K; kb += KC) {
      const int64_t kc = min_of(KC, a.K - kb);
      for (int64_t c = 0; c < (nc + 15) / 16 * 16; ++c) {
        float* panel_col = scratch + (c / 16) * 16 * kc + c % 16;
        if (c >= nc) {
          for (int64_t k = 0; k < kc; ++k) panel_col[k * 16] = 0.f;
          continue;
        }
        const WT* wr = w + (nb + c) * a.K + kb;
        if constexpr (sizeof(WT) == 4) {
          for (int64_t k = 0; k < kc; ++k) panel_col[k * 16] = wr[k];
        } else {
          alignas(64) float row[256];
          convert_v<V>(wr, row, kc);
          for (int64_t k = 0; k < kc; ++k) panel_col[k * 16] = row[k];
        }
      }
      for (int64_t c = 0, cols; c < nc; c += cols) {
        cols = tile_cols<V>(nc - c);
        panel_tiles<V, F32Panel>(0, a.M, a.x + kb, a.K, scratch + c * kc, 16 * kc, 0, kc, false,
                                 a.y + nb + c, a.N, int(cols), a.bias ? a.bias + nb + c : nullptr,
                                 kb > 0);
      }
    }
  }
}

template <class V>
void matmul_cols_v(const MatmulArgs& a, int64_t n0, int64_t n1, float* scratch) {
  switch (a.wtype) {
    case DType::F16: return matmul_cols_t<V, f16_t>(a, n0, n1, scratch);
    case DType::BF16: return matmul_cols_t<V, bf16_t>(a, n0, n1, scratch);
    default: return matmul_cols_t<V, float>(a, n0, n1, scratch);  // F32, checked by caller
  }
}

// Columns [n0, n1) of y (n0 a multiple of 16). Blocks of MC rows x KC_PAIRS k pairs keep the x
// block in L2 (240 x 256 floats = 240 KB) while every panel of the range passes over it; a
// panel's slice of the block (16 x 256 bf16 = 8 KB) stays in L1 for all the block's row tiles.
template <class V>
void matmul_bf16p_cols_v(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(a.w);
  const int64_t Kp = (a.K + 31) / 32 * 32, pairs = a.K / 2, steps = pairs + a.K % 2;
  constexpr int64_t KC_PAIRS = 128, MC = 240;
  if (steps == 0) {  // K = 0: y = bias
    for (int64_t m = 0; m < a.M; ++m)
      for (int64_t n = n0; n < n1; ++n) a.y[m * a.N + n] = a.bias ? a.bias[n] : 0.f;
    return;
  }
  for (int64_t mc = 0; mc < a.M; mc += MC) {
    const int64_t m_end = min_of(a.M, mc + MC);
    for (int64_t jb = 0; jb < steps; jb += KC_PAIRS) {
      const int64_t j1 = min_of(pairs, jb + KC_PAIRS);
      const bool odd_tail = a.K % 2 != 0 && jb + KC_PAIRS >= steps;
      for (int64_t n = n0, cols; n < n1; n += cols) {
        cols = tile_cols<V>(n1 - n);
        panel_tiles<V, Bf16PairPanel>(mc, m_end, a.x, a.K, w + (n / 16) * 16 * Kp, 16 * Kp, jb, j1,
                                      odd_tail, a.y + n, a.N, cols, a.bias ? a.bias + n : nullptr,
                                      jb > 0);
      }
    }
  }
}

// ---------------------------------------------------------------- attention

// Scores of q against 4 keys.
template <class V, class KT>
void dot4(const float* q, const KT* k, int64_t ldk, int hd, float* out) {
  using R = typename V::R;
  R a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  int d = 0;
  for (; d + V::W <= hd; d += V::W) {
    const R qv = V::load(q + d);
    const KT* kd = k + d;
    a0 = V::fma(qv, V::load(kd), a0);
    a1 = V::fma(qv, V::load(kd + ldk), a1);
    a2 = V::fma(qv, V::load(kd + 2 * ldk), a2);
    a3 = V::fma(qv, V::load(kd + 3 * ldk), a3);
  }
  if (d < hd) {  // the tail after the loop (see load_w)
    const int n = hd - d;
    const R qv = V::load_n(q + d, n);
    const KT* kd = k + d;
    a0 = V::fma(qv, V::load_n(kd, n), a0);
    a1 = V::fma(qv, V::load_n(kd + ldk, n), a1);
    a2 = V::fma(qv, V::load_n(kd + 2 * ldk, n), a2);
    a3 = V::fma(qv, V::load_n(kd + 3 * ldk, n), a3);
  }
  V::hsum4(a0, a1, a2, a3, out);
}

template <class V, class KT>
float dot1(const float* q, const KT* k, int hd) {
  auto a = V::zero();
  int d = 0;
  for (; d + V::W <= hd; d += V::W) a = V::fma(V::load(q + d), V::load(k + d), a);
  if (d < hd) a = V::fma(V::load_n(q + d, hd - d), V::load_n(k + d, hd - d), a);
  return V::hsum(a);
}

// acc[0..n) = acc * c + sum_j p[j] * v[j][0..n), for nv value rows: one chunk of head_dim.
template <class V, bool kFull, class KT>
void scale_axpy_chunk(float* acc, float c, const float* p, const KT* v, int64_t ldv, int nv,
                      int n) {
  auto s = V::mul(load_w<V, kFull>(acc, n), V::set1(c));
  for (int j = 0; j < nv; ++j) s = V::fma(V::set1(p[j]), load_w<V, kFull>(v + j * ldv, n), s);
  V::store_n(acc, s, n);
}

// acc[0..hd) = acc * c + sum_j p[j] * v[j], for nv value rows.
template <class V, class KT>
void scale_axpy(float* acc, float c, const float* p, const KT* v, int64_t ldv, int nv, int hd) {
  for (int d = 0; d < hd; d += V::W) {
    const int n = hd - d < V::W ? hd - d : V::W;
    if (n == V::W)
      scale_axpy_chunk<V, true>(acc + d, c, p, v + d, ldv, nv, n);
    else
      scale_axpy_chunk<V, false>(acc + d, c, p, v + d, ldv, nv, n);
  }
}

// The rows of the KV head query head h reads, and their q8 scales (null for float caches).
template <class V, class KT>
struct HeadCache {
  const KT *k, *v;
  const float *ks, *vs;
};
template <class V, class KT>
HeadCache<V, KT> head_cache(const AttnArgs& a, int h) {
  const int64_t row0 = int64_t(h / (a.n_heads / a.n_kv_heads)) * a.capacity;
  const int64_t off = row0 * a.head_dim;
  return {static_cast<const KT*>(a.k_cache) + off, static_cast<const KT*>(a.v_cache) + off,
          a.k_scale ? a.k_scale + row0 : nullptr, a.v_scale ? a.v_scale + row0 : nullptr};
}

// Online softmax over blocks of keys: scores of one block live in a stack buffer, so memory
// does not grow with the context. q8 caches (KT = int8_t) are dequantized on the fly: the int8
// row is widened to f32 in registers, the key's row scale multiplies its score and the value's
// row scale folds into its softmax weight, so the inner loops are the float ones.
template <class V, class KT>
void attention_one_t(const AttnArgs& a, int64_t i, int h, int64_t n_keys) {
  constexpr int B = 64;
  const int hd = a.head_dim;
  const HeadCache<V, KT> hc = head_cache<V, KT>(a, h);
  const KT *kc = hc.k, *vc = hc.v;
  const float *ks = hc.ks, *vs = hc.vs;
  const float* q = a.q + (i * a.n_heads + h) * hd;
  float* out = a.out + (i * a.n_heads + h) * hd;
  for (int d = 0; d < hd; ++d) out[d] = 0.f;
  if (n_keys <= 0) return;
  alignas(64) float s[B];
  float m = -__builtin_inff(), l = 0.f;
  for (int64_t j0 = 0; j0 < n_keys; j0 += B) {
    const int nb = int(min_of<int64_t>(B, n_keys - j0));
    const KT* kb = kc + j0 * hd;
    int j = 0;
    for (; j + 4 <= nb; j += 4) dot4<V>(q, kb + j * hd, hd, hd, s + j);
    for (; j < nb; ++j) s[j] = dot1<V>(q, kb + j * hd, hd);
    if (ks)
      for (j = 0; j < nb; ++j) s[j] *= ks[j0 + j];
    float bm = -__builtin_inff();
    for (j = 0; j < nb; ++j) {
      s[j] *= a.scale;
      bm = s[j] > bm ? s[j] : bm;
    }
    const float m_new = bm > m ? bm : m;
    const float c = m == -__builtin_inff() ? 0.f : __builtin_expf(m - m_new);
    m = m_new;
    auto lsum = V::zero();
    const auto vm = V::set1(m);
    for (j = 0; j < nb; j += V::W) {
      const int n = nb - j < V::W ? nb - j : V::W;
      auto p = vexp<V>(V::sub(V::load_n(s + j, n), vm));
      V::store_n(s + j, p, n);
      if (n < V::W) p = V::load_n(s + j, n);  // drop the lanes past the block
      lsum = V::add(lsum, p);
    }
    l = l * c + V::hsum(lsum);
    if (vs)
      for (j = 0; j < nb; ++j) s[j] *= vs[j0 + j];
    const KT* vb = vc + j0 * hd;
    // Rescale once per block, then accumulate 4 value rows per pass over the output row.
    j = 0;
    float cc = c;
    for (; j + 4 <= nb; j += 4, cc = 1.f) scale_axpy<V>(out, cc, s + j, vb + j * hd, hd, 4, hd);
    for (; j < nb; ++j, cc = 1.f) scale_axpy<V>(out, cc, s + j, vb + j * hd, hd, 1, hd);
  }
  const float inv = 1.f / l;
  for (int d = 0; d < hd; ++d) out[d] *= inv;
}

// A level whose traits sum eight vectors in one tree (AVX-512: V::hsum8).
template <class V>
constexpr bool has_hsum8 = requires(const typename V::R* a, float* out) {
  V::hsum8(a, out);
};

// NG (2..4) query heads of one GQA group against the same cache rows: each K row is loaded and
// converted once for all NG dot products (one hsum4 for the NG sums), each V row once for all
// NG outputs. With 7 query heads per KV head (Qwen2-0.5B) this halves the passes over the cache
// and the int8/f16 conversions compared with one head at a time.
//
// dots_row: scores of NG (1..8) query heads against one key row, written to out[0..HG)
// (HG = 4 or 8; heads past NG get 0): the row is loaded and converted once for all NG dot
// products (the sums: one hsum8 tree where the level has it, else hsum4s). kAllFull: hd is a
// multiple of W (no tail chunk; see load_w).
template <class V, int NG, bool kAllFull, class KT>
void dots_row(const float* const* q, const KT* k, int hd, float* out) {
  using R = typename V::R;
  R acc[8];
  for (int g = 0; g < 8; ++g) acc[g] = V::zero();
  for (int d = 0; d < hd; d += V::W) {
    const int n = hd - d < V::W ? hd - d : V::W;
    const R kv = kAllFull || n == V::W ? V::load(k + d) : V::load_n(k + d, n);
    for (int g = 0; g < NG; ++g)
      acc[g] =
          V::fma(kAllFull || n == V::W ? V::load(q[g] + d) : V::load_n(q[g] + d, n), kv, acc[g]);
  }
  if constexpr (NG > 4 && has_hsum8<V>) {
    V::hsum8(acc, out);
  } else {
    V::hsum4(acc[0], acc[1], acc[2], acc[3], out);
    if constexpr (NG > 4) V::hsum4(acc[4], acc[5], acc[6], acc[7], out + 4);
  }
}

// out[g][d..d+n) = out * c[g] + sum_j p(g, j) v[j][d..d+n) for NG heads: one chunk of head_dim.
// p(g, j) = p[g * ldg + j * ldj] (head-major or key-major score layouts).
template <class V, int NG, bool kFull, class KT>
void scale_axpy_heads_chunk(float* const* out, int d, int n, const float* c, const float* p,
                            int ldg, int ldj, const KT* v, int nv, int ldv) {
  using R = typename V::R;
  R acc[NG];
  for (int g = 0; g < NG; ++g) acc[g] = V::mul(load_w<V, kFull>(out[g] + d, n), V::set1(c[g]));
  for (int j = 0; j < nv; ++j) {
    const R vj = load_w<V, kFull>(v + j * ldv + d, n);
    for (int g = 0; g < NG; ++g) acc[g] = V::fma(V::set1(p[g * ldg + j * ldj]), vj, acc[g]);
  }
  for (int g = 0; g < NG; ++g) V::store_n(out[g] + d, acc[g], n);
}

template <class V, int NG, class KT>
void scale_axpy_heads(float* const* out, const float* c, const float* p, int ldg, int ldj,
                      const KT* v, int nv, int hd) {
  for (int d = 0; d < hd; d += V::W) {
    const int n = hd - d < V::W ? hd - d : V::W;
    if (n == V::W)
      scale_axpy_heads_chunk<V, NG, true>(out, d, n, c, p, ldg, ldj, v, nv, hd);
    else
      scale_axpy_heads_chunk<V, NG, false>(out, d, n, c, p, ldg, ldj, v, nv, hd);
  }
}

template <class V, class KT, int NG>
void attention_heads_t(const AttnArgs& a, int64_t i, int h0, int64_t n_keys) {
  constexpr int B = 64;
  const int hd = a.head_dim;
  const HeadCache<V, KT> hc = head_cache<V, KT>(a, h0);
  const KT *kc = hc.k, *vc = hc.v;
  const float *ks = hc.ks, *vs = hc.vs;
  const float* q[NG];
  float* out[NG];
  for (int g = 0; g < NG; ++g) {
    q[g] = a.q + (i * a.n_heads + h0 + g) * hd;
    out[g] = a.out + (i * a.n_heads + h0 + g) * hd;
    for (int d = 0; d < hd; ++d) out[g][d] = 0.f;
  }
  if (n_keys <= 0) return;
  alignas(64) float s[NG][B];
  float m[NG], l[NG], c[NG];
  for (int g = 0; g < NG; ++g) m[g] = -__builtin_inff(), l[g] = 0.f;
  for (int64_t j0 = 0; j0 < n_keys; j0 += B) {
    const int nb = int(min_of<int64_t>(B, n_keys - j0));
    const KT* kb = kc + j0 * hd;
    for (int j = 0; j < nb; ++j) {
      float t[4];
      if (hd % V::W == 0)
        dots_row<V, NG, true>(q, kb + j * hd, hd, t);
      else
        dots_row<V, NG, false>(q, kb + j * hd, hd, t);
      for (int g = 0; g < NG; ++g) s[g][j] = t[g];
    }
    for (int g = 0; g < NG; ++g) {
      float* sg = s[g];
      if (ks)
        for (int j = 0; j < nb; ++j) sg[j] *= ks[j0 + j];
      float bm = -__builtin_inff();
      for (int j = 0; j < nb; ++j) {
        sg[j] *= a.scale;
        bm = sg[j] > bm ? sg[j] : bm;
      }
      const float m_new = bm > m[g] ? bm : m[g];
      c[g] = m[g] == -__builtin_inff() ? 0.f : __builtin_expf(m[g] - m_new);
      m[g] = m_new;
      auto lsum = V::zero();
      const auto vm = V::set1(m_new);
      for (int j = 0; j < nb; j += V::W) {
        const int n = nb - j < V::W ? nb - j : V::W;
        auto p = vexp<V>(V::sub(V::load_n(sg + j, n), vm));
        V::store_n(sg + j, p, n);
        if (n < V::W) p = V::load_n(sg + j, n);  // drop the lanes past the block
        lsum = V::add(lsum, p);
      }
      l[g] = l[g] * c[g] + V::hsum(lsum);
      if (vs)
        for (int j = 0; j < nb; ++j) sg[j] *= vs[j0 + j];
    }
    scale_axpy_heads<V, NG>(out, c, &s[0][0], B, 1, vc + j0 * hd, nb, hd);
  }
  for (int g = 0; g < NG; ++g) {
    const float inv = 1.f / l[g];
    for (int d = 0; d < hd; ++d) out[g][d] *= inv;
  }
}

template <class V, class KT>
void attention_heads_kt(const AttnArgs& a, int64_t i, int h0, int h1, int64_t n_keys) {
  switch (h1 - h0) {
    case 1: return attention_one_t<V, KT>(a, i, h0, n_keys);
    case 2: return attention_heads_t<V, KT, 2>(a, i, h0, n_keys);
    case 3: return attention_heads_t<V, KT, 3>(a, i, h0, n_keys);
    default: return attention_heads_t<V, KT, 4>(a, i, h0, n_keys);  // dispatch caps it at 4
  }
}

template <class V>
void attention_heads_v(const AttnArgs& a, int64_t i, int h0, int h1, int64_t n_keys) {
  if (a.kv_type == DType::F16) return attention_heads_kt<V, f16_t>(a, i, h0, h1, n_keys);
  if (a.kv_type == DType::Q8) return attention_heads_kt<V, int8_t>(a, i, h0, h1, n_keys);
  return attention_heads_kt<V, float>(a, i, h0, h1, n_keys);
}

// ---------------------------------------------------------------- decode attention (split-K)

// Query i, heads [h0, h0 + NG) of one KV head, keys [j0, j1): the unnormalized output rows,
// max and exp-sum for the combine in dispatch.cpp (KernelTable::attention_part).
//  - Every K and V row is read once for all NG heads (7 per KV head in Qwen2-0.5B).
//  - Scores are stored key-major, s[key][HG], so scaling, max and exp run on whole vectors of
//    W / HG keys instead of per head and per key.
//  - Software prefetch: while a block's scores are computed, its V rows and the next block's K
//    rows are requested. The hardware prefetcher restarts at every 4 KB page and left this loop
//    waiting on DRAM (~3 GB/s of KV at depth 3328 against ~13 GB/s per core).
template <class V, class KT, int NG>
void attention_part_t(const AttnArgs& a, int64_t i, int h0, int64_t j0, int64_t j1, float* o,
                      float* mo, float* lo) {
  using R = typename V::R;
  constexpr int B = 64;                // keys per block
  constexpr int HG = NG <= 4 ? 4 : 8;  // score slots per key (a divisor of V::W)
  static_assert(V::W % HG == 0, "a vector must hold whole keys' scores");
  const int hd = a.head_dim;
  const HeadCache<V, KT> hc = head_cache<V, KT>(a, h0);
  const KT *kc = hc.k, *vc = hc.v;
  const float *ks = hc.ks, *vs = hc.vs;
  const float* q[8];
  for (int g = 0; g < NG; ++g) q[g] = a.q + (i * a.n_heads + h0 + g) * hd;
  for (int64_t e = 0; e < int64_t(NG) * hd; ++e) o[e] = 0.f;
  float* orow[NG];
  for (int g = 0; g < NG; ++g) orow[g] = o + g * hd;
  float m[HG], l[HG], c[HG];
  for (int g = 0; g < HG; ++g) m[g] = -__builtin_inff(), l[g] = 0.f;
  const int64_t row_bytes = int64_t(hd) * int64_t(sizeof(KT));
  auto prefetch_rows = [&](const KT* base, int64_t r0, int64_t r1) {
    const char* p = reinterpret_cast<const char*>(base + r0 * hd);
    const char* end = reinterpret_cast<const char*>(base + r1 * hd);
    for (; p < end; p += 64) __builtin_prefetch(p);
  };
  prefetch_rows(kc, j0, min_of<int64_t>(j1, j0 + B));
  alignas(64) float s[B * HG + V::W];
  alignas(64) float tmp[V::W];
  const R vscale = V::set1(a.scale);
  for (int64_t b0 = j0; b0 < j1; b0 += B) {
    const int nb = int(min_of<int64_t>(B, j1 - b0));
    const KT* kb = kc + b0 * hd;
    const KT* vb = vc + b0 * hd;
    const int64_t next_end = min_of<int64_t>(j1, b0 + 2 * B);
    for (int j = 0; j < nb; ++j) {
      // One row ahead of the V block and one block ahead of the K rows, a row per key.
      const char* pv = reinterpret_cast<const char*>(vb + j * hd);
      for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(pv + off);
      if (b0 + B + j < next_end) {
        const char* pk = reinterpret_cast<const char*>(kb + (B + j) * hd);
        for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(pk + off);
      }
      if (hd % V::W == 0)
        dots_row<V, NG, true>(q, kb + j * hd, hd, s + j * HG);
      else
        dots_row<V, NG, false>(q, kb + j * hd, hd, s + j * HG);
    }
    if (ks)
      for (int j = 0; j < nb; ++j)
        for (int g = 0; g < NG; ++g) s[j * HG + g] *= ks[b0 + j];
    // Pad to whole vectors with -inf (their exp is ~0 and only enters the sum's tail lanes).
    const int n = nb * HG, nv = (n + V::W - 1) / V::W * V::W;
    for (int e = n; e < nv; ++e) s[e] = -__builtin_inff();
    R vmax = V::set1(-__builtin_inff());
    for (int e = 0; e < nv; e += V::W) {
      const R x = V::mul(V::load(s + e), vscale);
      V::store(s + e, x);
      vmax = V::max(vmax, x);
    }
    V::store(tmp, vmax);
    float mrep[V::W];
    for (int g = 0; g < HG; ++g) {
      float bm = tmp[g];
      for (int r = g + HG; r < V::W; r += HG) bm = tmp[r] > bm ? tmp[r] : bm;
      const float m_new = bm > m[g] ? bm : m[g];
      c[g] = m[g] == -__builtin_inff() ? 0.f : __builtin_expf(m[g] - m_new);
      m[g] = m_new;
      for (int r = g; r < V::W; r += HG) mrep[r] = m_new;
    }
    const R vm = V::load(mrep);
    R lsum = V::zero();
    for (int e = 0; e < nv; e += V::W) {
      const R p = vexp<V>(V::sub(V::load(s + e), vm));
      V::store(s + e, p);
      lsum = V::add(lsum, p);
    }
    V::store(tmp, lsum);
    for (int g = 0; g < HG; ++g) {
      float t = 0.f;
      for (int r = g; r < V::W; r += HG) t += tmp[r];
      l[g] = l[g] * c[g] + t;
    }
    if (vs)
      for (int j = 0; j < nb; ++j)
        for (int g = 0; g < NG; ++g) s[j * HG + g] *= vs[b0 + j];
    // o = o * c + sum_j p_j v_j, one output vector of NG heads per pass over the block's rows.
    scale_axpy_heads<V, NG>(orow, c, s, 1, HG, vb, nb, hd);
  }
  for (int g = 0; g < NG; ++g) mo[g] = m[g], lo[g] = l[g];
}

template <class V, class KT>
void attention_part_kt(const AttnArgs& a, int64_t i, int h0, int h1, int64_t j0, int64_t j1,
                       float* o, float* m, float* l) {
  switch (h1 - h0) {
    case 1: return attention_part_t<V, KT, 1>(a, i, h0, j0, j1, o, m, l);
    case 2: return attention_part_t<V, KT, 2>(a, i, h0, j0, j1, o, m, l);
    case 3: return attention_part_t<V, KT, 3>(a, i, h0, j0, j1, o, m, l);
    case 4: return attention_part_t<V, KT, 4>(a, i, h0, j0, j1, o, m, l);
    case 5: return attention_part_t<V, KT, 5>(a, i, h0, j0, j1, o, m, l);
    case 6: return attention_part_t<V, KT, 6>(a, i, h0, j0, j1, o, m, l);
    case 7: return attention_part_t<V, KT, 7>(a, i, h0, j0, j1, o, m, l);
    default: return attention_part_t<V, KT, 8>(a, i, h0, j0, j1, o, m, l);  // capped at 8
  }
}

template <class V>
void attention_part_v(const AttnArgs& a, int64_t i, int h0, int h1, int64_t j0, int64_t j1,
                      float* o, float* m, float* l) {
  if (a.kv_type == DType::F16) return attention_part_kt<V, f16_t>(a, i, h0, h1, j0, j1, o, m, l);
  if (a.kv_type == DType::Q8) return attention_part_kt<V, int8_t>(a, i, h0, h1, j0, j1, o, m, l);
  return attention_part_kt<V, float>(a, i, h0, h1, j0, j1, o, m, l);
}

template <class V>
void kv_rows_to_f32_v(const void* rows, const float* scales, DType kv_type, int64_t n, int head_dim,
                      float* dst) {
  if (kv_type != DType::Q8) return convert_to_f32_v<V>(rows, kv_type, dst, n * head_dim);
  const auto* q = static_cast<const int8_t*>(rows);
  for (int64_t j = 0; j < n; ++j) {
    const auto sc = V::set1(scales[j]);
    const int8_t* src = q + j * head_dim;
    float* o = dst + j * head_dim;
    int d = 0;
    for (; d + V::W <= head_dim; d += V::W) V::store(o + d, V::mul(V::load(src + d), sc));
    if (d < head_dim) V::store_n(o + d, V::mul(V::load_n(src + d, head_dim - d), sc), head_dim - d);
  }
}

// Rotate-half RoPE in place, W pairs (i, i + half) per step: a' = a c - b s, b' = b c + a s,
// each product rounded (the empty asm stops its contraction into an FMA): bit-identical to the
// scalar kernel, so prefill and decode rotate exactly as before on every ISA.
template <class V>
void rope_v(float* x, int64_t n_tok, int n_heads, int head_dim, const int32_t* positions,
            const float* cos_table, const float* sin_table) {
  using R = typename V::R;
  const int half = head_dim / 2;
  const auto product = [](R p, R q) {
    if constexpr (requires { V::mul_rounded(p, q); }) {
      return V::mul_rounded(p, q);  // traits whose R is no single register (NEON pairs)
    } else {
      R r = V::mul(p, q);
      asm("" : "+v"(r));
      return r;
    }
  };
  const auto rotate = [&](float* v, const float* c, const float* s, int i, int n) {
    const R a = V::load_n(v + i, n), b = V::load_n(v + i + half, n);
    const R cv = V::load_n(c + i, n), sv = V::load_n(s + i, n);
    V::store_n(v + i, V::sub(product(a, cv), product(b, sv)), n);
    V::store_n(v + i + half, V::add(product(b, cv), product(a, sv)), n);
  };
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* c = cos_table + int64_t(positions[t]) * half;
    const float* s = sin_table + int64_t(positions[t]) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      int i = 0;
      for (; i + V::W <= half; i += V::W) rotate(v, c, s, i, V::W);
      if (i < half) rotate(v, c, s, i, half - i);
    }
  }
}

}  // namespace
}  // namespace edgevl::cpu

#include "backend/cpu/simd/linear_attention_simd.h"

namespace edgevl::cpu {
namespace {

// The kernel table of one ISA: every SIMD kernel instantiated for V, scalar for the rest.
template <class V>
KernelTable simd_kernel_table(const char* name) {
  KernelTable k = scalar_kernels();
  k.name = name;
  k.matmul_cols = matmul_cols_v<V>;
  k.matmul_bf16p_cols = matmul_bf16p_cols_v<V>;
  k.attention_heads = attention_heads_v<V>;
  k.attention_part = attention_part_v<V>;
  k.rmsnorm = rmsnorm_v<V>;
  k.layernorm = layernorm_v<V>;
  k.silu_mul = silu_mul_v<V>;
  k.gelu_erf = gelu_erf_v<V>;
  k.gelu_tanh = gelu_tanh_v<V>;
  k.add = add_v<V>;
  k.convert_to_f32 = convert_to_f32_v<V>;
  k.kv_rows_to_f32 = kv_rows_to_f32_v<V>;
  k.softmax_rows = softmax_rows_v<V>;
  k.rope = rope_v<V>;
  k.argmax = argmax_v<V>;
  k.conv1d_silu = conv1d_silu_v<V>;
  k.delta_rule_heads = delta_rule_heads_v<V>;
  k.gated_rmsnorm = gated_rmsnorm_v<V>;
  k.sigmoid_mul = sigmoid_mul_v<V>;
  return k;
}

}  // namespace
}  // namespace edgevl::cpu
