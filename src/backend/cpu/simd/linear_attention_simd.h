#pragma once
// The Gated DeltaNet kernels (Qwen3.5's linear attention) over a vector-traits type V: a part of
// simd_kernels.h, which includes it before its table (it uses that file's vexp, vsilu_mul and
// sum_sq, in the same translation-unit-local namespace).
#include <vector>

#include "backend/cpu/delta_rule_impl.h"

namespace edgevl::cpu {
namespace {

// The row ops of delta_rule_impl.h on V's registers.
template <class V>
struct VecRowOps {
  static float dot(const float* a, const float* b, int64_t n) {
    auto acc = V::zero();
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) acc = V::fma(V::load(a + i), V::load(b + i), acc);
    if (i < n) {
      const int m = int(n - i);
      acc = V::fma(V::load_n(a + i, m), V::load_n(b + i, m), acc);
    }
    return V::hsum(acc);
  }
  static float sum_sq(const float* x, int64_t n) { return cpu::sum_sq<V>(x, n); }
  static void axpy(float* y, float alpha, const float* x, int64_t n) {
    const auto al = V::set1(alpha);
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::fma(al, V::load(x + i), V::load(y + i)));
    if (i < n) {
      const int m = int(n - i);
      V::store_n(y + i, V::fma(al, V::load_n(x + i, m), V::load_n(y + i, m)), m);
    }
  }
  // y[0, n) += sum_j c[j] x[j * ldx + 0, n): a block of R vectors of y stays in registers (R
  // independent FMA chains) while the k rows stream past; an axpy per row would load and store
  // y k times.
  template <int R>
  static void combine_block(float* y, const float* c, const float* x, int64_t ldx, int64_t k) {
    typename V::R acc[R];
    for (int v = 0; v < R; ++v) acc[v] = V::load(y + v * V::W);
    for (int64_t j = 0; j < k; ++j) {
      const auto cj = V::set1(c[j]);
      const float* xr = x + j * ldx;
      for (int v = 0; v < R; ++v) acc[v] = V::fma(cj, V::load(xr + v * V::W), acc[v]);
    }
    for (int v = 0; v < R; ++v) V::store(y + v * V::W, acc[v]);
  }
  static void combine(float* y, const float* c, const float* x, int64_t ldx, int64_t k, int64_t n) {
    int64_t i = 0;
    for (; i + 8 * V::W <= n; i += 8 * V::W) combine_block<8>(y + i, c, x + i, ldx, k);
    if (i + 4 * V::W <= n) combine_block<4>(y + i, c, x + i, ldx, k), i += 4 * V::W;
    if (i + 2 * V::W <= n) combine_block<2>(y + i, c, x + i, ldx, k), i += 2 * V::W;
    for (; i < n; i += V::W) {  // the rest, a vector at a time (the last one partial)
      const int m = int(min_of<int64_t>(V::W, n - i));
      auto acc = V::load_n(y + i, m);
      for (int64_t j = 0; j < k; ++j)
        acc = V::fma(V::set1(c[j]), V::load_n(x + j * ldx + i, m), acc);
      V::store_n(y + i, acc, m);
    }
  }
  static void scale(float* y, float alpha, int64_t n) {
    const auto al = V::set1(alpha);
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::mul(al, V::load(y + i)));
    if (i < n) {
      const int m = int(n - i);
      V::store_n(y + i, V::mul(al, V::load_n(y + i, m)), m);
    }
  }
};

// Channels in vectors: the taps transposed once per call to [taps][channels] rows.
template <class V>
void conv1d_silu_v(const float* x, int64_t rows, int64_t channels, const float* w, int taps,
                   float* state, float* y) {
  const int64_t C = channels, past = taps - 1;
  thread_local std::vector<float> wt, keep;
  wt.resize(size_t(taps * C));
  for (int64_t c = 0; c < C; ++c)
    for (int j = 0; j < taps; ++j) wt[size_t(j * C + c)] = w[c * taps + j];
  auto in = [&](int64_t s) { return s < 0 ? state + (past + s) * C : x + s * C; };
  const auto one = V::set1(1.f);
  for (int64_t t = 0; t < rows; ++t) {
    float* yr = y + t * C;
    int64_t c = 0;
    for (; c + V::W <= C; c += V::W) {
      auto acc = V::zero();
      for (int j = 0; j < taps; ++j)
        acc = V::fma(V::load(wt.data() + j * C + c), V::load(in(t - past + j) + c), acc);
      V::store(yr + c, vsilu_mul<V>(acc, one));
    }
    if (c < C) {
      const int m = int(C - c);
      auto acc = V::zero();
      for (int j = 0; j < taps; ++j)
        acc = V::fma(V::load_n(wt.data() + j * C + c, m), V::load_n(in(t - past + j) + c, m), acc);
      V::store_n(yr + c, vsilu_mul<V>(acc, one), m);
    }
  }
  keep.resize(size_t(past * C));
  for (int64_t s = 0; s < past; ++s) {
    const float* src = in(rows - past + s);
    std::copy(src, src + C, keep.data() + s * C);
  }
  std::copy(keep.begin(), keep.end(), state);
}

template <class V>
void delta_rule_heads_v(const DeltaRuleArgs& a, int h0, int h1, bool chunked) {
  delta_rule::heads<VecRowOps<V>>(a, h0, h1, chunked);
}

template <class V>
void gated_rmsnorm_v(const float* x, const float* z, const float* w, float eps, int64_t rows,
                     int64_t dim, float* y) {
  const auto one = V::set1(1.f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* yr = y + r * dim;
    const auto inv = V::set1(1.f / __builtin_sqrtf(sum_sq<V>(xr, dim) / float(dim) + eps));
    int64_t i = 0;
    for (; i + V::W <= dim; i += V::W)
      V::store(yr + i, V::mul(V::mul(V::mul(V::load(xr + i), inv), V::load(w + i)),
                              vsilu_mul<V>(V::load(zr + i), one)));
    if (i < dim) {
      const int n = int(dim - i);
      V::store_n(yr + i,
                 V::mul(V::mul(V::mul(V::load_n(xr + i, n), inv), V::load_n(w + i, n)),
                        vsilu_mul<V>(V::load_n(zr + i, n), one)),
                 n);
    }
  }
}

template <class V>
void sigmoid_mul_v(const float* x, const float* gate, float* out, int64_t n) {
  const auto one = V::set1(1.f);
  auto f = [&](auto xv, auto gv) {
    return V::div(xv, V::add(one, vexp<V>(V::sub(V::zero(), gv))));
  };
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(out + i, f(V::load(x + i), V::load(gate + i)));
  if (i < n) {
    const int m = int(n - i);
    V::store_n(out + i, f(V::load_n(x + i, m), V::load_n(gate + i, m)), m);
  }
}

}  // namespace
}  // namespace edgevl::cpu
