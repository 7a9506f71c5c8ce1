#pragma once
// The gated delta rule (Qwen3.5's Gated DeltaNet layers) written once over a small row-ops type
// `O` (dot, axpy, scale, sum_sq, combine over float rows): the scalar reference instantiates it
// with plain loops (ref/linear_attention_ref.cpp), every SIMD level with its vector ops
// (simd/linear_attention_simd.h). Both forms of the reference are here, on one value head at a
// time:
//   recurrent (decode): per token S <- S e^g; kv = S^T k; d = b (v - kv); S <- S + k d^T;
//                       o = S^T q.
//   chunked (prefill, C = 64 tokens, as transformers' torch_chunk_gated_delta_rule): within a
//   chunk c_i = sum_{j<=i} g_j, A_ij = b_i (k_i.k_j) e^{c_i - c_j} (j < i); U = (I + A)^-1 bV and
//   W = (I + A)^-1 (b e^c K) by forward substitution; Vn = U - W S;
//   O = e^c (Q S) + ((Q K^T) . D) Vn with D_ij = e^{c_i - c_j} (j <= i);
//   S <- e^{c_last} S + (K . e^{c_last - c})^T Vn.
// The same recurrence, so the forms agree to rounding (tests/backend/linear_attention_test.cpp).
// q and k are L2-normalised per head (x / sqrt(sum x^2 + 1e-6)) and q scaled by dk^-1/2, in f32;
// b = sigmoid(b_raw), g = -exp(A_log) softplus(a + dt_bias) per value head.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu::delta_rule {
// Internal to each file that includes it: every ISA's translation unit keeps its own copy (see
// kernel_table.h on sharing code across -m flags).
namespace {

inline constexpr int64_t kChunk = 64;

inline float softplus(float x) {  // torch.nn.functional.softplus: beta 1, threshold 20
  return x > 20.f ? x : std::log1p(std::exp(x));
}

// One value head's inputs for tokens [t0, t0 + n): q and k normalised, v, beta, g.
struct HeadRows {
  std::vector<float> q, k, v, beta, g;
};

template <class O>
void load_head(const DeltaRuleArgs& a, int h, int64_t t0, int64_t n, HeadRows& r) {
  const int dk = a.dk, dv = a.dv, kh = h / (a.hv / a.hk);  // repeat_interleave: GQA groups
  r.q.resize(size_t(n * dk));
  r.k.resize(size_t(n * dk));
  r.v.resize(size_t(n * dv));
  r.beta.resize(size_t(n));
  r.g.resize(size_t(n));
  const float q_scale = 1.f / std::sqrt(float(dk));
  const float decay_rate = -std::exp(a.a_log[h]);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = a.qkv + (t0 + i) * a.ld_qkv;
    const float* q = row + int64_t(kh) * dk;
    const float* k = row + int64_t(a.hk) * dk + int64_t(kh) * dk;
    const float* v = row + 2 * int64_t(a.hk) * dk + int64_t(h) * dv;
    float* qo = r.q.data() + i * dk;
    float* ko = r.k.data() + i * dk;
    const float qn = 1.f / std::sqrt(O::sum_sq(q, dk) + 1e-6f);
    const float kn = 1.f / std::sqrt(O::sum_sq(k, dk) + 1e-6f);
    for (int d = 0; d < dk; ++d) {
      qo[d] = q[d] * qn * q_scale;
      ko[d] = k[d] * kn;
    }
    std::copy(v, v + dv, r.v.data() + i * dv);
    const float b = a.b[(t0 + i) * a.ld_ab + h], x = a.a[(t0 + i) * a.ld_ab + h];
    r.beta[size_t(i)] = 1.f / (1.f + std::exp(-b));
    r.g[size_t(i)] = decay_rate * softplus(x + a.dt_bias[h]);
  }
}

// Tokens [t0, t0 + n) of value head h, one at a time. kv = e^g S^T k reads the old state
// (the decay applied to the sum), then each row of S is decayed and updated, then o = S^T q.
template <class O>
void recurrent(const DeltaRuleArgs& a, int h, int64_t t0, int64_t n, HeadRows& r) {
  const int dk = a.dk, dv = a.dv;
  float* S = a.state + int64_t(h) * dk * dv;
  load_head<O>(a, h, t0, n, r);
  thread_local std::vector<float> mem;
  mem.resize(size_t(dv));
  for (int64_t i = 0; i < n; ++i) {
    const float* q = r.q.data() + i * dk;
    const float* k = r.k.data() + i * dk;
    const float* v = r.v.data() + i * dv;
    const float decay = std::exp(r.g[size_t(i)]), beta = r.beta[size_t(i)];
    std::fill(mem.begin(), mem.end(), 0.f);
    O::combine(mem.data(), k, S, dv, dk, dv);
    for (int e = 0; e < dv; ++e) mem[size_t(e)] = beta * (v[e] - decay * mem[size_t(e)]);
    for (int d = 0; d < dk; ++d) {
      O::scale(S + int64_t(d) * dv, decay, dv);
      O::axpy(S + int64_t(d) * dv, k[d], mem.data(), dv);
    }
    float* o = a.out + (t0 + i) * a.ld_out + int64_t(h) * dv;
    std::fill(o, o + dv, 0.f);
    O::combine(o, q, S, dv, dk, dv);
  }
}

