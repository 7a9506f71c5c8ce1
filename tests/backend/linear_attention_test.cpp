// The Gated DeltaNet kernels (Qwen3.5's linear attention: causal conv + SiLU, the gated delta
// rule in its chunked and recurrent forms, the gated RMSNorm, the sigmoid gate) against
// double-precision oracles written here from the reference's math, at every ISA level this CPU
// runs, on awkward shapes (odd widths, GQA groups of 3, chunks of 64 with a tail), and fed in
// pieces: a sequence split anywhere gives the same outputs and state as one pass.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "support/isa_params.h"

namespace edgevl::cpu {
namespace {

std::vector<float> rnd(size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

class LinearAttention : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!force_isa(GetParam())) GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  void TearDown() override { force_isa("best"); }
};

TEST_P(LinearAttention, CausalConvMatchesOracleAndCarriesState) {
  std::mt19937 rng(1);
  for (int64_t C : {1, 7, 16, 33, 100})
    for (int taps : {2, 4}) {
      const int64_t T = 11;
      const auto x = rnd(size_t(T * C), rng, -2.f, 2.f), w = rnd(size_t(C * taps), rng);
      std::vector<float> state(size_t((taps - 1) * C), 0.f), y(size_t(T * C));
      causal_conv1d_silu(x.data(), T, C, w.data(), taps, state.data(), y.data());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0;
          for (int j = 0; j < taps; ++j) {
            const int64_t s = t - (taps - 1) + j;
            if (s >= 0) acc += double(w[size_t(c * taps + j)]) * x[size_t(s * C + c)];
          }
          ASSERT_NEAR(y[size_t(t * C + c)], silu(acc), 2e-6 * (1 + std::fabs(acc)))
              << "C=" << C << " taps=" << taps << " t=" << t << " c=" << c;
        }
      // In pieces of 1, 3 and the rest: the same rows, the same final state.
      std::vector<float> st(size_t((taps - 1) * C), 0.f), yp(size_t(T * C));
      for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {4, T - 4}})
        causal_conv1d_silu(x.data() + t0 * C, n, C, w.data(), taps, st.data(), yp.data() + t0 * C);
      EXPECT_EQ(yp, y) << "C=" << C;
      EXPECT_EQ(st, state) << "C=" << C;
      // The state holds the last raw inputs, not outputs.
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(state[size_t((taps - 2) * C + c)], x[size_t((T - 1) * C + c)]);
    }
}

// The reference's recurrence in double, token by token (torch_recurrent_gated_delta_rule with
// l2norm in the kernel, q scaled by dk^-1/2, beta = sigmoid(b), g = -exp(A_log) softplus(a + dt)).
struct Problem {
  int hk, hv, dk, dv;
  int64_t rows;
  std::vector<float> qkv, a, b, a_log, dt_bias;
  int64_t width() const { return 2 * int64_t(hk) * dk + int64_t(hv) * dv; }
  DeltaRuleArgs args(int64_t t0, int64_t n, float* state, float* out) const {
    return {qkv.data() + t0 * width(),
            width(),
            a.data() + t0 * hv,
            b.data() + t0 * hv,
            hv,
            a_log.data(),
            dt_bias.data(),
            n,
            hk,
            hv,
            dk,
            dv,
            state,
            out + t0 * int64_t(hv) * dv,
            int64_t(hv) * dv};
  }
};

Problem make_problem(int hk, int hv, int dk, int dv, int64_t rows, std::mt19937& rng) {
  Problem p{hk, hv, dk, dv, rows, {}, {}, {}, {}, {}};
  p.qkv = rnd(size_t(rows * p.width()), rng, -1.5f, 1.5f);
  p.a = rnd(size_t(rows * hv), rng, -3.f, 3.f);
  p.b = rnd(size_t(rows * hv), rng, -3.f, 3.f);
  p.a_log = rnd(size_t(hv), rng, -1.f, 1.5f);
  p.dt_bias = rnd(size_t(hv), rng, -1.f, 1.f);
  return p;
}

