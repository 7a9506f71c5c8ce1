#include "compiler/gptq.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/hadamard.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "core/error.h"

namespace edgevl::compiler {

namespace {

// A = L L^T for a symmetric positive definite n x n A (row-major); L overwrites A's lower
// triangle (the upper one is zeroed). False when A is not positive definite.
bool cholesky(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[size_t(j * n + j)];
    for (int64_t k = 0; k < j; ++k) d -= a[size_t(j * n + k)] * a[size_t(j * n + k)];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[size_t(j * n + j)] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double v = a[size_t(i * n + j)];
      for (int64_t k = 0; k < j; ++k) v -= a[size_t(i * n + k)] * a[size_t(j * n + k)];
      a[size_t(i * n + j)] = v / d;
    }
    for (int64_t i = 0; i < j; ++i) a[size_t(i * n + j)] = 0;
  }
  return true;
}

// The upper Cholesky factor U of H^-1 (H^-1 = U^T U), H symmetric positive definite.
bool inverse_cholesky_upper(std::vector<double> h, int64_t n, std::vector<double>& u) {
  if (!cholesky(h, n)) return false;
  // L^-1 by forward substitution, column by column.
  std::vector<double> li(size_t(n * n), 0.0);
  for (int64_t c = 0; c < n; ++c) {
    li[size_t(c * n + c)] = 1.0 / h[size_t(c * n + c)];
    for (int64_t i = c + 1; i < n; ++i) {
      double v = 0;
      for (int64_t k = c; k < i; ++k) v -= h[size_t(i * n + k)] * li[size_t(k * n + c)];
      li[size_t(i * n + c)] = v / h[size_t(i * n + i)];
    }
  }
  // H^-1 = L^-T L^-1.
  std::vector<double> inv(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {
      double v = 0;
      for (int64_t k = j; k < n; ++k) v += li[size_t(k * n + i)] * li[size_t(k * n + j)];
      inv[size_t(i * n + j)] = inv[size_t(j * n + i)] = v;
    }
  if (!cholesky(inv, n)) return false;
  u.assign(size_t(n * n), 0.0);  // U = L2^T
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) u[size_t(j * n + i)] = inv[size_t(i * n + j)];
  return true;
}

}  // namespace

void GptqGrid::values(float* out) const {
  const int64_t ng = (k + group - 1) / group;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      out[r * k + c] = scales[size_t(r * ng + c / group)] * float(codes[size_t(r * k + c)]);
  if (rotation) cpu::hadamard_rows(out, n, k, rotation);  // H is its own inverse
}

GptqGrid gptq_q4(cpu::ThreadPool& pool, const float* w, const TensorEntry& e, const float* x,
                 int64_t M) {
  check(e.dtype == DType::Q4 && !e.zero_point && e.shape.size() == 2 && kGptqWindow % e.group == 0,
        "internal: GPTQ takes a symmetric Q4 matrix ('{}')", e.name);
  const int64_t N = e.shape[0], K = e.shape[1], G = e.group, ng = (K + G - 1) / G;
  std::vector<float> W(w, w + N * K), X(x, x + M * K);
  GptqGrid out{
      N, K, G, e.rotation, std::vector<int8_t>(size_t(N * K)), std::vector<float>(size_t(N * ng))};
  if (e.rotation) {
    cpu::hadamard_rows(W.data(), N, K, e.rotation);
    cpu::hadamard_rows(X.data(), M, K, e.rotation);
  }
  for (int64_t a = 0; a < K; a += kGptqWindow) {
    const int64_t b = std::min(K, a + kGptqWindow), L = b - a;
    std::vector<double> h(size_t(L * L), 0.0);
    pool.parallel_for(L, [&](int64_t i) {
      for (int64_t j = i; j < L; ++j) {
        double v = 0;
        for (int64_t m = 0; m < M; ++m)
          v += double(X[size_t(m * K + a + i)]) * double(X[size_t(m * K + a + j)]);
        h[size_t(i * L + j)] = v;
      }
    });
    double mean_diag = 0;
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < i; ++j) h[size_t(i * L + j)] = h[size_t(j * L + i)];
      mean_diag += h[size_t(i * L + i)];
    }
    mean_diag = mean_diag > 0 ? mean_diag / double(L) : 1.0;
    // Dampening keeps H invertible with fewer rows than columns (and channels never seen):
    // 1% of the mean diagonal as GPTQ does, raised until the factorisation succeeds.
    std::vector<double> u;
    for (double damp = 0.1;; damp *= 4) {
      std::vector<double> hd = h;
      for (int64_t i = 0; i < L; ++i) hd[size_t(i * L + i)] += damp * mean_diag;
      if (inverse_cholesky_upper(std::move(hd), L, u)) break;
      check(damp < 1e6, "internal: GPTQ on '{}' found no positive definite Hessian", e.name);
    }
    pool.parallel_for(N, [&](int64_t n) {
      std::vector<double> r(W.begin() + n * K + a, W.begin() + n * K + b);
      float grp[128];
      float s = 0;
      for (int64_t j = 0; j < L; ++j) {
        const int64_t k = a + j;
        if (k % G == 0) {
          const int64_t len = std::min(G, K - k);
          for (int64_t i = 0; i < len; ++i) grp[i] = float(r[size_t(j + i)]);
          s = f16_to_f32(cpu::q4_symmetric_scale(grp, len));
          out.scales[size_t(n * ng + k / G)] = s;
        }
        const float v = float(r[size_t(j)]);
        const float c = s != 0.f ? std::clamp(std::round(v / s), -8.f, 7.f) : 0.f;
        const float q = s * c;
        out.codes[size_t(n * K + k)] = int8_t(c);
        const double err = (r[size_t(j)] - double(q)) / u[size_t(j * L + j)];
        for (int64_t t = j + 1; t < L; ++t) r[size_t(t)] -= err * u[size_t(j * L + t)];
      }
    });
  }
  return out;
}

}  // namespace edgevl::compiler