// Tokens [t0, t0 + n), n <= kChunk, of value head h as one chunk. Every product is a sum of
// scaled rows (O::combine: the destination row stays in registers over the sum).
template <class O>
void chunk(const DeltaRuleArgs& a, int h, int64_t t0, int64_t n, HeadRows& r) {
  const int dk = a.dk, dv = a.dv;
  float* S = a.state + int64_t(h) * dk * dv;
  load_head<O>(a, h, t0, n, r);
  thread_local std::vector<float> c, A, U, W, coef, Kt;
  c.resize(size_t(n));
  A.assign(size_t(n * n), 0.f);
  U.resize(size_t(n * dv));
  W.resize(size_t(n * dk));
  coef.resize(size_t(std::max<int64_t>(n, dk)));
  // K^T [dk][n]: the rows of K K^T and Q K^T as sums of its rows (vectors over the tokens).
  Kt.resize(size_t(dk * n));
  for (int64_t j = 0; j < n; ++j)
    for (int d = 0; d < dk; ++d) Kt[size_t(d * n + j)] = r.k[size_t(j * dk + d)];
  float run = 0.f;
  for (int64_t i = 0; i < n; ++i) c[size_t(i)] = run += r.g[size_t(i)];
  // -A (strictly lower), then U and W row by row: row i subtracts A_ij times the rows j < i.
  for (int64_t i = 0; i < n; ++i) {
    const float* ki = r.k.data() + i * dk;
    const float bi = r.beta[size_t(i)];
    float* na = A.data() + i * n;  // zeroed: k_i.k_j for j < i first
    O::combine(na, ki, Kt.data(), n, dk, i);
    for (int64_t j = 0; j < i; ++j) na[j] *= -bi * std::exp(c[size_t(i)] - c[size_t(j)]);
    float* u = U.data() + i * dv;
    float* w = W.data() + i * dk;
    const float* vi = r.v.data() + i * dv;
    const float wb = bi * std::exp(c[size_t(i)]);
    for (int e = 0; e < dv; ++e) u[e] = bi * vi[e];
    for (int d = 0; d < dk; ++d) w[d] = wb * ki[d];
    O::combine(u, na, U.data(), dv, i, dv);
    O::combine(w, na, W.data(), dk, i, dk);
  }
  // Vn = U - W S (in U); O = e^c (Q S) + sum_{j<=i} (q_i.k_j) e^{c_i - c_j} Vn_j.
  for (int64_t i = 0; i < n; ++i) {
    const float* w = W.data() + i * dk;
    for (int d = 0; d < dk; ++d) coef[size_t(d)] = -w[d];
    O::combine(U.data() + i * dv, coef.data(), S, dv, dk, dv);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* qi = r.q.data() + i * dk;
    float* o = a.out + (t0 + i) * a.ld_out + int64_t(h) * dv;
    const float ec = std::exp(c[size_t(i)]);
    for (int d = 0; d < dk; ++d) coef[size_t(d)] = qi[d] * ec;
    std::fill(o, o + dv, 0.f);
    O::combine(o, coef.data(), S, dv, dk, dv);
    std::fill(coef.begin(), coef.begin() + i + 1, 0.f);
    O::combine(coef.data(), qi, Kt.data(), n, dk, i + 1);  // q_i.k_j for j <= i
    for (int64_t j = 0; j <= i; ++j) coef[size_t(j)] *= std::exp(c[size_t(i)] - c[size_t(j)]);
    O::combine(o, coef.data(), U.data(), dv, i + 1, dv);
  }
  // S <- e^{c_last} S + sum_j e^{c_last - c_j} k_j Vn_j^T.
  const float last = c[size_t(n - 1)];
  for (int d = 0; d < dk; ++d) {
    float* s = S + int64_t(d) * dv;
    O::scale(s, std::exp(last), dv);
    for (int64_t j = 0; j < n; ++j)
      coef[size_t(j)] = r.k[size_t(j * dk + d)] * std::exp(last - c[size_t(j)]);
    O::combine(s, coef.data(), U.data(), dv, n, dv);
  }
}

// Value heads [h0, h1) over all a.rows tokens, in the form asked.
template <class O>
void heads(const DeltaRuleArgs& a, int h0, int h1, bool chunked) {
  thread_local HeadRows r;
  for (int h = h0; h < h1; ++h) {
    if (!chunked) {
      recurrent<O>(a, h, 0, a.rows, r);
      continue;
    }
    for (int64_t t0 = 0; t0 < a.rows; t0 += kChunk)
      chunk<O>(a, h, t0, std::min(kChunk, a.rows - t0), r);
  }
}

}  // namespace
}  // namespace edgevl::cpu::delta_rule