std::vector<double> oracle(const Problem& p, std::vector<double>& S) {
  const int64_t W = p.width();
  std::vector<double> out(size_t(p.rows * p.hv * p.dv));
  S.assign(size_t(p.hv * p.dk * p.dv), 0.0);
  for (int64_t t = 0; t < p.rows; ++t)
    for (int h = 0; h < p.hv; ++h) {
      const int kh = h / (p.hv / p.hk);
      const float* row = p.qkv.data() + t * W;
      std::vector<double> q(size_t(p.dk)), k(size_t(p.dk));
      double qs = 0, ks = 0;
      for (int d = 0; d < p.dk; ++d) {
        q[size_t(d)] = row[kh * p.dk + d];
        k[size_t(d)] = row[p.hk * p.dk + kh * p.dk + d];
        qs += q[size_t(d)] * q[size_t(d)];
        ks += k[size_t(d)] * k[size_t(d)];
      }
      for (int d = 0; d < p.dk; ++d) {
        q[size_t(d)] /= std::sqrt(qs + 1e-6) * std::sqrt(double(p.dk));
        k[size_t(d)] /= std::sqrt(ks + 1e-6);
      }
      const double beta = 1.0 / (1.0 + std::exp(-double(p.b[size_t(t * p.hv + h)])));
      const double x = double(p.a[size_t(t * p.hv + h)]) + p.dt_bias[size_t(h)];
      const double g = -std::exp(double(p.a_log[size_t(h)])) * std::log1p(std::exp(x));
      double* s = S.data() + size_t(h) * p.dk * p.dv;
      for (int e = 0; e < p.dv; ++e) {
        double kv = 0;
        for (int d = 0; d < p.dk; ++d) kv += (s[d * p.dv + e] *= std::exp(g)) * k[size_t(d)];
        const double delta = beta * (row[2 * p.hk * p.dk + h * p.dv + e] - kv);
        double o = 0;
        for (int d = 0; d < p.dk; ++d)
          o += (s[d * p.dv + e] += k[size_t(d)] * delta) * q[size_t(d)];
        out[size_t((t * p.hv + h) * p.dv + e)] = o;
      }
    }
  return out;
}

TEST_P(LinearAttention, DeltaRuleBothFormsMatchOracle) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  struct Shape {
    int hk, hv, dk, dv;
  };
  // The last: dv 130 and dk 136, row sums over blocks of 8 + 2 vectors and a tail (16 lanes).
  for (Shape sh : {Shape{1, 1, 4, 4}, Shape{1, 3, 5, 7}, Shape{2, 4, 16, 16}, Shape{2, 6, 19, 33},
                   Shape{1, 2, 136, 130}})
    for (int64_t rows : {1, 7, 64, 65, 130}) {
      const Problem p = make_problem(sh.hk, sh.hv, sh.dk, sh.dv, rows, rng);
      std::vector<double> S_ref;
      const std::vector<double> ref = oracle(p, S_ref);
      for (DeltaRuleForm form : {DeltaRuleForm::Recurrent, DeltaRuleForm::Chunked}) {
        std::vector<float> S(S_ref.size(), 0.f), out(ref.size());
        gated_delta_rule(pool, p.args(0, rows, S.data(), out.data()), form);
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(out[i], ref[i], 2e-5 * (1 + std::fabs(ref[i])))
              << "form " << int(form) << " hv=" << sh.hv << " dk=" << sh.dk << " rows=" << rows
              << " i=" << i;
        for (size_t i = 0; i < S.size(); ++i)
          ASSERT_NEAR(S[i], S_ref[i], 2e-5 * (1 + std::fabs(S_ref[i]))) << "state " << i;
      }
    }
}

TEST_P(LinearAttention, DeltaRuleInPiecesEqualsOnePass) {
  // Prefill chunks of any size, then decode steps, carry the state exactly like one pass.
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const Problem p = make_problem(2, 4, 16, 8, 140, rng);
  std::vector<double> S_ref;
  const std::vector<double> ref = oracle(p, S_ref);
  std::vector<float> S(S_ref.size(), 0.f), out(ref.size());
  int64_t t0 = 0;
  for (int64_t n : {37, 64, 1, 29, 1, 1, 7}) {
    gated_delta_rule(pool, p.args(t0, n, S.data(), out.data()));
    t0 += n;
  }
  ASSERT_EQ(t0, p.rows);
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 2e-5 * (1 + std::fabs(ref[i]))) << i;
}

TEST_P(LinearAttention, GatedRmsNormAndSigmoidGate) {
  std::mt19937 rng(4);
  for (int64_t dim : {1, 7, 16, 33, 128}) {
    const int64_t rows = 5;
    const auto x = rnd(size_t(rows * dim), rng, -3.f, 3.f),
               z = rnd(size_t(rows * dim), rng, -9.f, 9.f), w = rnd(size_t(dim), rng, 0.f, 2.f);
    std::vector<float> y(x.size()), s(x.size());
    gated_rmsnorm(x.data(), z.data(), w.data(), 1e-6f, rows, dim, y.data());
    sigmoid_mul(x.data(), z.data(), s.data(), rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i)
        ss += double(x[size_t(r * dim + i)]) * x[size_t(r * dim + i)];
      const double inv = 1.0 / std::sqrt(ss / double(dim) + 1e-6);
      for (int64_t i = 0; i < dim; ++i) {
        const size_t k = size_t(r * dim + i);
        const double want = x[k] * inv * w[size_t(i)] * silu(z[k]);
        ASSERT_NEAR(y[k], want, 3e-6 * (1 + std::fabs(want))) << "dim " << dim << " i " << i;
        const double sg = x[k] / (1.0 + std::exp(-double(z[k])));
        ASSERT_NEAR(s[k], sg, 2e-6 * (1 + std::fabs(sg)));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, LinearAttention, ::testing::ValuesIn(test::all_isa_levels()),
                         test::isa_param_name);

}  // namespace
}  // namespace edgevl::cpu
