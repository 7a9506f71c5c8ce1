// Q8 / Q4 formats and kernels (src/backend/cpu/quant.h).
//
// What is checked, and how strictly:
// - pack/unpack: every element within half a quantization step (Q8: s/2, s = max|row|/127;
//   Q4: s_g/2 per group), plus a 1e-6 relative slack for the float division in the packer.
// - W8A8 / W4A8: every SIMD path must equal the scalar reference bit for bit. Both compute the
//   same int32 sums and then apply the same float scaling in the same order (quant.h), so any
//   integer difference (one product dropped, a wrong byte, a wrong zero point) shows up as an
//   inequality. A mutation test below checks that a single +-1 in one weight code is caught.
// - The scalar A8 reference itself against a double oracle built from quantize_rows_i8 and
//   the unpacked weights (1e-5 of sum|x*w|), so the reference's integer formulation is checked
//   independently of the packed layout it shares with the SIMD paths.
// - W8A16 / W4A16 (float FMA, order differs per ISA): within 1e-5 * sum|x*w| + 1e-6 of the
//   double oracle on the dequantized weights, for every ISA.
// - End to end: quantized matmul vs the float matmul of the original weights, relative
//   Frobenius error within a stated bound per preset (see QuantizedVsFloat).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/hadamard.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/packed_layout.h"
#include "support/isa_params.h"

namespace edgevl::cpu {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Weights with rows of very different magnitude, a few outliers, and an all-zero row.
std::vector<float> make_weights(int64_t N, int64_t K, std::mt19937& rng) {
  auto w = random_vec(size_t(N * K), rng);
  for (int64_t n = 0; n < N; ++n) {
    const float row_scale = std::pow(10.f, float(n % 5) - 2.f);
    for (int64_t k = 0; k < K; ++k) w[size_t(n * K + k)] *= row_scale;
  }
  for (size_t i = 0; i < w.size(); i += 97) w[i] *= 6.f;
  if (N > 3)
    for (int64_t k = 0; k < K; ++k) w[size_t(3 * K + k)] = 0.f;
  return w;
}

struct Q4Cfg {
  int group;
  bool zp;
};

std::string cfg_name(const Q4Cfg& c) {
  return "G=" + std::to_string(c.group) + (c.zp ? " zp" : " sym");
}

std::vector<uint8_t> pack_q8(const std::vector<float>& w, int64_t N, int64_t K) {
  std::vector<uint8_t> p(q8_packed_bytes(N, K));  // exact size: over-reads show under ASan
  q8_pack(w.data(), N, K, p.data());
  return p;
}
std::vector<uint8_t> pack_q4(const std::vector<float>& w, int64_t N, int64_t K, Q4Cfg c) {
  std::vector<uint8_t> p(q4_packed_bytes(N, K, c.group, c.zp));
  q4_pack(w.data(), N, K, c.group, c.zp, p.data());
  return p;
}

// Oracle in double: y = x' * W~^T + bias, and sum|x' * w~| for the tolerance.
void oracle(const std::vector<float>& x, int64_t M, int64_t K, const std::vector<float>& w,
            int64_t N, const float* bias, std::vector<double>* y, std::vector<double>* mag) {
  y->assign(size_t(M * N), 0.0);
  mag->assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bias[n] : 0.0, a = bias ? std::fabs(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(x[size_t(m * K + k)]) * w[size_t(n * K + k)];
        s += p;
        a += std::fabs(p);
      }
      (*y)[size_t(m * N + n)] = s;
      (*mag)[size_t(m * N + n)] = a;
    }
}

int64_t first_bad(const std::vector<float>& got, const std::vector<double>& ref,
                  const std::vector<double>& mag) {
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - ref[i]) <= 1e-5 * mag[i] + 1e-6)) return int64_t(i);
  return -1;
}

int64_t first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return int64_t(i);
  return -1;
}

// The activations the A8 kernels actually multiply: xq * scale per row.
std::vector<float> dequantized_activations(const std::vector<float>& x, int64_t M, int64_t K) {
  std::vector<int8_t> q(size_t(M * K));
  std::vector<float> s(static_cast<size_t>(M)), out(static_cast<size_t>(M * K));
  quantize_rows_i8(x.data(), M, K, K, q.data(), s.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      out[size_t(m * K + k)] = float(q[size_t(m * K + k)]) * s[size_t(m)];
  return out;
}

std::vector<std::string> simd_levels() {
  return test::runnable_simd_levels();
}

class QuantKernels : public ::testing::Test {
 protected:
  void TearDown() override { force_isa("best"); }
};

// ---------------------------------------------------------------- formats

TEST(QuantFormat, Sizes) {
  EXPECT_EQ(q8_packed_bytes(1, 1), size_t(16 * 4 + 128));
  EXPECT_EQ(q8_packed_bytes(17, 172), size_t(2 * (16 * 172 + 128)));
  // Q4: pairs of groups, each their codes + a 64-byte f16 scale line (+ a zero-point line).
  EXPECT_EQ(q4_packed_bytes(16, 172, 32, false), size_t(3 * (16 * 32 + 64)));
  EXPECT_EQ(q4_packed_bytes(33, 896, 128, true),
            size_t(3 * (3 * (16 * 128 + 128) + (8 * 128 + 128))));
  // 4.5 bits per weight at G = 32 without zero points, as in GGUF's Q4_0.
  EXPECT_EQ(q4_packed_bytes(896, 4864, 32, false) * 8, size_t(896) * 4864 * 9 / 2);
  for (int64_t K : {1, 3, 31, 172, 255, 4097}) {
    EXPECT_EQ(q8_panel_bytes(K) % 64, 0u);
    for (int g : {32, 64, 128})
      for (bool zp : {false, true}) EXPECT_EQ(q4_panel_bytes(K, g, zp) % 64, 0u);
  }
}

// Every byte of a Q4 panel belongs to exactly one thing (a code block, a scale, a zero point,
// or the padding of a half-used line), code blocks are 64-byte aligned, and the group pairs
// follow each other: a panel is one stream.
TEST(QuantFormat, Q4LayoutIsOneStreamWithoutOverlap) {
  for (int64_t G : {32, 64, 128})
    for (bool zp : {false, true})
      for (int64_t ng = 1; ng <= 7; ++ng) {
        const layout::Q4Layout L = layout::q4_layout(ng * G, G, zp);
        const int64_t pb = L.panel_bytes();
        ASSERT_EQ(pb % 64, 0);
        std::vector<int> owner(size_t(pb), 0);
        const auto claim = [&](int64_t off, int64_t len) {
          ASSERT_GE(off, 0);
          ASSERT_LE(off + len, pb) << "G=" << G << " ng=" << ng;
          for (int64_t i = off; i < off + len; ++i) ++owner[size_t(i)];
        };
        int64_t used = 0;
        for (int64_t g = 0; g < ng; ++g) {
          EXPECT_EQ(L.codes(g) % 64, 0);
          claim(L.codes(g), 8 * G);
          claim(L.scales(g), 32);
          used += 8 * G + 32;
          if (zp) {
            claim(L.zeros(g), 16);
            used += 16;
          }
          if (g % 2 == 1) {  // a pair: codes, codes, then the lines
            EXPECT_EQ(L.codes(g), L.codes(g - 1) + 8 * G);
          }
          if (g + 1 < ng) {  // the next group's bytes start where this pair's bytes end
            const int64_t next = g % 2 ? L.scales(g - 1) + (zp ? 128 : 64) : L.codes(g) + 8 * G;
            EXPECT_EQ(L.codes(g + 1), next);
          }
        }
        for (int64_t i = 0; i < pb; ++i) ASSERT_LE(owner[size_t(i)], 1) << "overlap at " << i;
        const int64_t padding = (ng % 2) * (zp ? 32 + 48 : 32) + (ng / 2) * (zp ? 32 : 0);
        EXPECT_EQ(used + padding, pb) << "G=" << G << " zp=" << zp << " ng=" << ng;
      }
}

TEST(QuantFormat, Q8RoundTrip) {
  std::mt19937 rng(1);
  for (int64_t N : {1, 7, 17, 33})
    for (int64_t K : {1, 3, 31, 172, 255, 4097}) {
      const auto w = make_weights(N, K, rng);
      const auto p = pack_q8(w, N, K);
      std::vector<float> u(w.size());
      q8_unpack(p.data(), N, K, u.data());
      double worst = 0;  // max error in units of the step
      for (int64_t n = 0; n < N; ++n) {
        float amax = 0;
        for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w[size_t(n * K + k)]));
        const float s = amax / 127.f;
        for (int64_t k = 0; k < K; ++k) {
          const size_t i = size_t(n * K + k);
          const double err = std::fabs(double(w[i]) - u[i]);
          ASSERT_LE(err, s / 2 + 1e-6 * std::fabs(w[i])) << "N=" << N << " K=" << K << " n=" << n;
          if (s > 0) worst = std::max(worst, err / s);
        }
        if (amax > 0) {  // the largest element is exact up to rounding of s
          float umax = 0;
          for (int64_t k = 0; k < K; ++k) umax = std::max(umax, std::fabs(u[size_t(n * K + k)]));
          EXPECT_NEAR(umax, amax, 1e-6 * amax);
        }
      }
      if (K >= 31) {
        EXPECT_GT(worst, 0.3) << "suspiciously exact: is anything quantized?";
      }
    }
}

TEST(QuantFormat, Q4RoundTrip) {
  std::mt19937 rng(2);
  for (Q4Cfg c : {Q4Cfg{32, false}, Q4Cfg{32, true}, Q4Cfg{64, false}, Q4Cfg{64, true},
                  Q4Cfg{128, false}, Q4Cfg{128, true}})
    for (int64_t N : {1, 7, 17})
      for (int64_t K : {1, 3, 31, 172, 255, 4097}) {
        auto w = make_weights(N, K, rng);
        if (c.zp)  // shift some rows so the asymmetric range matters
          for (int64_t k = 0; k < K; ++k) w[size_t(k)] += 0.7f;
        const auto p = pack_q4(w, N, K, c);
        std::vector<float> u(w.size());
        q4_unpack(p.data(), N, K, c.group, c.zp, u.data());
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k0 = 0; k0 < K; k0 += c.group) {
            const int64_t k1 = std::min(K, k0 + c.group);
            float lo = 0, hi = 0;
            for (int64_t k = k0; k < k1; ++k) {
              lo = std::min(lo, w[size_t(n * K + k)]);
              hi = std::max(hi, w[size_t(n * K + k)]);
            }
            if (!c.zp) {
              // The symmetric scale is searched (quant.h): never more squared error over the
              // group than the plain max|w| / 7 grid, which is among its candidates.
              const float s7 = f16_to_f32(f32_to_f16(std::max(-lo, hi) / 7.f));
              double got = 0, plain = 0;
              for (int64_t k = k0; k < k1; ++k) {
                const size_t i = size_t(n * K + k);
                const double q7 = s7 > 0 ? s7 * std::clamp(std::round(w[i] / s7), -7.f, 7.f) : 0.0;
                got += (double(w[i]) - u[i]) * (double(w[i]) - u[i]);
                plain += (double(w[i]) - q7) * (double(w[i]) - q7);
              }
              ASSERT_LE(got, plain * (1 + 1e-6) + 1e-12)
                  << cfg_name(c) << " N=" << N << " K=" << K << " n=" << n << " k0=" << k0;
              continue;
            }
            // Half a step of the stored (f16) scale; the ends of the range may be clamped by
            // up to 15 times the scale's f16 rounding.
            const float s = (hi - lo) / 15.f;
            const float sh = f16_to_f32(f32_to_f16(s));
            const double bound = sh / 2 + 16 * std::fabs(double(s) - sh) + 1e-6 * (hi - lo);
            for (int64_t k = k0; k < k1; ++k) {
              const size_t i = size_t(n * K + k);
              ASSERT_LE(std::fabs(double(w[i]) - u[i]), bound)
                  << cfg_name(c) << " N=" << N << " K=" << K << " n=" << n << " k=" << k;
            }
          }
      }
}

TEST(QuantFormat, UnpackRowsMatchesUnpack) {
  std::mt19937 rng(9);
  const int64_t N = 37, K = 172;
  const auto w = make_weights(N, K, rng);
  const std::vector<int32_t> rows = {36, 0, 17, 17, 5};
  std::vector<float> all(size_t(N * K)), got(rows.size() * size_t(K));
  const auto check_rows = [&](const char* what) {
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(got[i * size_t(K) + size_t(k)], all[size_t(rows[i] * K + k)])
            << what << " row " << rows[i] << " k " << k;
  };
  const auto p8 = pack_q8(w, N, K);
  q8_unpack(p8.data(), N, K, all.data());
  q8_unpack_rows(p8.data(), N, K, rows.data(), int64_t(rows.size()), got.data());
  check_rows("q8");
  const auto p4 = pack_q4(w, N, K, {64, true});
  q4_unpack(p4.data(), N, K, 64, true, all.data());
  q4_unpack_rows(p4.data(), N, K, 64, true, rows.data(), int64_t(rows.size()), got.data());
  check_rows("q4");
  const int32_t bad = int32_t(N);
  EXPECT_THROW(q8_unpack_rows(p8.data(), N, K, &bad, 1, got.data()), Error);
}

TEST(QuantFormat, RejectsBadArguments) {
  std::vector<float> w(64, 1.f);
  std::vector<uint8_t> p(1 << 16);
  EXPECT_THROW(q4_packed_bytes(4, 16, 16, false), Error);
  EXPECT_THROW(q4_pack(w.data(), 4, 16, 48, false, p.data()), Error);
  EXPECT_THROW(q8_packed_bytes(4, 0), Error);
  EXPECT_THROW(q8_packed_bytes(0, 4), Error);
  EXPECT_THROW(q8_packed_bytes(1, kQuantMaxK + 1), Error);
  {
    // Q4 scales are f16: a group needing a scale past 65504 is refused, not stored as inf.
    std::vector<float> big(64, 1.f);
    big[40] = 8.f * 70000.f;
    EXPECT_THROW(q4_pack(big.data(), 2, 32, 32, false, p.data()), Error);
    big[40] = 8.f * 65000.f;  // within range
    EXPECT_NO_THROW(q4_pack(big.data(), 2, 32, 32, false, p.data()));
    // A scale below f16's smallest subnormal stores 0: the group decodes to exact zeros.
    std::vector<float> tiny(32, 1e-9f), back(32, 1.f);
    q4_pack(tiny.data(), 1, 32, 32, false, p.data());
    q4_unpack(p.data(), 1, 32, 32, false, back.data());
    for (float v : back) EXPECT_EQ(v, 0.f);
  }
  w[5] = NAN;
  EXPECT_THROW(q8_pack(w.data(), 4, 16, p.data()), Error);
  ThreadPool pool(1);
  float y[4];
  EXPECT_THROW(matmul_q4(pool, w.data(), 1, 16, p.data(), 4, 16, false, nullptr, y, true), Error);
  EXPECT_THROW(matmul_q8(pool, w.data(), 1, 0, p.data(), 4, nullptr, y, true), Error);
}

// ---------------------------------------------------------------- activations

TEST_F(QuantKernels, ActivationQuantizationMatchesScalar) {
  std::mt19937 rng(3);
  for (int64_t K : {1, 3, 15, 16, 17, 31, 172, 255, 4097}) {
    const int64_t M = 5, ld = K + 5;
    auto x = random_vec(size_t(M * K), rng, -3.f, 3.f);
    for (int64_t k = 0; k < K; ++k) x[size_t(2 * K + k)] = 0.f;  // zero row -> scale 0
    // Exact ties (x * inv = n + 0.5) must round to even on every path.
    if (K >= 4) {
      x[size_t(K)] = 127.f;
      x[size_t(K + 1)] = 2.5f;
      x[size_t(K + 2)] = -3.5f;
    }
    std::vector<int8_t> q0(size_t(M * ld), 99), q1(size_t(M * ld), 99);
    std::vector<float> s0(static_cast<size_t>(M)), s1(static_cast<size_t>(M));
    ASSERT_TRUE(force_isa("scalar"));
    quantize_rows_i8(x.data(), M, K, ld, q0.data(), s0.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const float v = x[size_t(m * K + k)], r = float(q0[size_t(m * ld + k)]) * s0[size_t(m)];
        ASSERT_LE(std::fabs(v - r), s0[size_t(m)] / 2 * (1 + 1e-5f)) << "K=" << K;
      }
    if (K >= 4) {
      EXPECT_EQ(q0[size_t(ld + 1)], 2);   // 2.5 -> 2
      EXPECT_EQ(q0[size_t(ld + 2)], -4);  // -3.5 -> -4
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = K; k < ld; ++k) ASSERT_EQ(q0[size_t(m * ld + k)], 0);
    for (const std::string& isa : simd_levels()) {
      ASSERT_TRUE(force_isa(isa));
      std::fill(q1.begin(), q1.end(), int8_t(99));
      quantize_rows_i8(x.data(), M, K, ld, q1.data(), s1.data());
      ASSERT_EQ(q0, q1) << isa << " K=" << K;
      ASSERT_EQ(s0, s1) << isa << " K=" << K;
    }
  }
}

// ---------------------------------------------------------------- kernels vs reference

struct Case {
  int64_t M, K, N;
};

// Under qemu-user (tools/arm64-test.sh sets EDGEVL_QEMU_CPU) every SIMD instruction is a helper
// call and the double-precision oracle crawls: the full sweep took over 55 minutes. There the
// reduced sweep runs, which keeps every tail shape class (odd K, K past a block, N below and past
// a panel, M = 1 and past a row tile) at a tenth of the work.
bool emulated() {
  return std::getenv("EDGEVL_QEMU_CPU") != nullptr;
}

std::vector<Case> awkward_cases(bool full) {
  full = full && !emulated();
  std::vector<Case> cs;
  for (int64_t M : {1, 2, 3, 5, 17, 130})
    for (int64_t K : {1, 3, 31, 172, 255, 4097})
      for (int64_t N : {1, 7, 17, 33, 67}) {
        if (M * K * N > (full ? 40'000'000 : 4'000'000)) continue;
        if (!full && (N == 17 || M == 3)) continue;
        cs.push_back({M, K, N});
      }
  return cs;
}

// Runs one quantized matmul with the given kernel level.
template <class F>
std::vector<float> run(std::string_view isa, int64_t M, int64_t N, F&& f) {
  EXPECT_TRUE(force_isa(isa));
  std::vector<float> y(size_t(M * N), NAN);
  f(y.data());
  return y;
}

void check_against_oracle(const std::vector<float>& got, const std::vector<double>& ref,
                          const std::vector<double>& mag, const Case& c, const std::string& what) {
  const int64_t bad = first_bad(got, ref, mag);
  ASSERT_EQ(bad, -1) << what << " M=" << c.M << " K=" << c.K << " N=" << c.N << " at " << bad
                     << ": " << got[size_t(std::max<int64_t>(bad, 0))] << " vs "
                     << ref[size_t(std::max<int64_t>(bad, 0))];
}

// The scalar result against the float oracle, then every SIMD level: bit-identical to scalar
// for A8 (integer sums, same scaling order), within the oracle's bound for A16. The oracle is
// computed once per case: it does not depend on the level (and dominated the sanitized run).
template <class F>
void check_all_levels(const std::vector<std::string>& levels, const Case& c,
                      const std::vector<float>& x, const std::vector<float>& wdeq,
                      const float* bias, bool a8, const std::string& what, F&& call) {
  std::vector<double> ref, mag;
  oracle(a8 ? dequantized_activations(x, c.M, c.K) : x, c.M, c.K, wdeq, c.N, bias, &ref, &mag);
  const auto ys = run("scalar", c.M, c.N, call);
  check_against_oracle(ys, ref, mag, c, "scalar " + what);
  for (const std::string& isa : levels) {
    const auto yv = run(isa, c.M, c.N, call);
    if (a8) {
      const int64_t d = first_diff(yv, ys);
      ASSERT_EQ(d, -1) << isa << " " << what << " M=" << c.M << " K=" << c.K << " N=" << c.N
                       << " at " << d << ": " << yv[size_t(std::max<int64_t>(d, 0))] << " vs "
                       << ys[size_t(std::max<int64_t>(d, 0))];
    } else {
      check_against_oracle(yv, ref, mag, c, isa + " " + what);
    }
  }
}

TEST_F(QuantKernels, Q8MatchesReference) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  const auto levels = simd_levels();
  for (const Case& c : awkward_cases(true)) {
    const auto w = make_weights(c.N, c.K, rng);
    const auto x = random_vec(size_t(c.M * c.K), rng, -2.f, 2.f);
    const auto bias = random_vec(size_t(c.N), rng);
    const float* b = (c.K + c.N) % 2 ? bias.data() : nullptr;
    const auto p = pack_q8(w, c.N, c.K);
    std::vector<float> wdeq(w.size());
    q8_unpack(p.data(), c.N, c.K, wdeq.data());
    for (bool a8 : {true, false}) {
      const std::string what = std::string("q8 ") + (a8 ? "a8" : "a16");
      const auto call = [&](float* y) {
        matmul_q8(pool, x.data(), c.M, c.K, p.data(), c.N, b, y, a8);
      };
      check_all_levels(levels, c, x, wdeq, b, a8, what, call);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(QuantKernels, Q4MatchesReference) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const auto levels = simd_levels();
  for (Q4Cfg q : {Q4Cfg{32, false}, Q4Cfg{32, true}, Q4Cfg{64, false}, Q4Cfg{64, true},
                  Q4Cfg{128, false}, Q4Cfg{128, true}})
    for (const Case& c : awkward_cases(q.group == 32)) {
      auto w = make_weights(c.N, c.K, rng);
      if (q.zp)
        for (size_t i = 0; i < w.size(); i += 3) w[i] = std::fabs(w[i]);  // skewed groups
      const auto x = random_vec(size_t(c.M * c.K), rng, -2.f, 2.f);
      const auto bias = random_vec(size_t(c.N), rng);
      const float* b = (c.K + c.N) % 2 ? bias.data() : nullptr;
      const auto p = pack_q4(w, c.N, c.K, q);
      std::vector<float> wdeq(w.size());
      q4_unpack(p.data(), c.N, c.K, q.group, q.zp, wdeq.data());
      for (bool a8 : {true, false}) {
        const std::string what = "q4 " + cfg_name(q) + (a8 ? " a8" : " a16");
        const auto call = [&](float* y) {
          // fast_prefill = false: the W4A8 kernels (the prefill route has its own test).
          matmul_q4(pool, x.data(), c.M, c.K, p.data(), c.N, q.group, q.zp, b, y, a8, false);
        };
        check_all_levels(levels, c, x, wdeq, b, a8, what, call);
        if (HasFatalFailure()) return;
      }
    }
}

// The A8 register tiles at every row remainder (M = 1..40: the 12- and 3-row tiles of the
// VNNI / AVX2 kernels, the 24-row prefill threshold) and at prefill chunk sizes (511, 512, 513
// rows), K not a multiple of 4 / 64 / G, N not a multiple of 16 / 32, with and without bias,
// every Q4 group size with and without zero points: every SIMD level bit-identical to scalar.
TEST_F(QuantKernels, A8RowTilesMatchReference) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const auto levels = simd_levels();
  std::vector<Case> cases;
  const int64_t ks[] = {100, 131, 172, 257}, ns[] = {17, 40, 50, 7};
  for (int64_t M = 1; M <= 40; ++M) cases.push_back({M, ks[M % 4], ns[(M / 4) % 4]});
  for (Case c : {Case{511, 200, 40}, Case{512, 896, 48}, Case{513, 131, 33}}) cases.push_back(c);
  for (const Case& c : cases) {
    auto w = make_weights(c.N, c.K, rng);
    const auto x = random_vec(size_t(c.M * c.K), rng, -2.f, 2.f);
    const auto bias = random_vec(size_t(c.N), rng);
    const float* b = c.M % 2 ? bias.data() : nullptr;
    const auto p8 = pack_q8(w, c.N, c.K);
    std::vector<float> wdeq(w.size());
    q8_unpack(p8.data(), c.N, c.K, wdeq.data());
    check_all_levels(levels, c, x, wdeq, b, true, "q8 a8", [&](float* y) {
      matmul_q8(pool, x.data(), c.M, c.K, p8.data(), c.N, b, y, true);
    });
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < w.size(); i += 3) w[i] = std::fabs(w[i]);  // skewed groups
    for (Q4Cfg q : {Q4Cfg{32, false}, Q4Cfg{32, true}, Q4Cfg{64, false}, Q4Cfg{64, true},
                    Q4Cfg{128, false}, Q4Cfg{128, true}}) {
      const auto p4 = pack_q4(w, c.N, c.K, q);
      q4_unpack(p4.data(), c.N, c.K, q.group, q.zp, wdeq.data());
      check_all_levels(levels, c, x, wdeq, b, true, "q4 a8 " + cfg_name(q), [&](float* y) {
        matmul_q4(pool, x.data(), c.M, c.K, p4.data(), c.N, q.group, q.zp, b, y, true, false);
      });
      if (HasFatalFailure()) return;
    }
  }
}

// The largest integer sums the A8 kernels can meet: every weight at its row's maximum (Q4
// codes 15 or 0/1, Q8 +-127) against activations at +-127, so that the int16 lanes of the AVX2
// kernels (4 Q4 blocks, the W4A8 GEMV's chunks of 32 k; one Q8 vpmaddubsw pair) reach their
// bounds, with equal and opposite signs. Decode (M = 1, the GEMV's 4-panel steps and its one-panel
// tail: N = 80) and a decode batch (M = 4, the 4-row Q8 tiles), every group size, with and
// without zero points: every level bit-identical to scalar.
TEST_F(QuantKernels, A8ExtremeSumsMatchReference) {
  ThreadPool pool(2);
  const auto levels = simd_levels();
  for (int pattern = 0; pattern < 3; ++pattern)
    for (int64_t M : {1, 4})
      for (int64_t K : {256, 896}) {
        const Case c{M, K, 80};
        std::vector<float> x(size_t(M * K)), w(size_t(c.N * K));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k)
            x[size_t(m * K + k)] = pattern == 1 || (pattern == 2 && (m + k / 8) % 2) ? -1.f : 1.f;
        for (int64_t n = 0; n < c.N; ++n)
          for (int64_t k = 0; k < K; ++k)
            w[size_t(n * K + k)] = pattern == 2 && n % 2 ? -0.5f : 0.5f;
        const auto p8 = pack_q8(w, c.N, K);
        std::vector<float> wdeq(w.size());
        q8_unpack(p8.data(), c.N, K, wdeq.data());
        check_all_levels(levels, c, x, wdeq, nullptr, true, "q8 a8 extreme", [&](float* y) {
          matmul_q8(pool, x.data(), M, K, p8.data(), c.N, nullptr, y, true);
        });
        if (HasFatalFailure()) return;
        for (Q4Cfg q : {Q4Cfg{32, false}, Q4Cfg{32, true}, Q4Cfg{64, false}, Q4Cfg{64, true},
                        Q4Cfg{128, false}, Q4Cfg{128, true}}) {
          const auto p4 = pack_q4(w, c.N, K, q);
          q4_unpack(p4.data(), c.N, K, q.group, q.zp, wdeq.data());
          check_all_levels(levels, c, x, wdeq, nullptr, true, "q4 a8 extreme " + cfg_name(q),
                           [&](float* y) {
                             matmul_q4(pool, x.data(), M, K, p4.data(), c.N, q.group, q.zp, nullptr,
                                       y, true, false);
                           });
          if (HasFatalFailure()) return;
        }
      }
}

// The exact comparison must catch a single +-1 in one integer code: change the code of the
// last (row, k) -- the tail element of the padded layout -- and the SIMD result of the mutated
// weights must differ from the reference on the original ones.
// The rotation inside the activation quantization (matmul_q8 / matmul_q4 `rotation`) equals
// rotating all of x first, bit for bit, on every level: rows across the 8-row chunks and the
// pool's tasks, K with a tail block (40 = 32 + 8) and K below one block (24), both thread counts.
TEST_F(QuantKernels, RotationInQuantizationEqualsRotatedInput) {
  std::mt19937 rng(9);
  for (const std::string& isa : test::all_isa_levels()) {
    if (!force_isa(isa)) continue;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int64_t M : {1, 9, 40})
        for (int64_t K : {24, 40, 96}) {
          const int64_t N = 20;
          const int block = hadamard_block_for(K);
          const auto w = make_weights(N, K, rng);
          auto x = random_vec(size_t(M * K), rng, -2.f, 2.f);
          x[size_t(K / 2)] = 40.f;  // an outlier channel
          std::vector<float> xr = x;
          hadamard_rows(xr.data(), M, K, block);
          const auto p8 = pack_q8(w, N, K);
          const auto p4 = pack_q4(w, N, K, {32, false});
          std::vector<float> want(size_t(M * N)), got(size_t(M * N));
          matmul_q8(pool, xr.data(), M, K, p8.data(), N, nullptr, want.data(), true);
          matmul_q8(pool, x.data(), M, K, p8.data(), N, nullptr, got.data(), true, false, block);
          ASSERT_EQ(want, got) << isa << " Q8 M=" << M << " K=" << K << " threads=" << threads;
          matmul_q4(pool, xr.data(), M, K, p4.data(), N, 32, false, nullptr, want.data(), true);
          matmul_q4(pool, x.data(), M, K, p4.data(), N, 32, false, nullptr, got.data(), true, true,
                    false, block);
          ASSERT_EQ(want, got) << isa << " Q4 M=" << M << " K=" << K << " threads=" << threads;
        }
    }
  }
  ThreadPool pool(1);
  std::vector<float> x(32, 1.f), y(16);
  const auto p8 = pack_q8(std::vector<float>(16 * 32, 0.5f), 16, 32);
  EXPECT_THROW(matmul_q8(pool, x.data(), 1, 32, p8.data(), 16, nullptr, y.data(), false, false, 32),
               Error);
}

TEST_F(QuantKernels, ExactCompareCatchesOneCodeOff) {
  std::mt19937 rng(6);
  ThreadPool pool(1);
  const int64_t M = 3, K = 172, N = 33;
  const auto w = make_weights(N, K, rng);
  const auto x = random_vec(size_t(M * K), rng);
  for (const std::string& isa : simd_levels()) {
    {
      auto p = pack_q8(w, N, K);
      const auto call = [&](float* y) {
        matmul_q8(pool, x.data(), M, K, p.data(), N, nullptr, y, true);
      };
      const auto ys = run("scalar", M, N, call);
      // Row N-1 = 32 is row 0 of panel 2; k = 171 is byte 3 of block 42.
      uint8_t& byte = p[2 * q8_panel_bytes(K) + 42 * 64 + 0 * 4 + 3];
      byte = uint8_t(byte == 127 ? 126 : byte + 1);
      EXPECT_NE(first_diff(run(isa, M, N, call), ys), -1) << isa << " q8";
    }
    {
      const Q4Cfg q{32, true};
      auto p = pack_q4(w, N, K, q);
      const auto call = [&](float* y) {
        matmul_q4(pool, x.data(), M, K, p.data(), N, q.group, q.zp, nullptr, y, true);
      };
      const auto ys = run("scalar", M, N, call);
      // k = 171: group 5, kg = 11 -> block 1, element 3 -> byte 3, low nibble. (Its high
      // nibble is k = 175, padding: changing that must not matter, checked too.)
      const layout::Q4Layout L = layout::q4_layout(q4_padded_k(K, 32), 32, true);
      uint8_t& byte = p[2 * q4_panel_bytes(K, 32, true) + size_t(L.codes(5)) + 1 * 64 + 0 * 4 + 3];
      byte = uint8_t(byte ^ 0x10);
      EXPECT_EQ(first_diff(run(isa, M, N, call), ys), -1) << isa << " q4 padding";
      byte = uint8_t(byte ^ 0x01);
      EXPECT_NE(first_diff(run(isa, M, N, call), ys), -1) << isa << " q4";
    }
  }
}

// Results must not depend on the thread count (each output is computed by one thread, always
// in the same order).
TEST_F(QuantKernels, ThreadCountInvariant) {
  std::mt19937 rng(7);
  const int64_t M = 37, K = 600, N = 1000;  // M >= the W4A8 prefill threshold
  const auto w = make_weights(N, K, rng);
  const auto x = random_vec(size_t(M * K), rng);
  const auto p8 = pack_q8(w, N, K);
  const auto p4 = pack_q4(w, N, K, {64, true});
  ThreadPool one(1), three(3);
  for (bool a8 : {true, false}) {
    std::vector<float> y1(size_t(M * N)), y3(size_t(M * N));
    matmul_q8(one, x.data(), M, K, p8.data(), N, nullptr, y1.data(), a8);
    matmul_q8(three, x.data(), M, K, p8.data(), N, nullptr, y3.data(), a8);
    EXPECT_EQ(first_diff(y1, y3), -1) << "q8 a8=" << a8;
    for (bool fast : {false, true}) {
      matmul_q4(one, x.data(), M, K, p4.data(), N, 64, true, nullptr, y1.data(), a8, fast);
      matmul_q4(three, x.data(), M, K, p4.data(), N, 64, true, nullptr, y3.data(), a8, fast);
      EXPECT_EQ(first_diff(y1, y3), -1) << "q4 a8=" << a8 << " fast_prefill=" << fast;
    }
  }
}

// ---------------------------------------------------------------- accuracy vs float

// Relative Frobenius error ||y_q - y|| / ||y|| against the float matmul of the original
// weights, on Gaussian weights and activations (Qwen2 MLP-like shape, smaller N). Expected
// values for uniform rounding noise: Q8 weights ~0.9% (max|w| of a 896-row ~3.3 sigma, step
// /sqrt(12)), int8 activations add about the same; 4-bit groups of 32..128 are ~6-10%.
// Bounds are ~1.5x the values measured when written.
TEST_F(QuantKernels, QuantizedVsFloat) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t M = 8, K = 896, N = 256;
  std::vector<float> w(size_t(N * K)), x(size_t(M * K));
  for (auto& v : w) v = nd(rng) * 0.02f;
  for (auto& v : x) v = nd(rng);
  std::vector<double> ref, mag;
  oracle(x, M, K, w, N, nullptr, &ref, &mag);
  double ref_norm = 0;
  for (double v : ref) ref_norm += v * v;
  const auto rel_err = [&](const std::vector<float>& y) {
    double e = 0;
    for (size_t i = 0; i < y.size(); ++i) e += (y[i] - ref[i]) * (y[i] - ref[i]);
    return std::sqrt(e / ref_norm);
  };
  ThreadPool pool(2);
  std::vector<float> y(size_t(M * N));
  const auto p8 = pack_q8(w, N, K);
  struct Expect {
    const char* name;
    double bound;
    double got;
  };
  std::vector<Expect> results;
  for (bool a8 : {false, true}) {
    matmul_q8(pool, x.data(), M, K, p8.data(), N, nullptr, y.data(), a8);
    results.push_back({a8 ? "w8a8" : "w8a16", a8 ? 0.02 : 0.012, rel_err(y)});
  }
  for (int g : {32, 64, 128})
    for (bool zp : {false, true}) {
      const auto p4 = pack_q4(w, N, K, {g, zp});
      for (bool a8 : {false, true}) {
        matmul_q4(pool, x.data(), M, K, p4.data(), N, g, zp, nullptr, y.data(), a8);
        const double bound = g == 32 ? 0.12 : g == 64 ? 0.14 : 0.16;
        results.push_back({a8 ? "w4a8" : "w4a16", bound, rel_err(y)});
        RecordProperty(
            std::string(results.back().name) + "_g" + std::to_string(g) + (zp ? "_zp" : ""),
            std::to_string(results.back().got));
      }
    }
  for (const Expect& r : results) {
    EXPECT_LE(r.got, r.bound) << r.name;
    EXPECT_GT(r.got, 1e-4) << r.name << ": no quantization error at all?";
  }
  for (const Expect& r : results)
    std::printf("  %-6s rel err %.4f (bound %.3f)\n", r.name, r.got, r.bound);
}

// AMX tiles cover 16 rows x 64 k x 16 columns: shapes around those edges (row / column / k
// tails, K not a multiple of 4 or of 64, a 32-k group), through the forced AMX path (every M)
// and "best" (AMX from its row threshold on), bit for bit against the scalar reference.
TEST_F(QuantKernels, AmxMatchesReference) {
  if (!force_isa("amx-all-rows")) GTEST_SKIP() << "AMX-INT8 not available on this CPU / OS";
  std::mt19937 rng(9);
  ThreadPool pool(2);
  int64_t n_cases = 0;
  for (int64_t M : {1, 15, 16, 17, 33, 70, 129})
    for (int64_t K : {64, 100, 172, 896, 1000})
      for (int64_t N : {1, 16, 17, 40, 100}) {
        auto w = make_weights(N, K, rng);
        const auto x = random_vec(size_t(M * K), rng, -2.f, 2.f);
        const auto bias = random_vec(size_t(N), rng);
        const float* b = (M + K + N) % 2 ? bias.data() : nullptr;
        // Q4 under "best" without its prefill route (Q4RequantPrefillMatchesOracle checks that).
        const auto expect_same = [&](const std::string& what, const auto& call) {
          const auto ys = run("scalar", M, N, call);
          for (const char* isa : {"amx-all-rows", "best"}) {
            const auto yv = run(isa, M, N, call);
            const int64_t d = first_diff(yv, ys);
            ASSERT_EQ(d, -1) << isa << " " << what << " M=" << M << " K=" << K << " N=" << N
                             << " at " << d << ": " << yv[size_t(std::max<int64_t>(d, 0))] << " vs "
                             << ys[size_t(std::max<int64_t>(d, 0))];
          }
          ++n_cases;
        };
        const auto p8 = pack_q8(w, N, K);
        expect_same("q8",
                    [&](float* y) { matmul_q8(pool, x.data(), M, K, p8.data(), N, b, y, true); });
        for (size_t i = 0; i < w.size(); i += 3) w[i] = std::fabs(w[i]);  // skewed groups
        for (Q4Cfg q : {Q4Cfg{32, false}, Q4Cfg{32, true}, Q4Cfg{64, false}, Q4Cfg{64, true},
                        Q4Cfg{128, false}, Q4Cfg{128, true}}) {
          const auto p4 = pack_q4(w, N, K, q);
          expect_same("q4 " + cfg_name(q), [&](float* y) {
            matmul_q4(pool, x.data(), M, K, p4.data(), N, q.group, q.zp, b, y, true, false);
          });
        }
      }
  EXPECT_STREQ(quant_kernel_isa(), "amx+avx512vnni");
  std::printf("  %lld AMX cases bit-identical to the scalar reference\n", (long long)n_cases);
}

// The W4A8 prefill route (Q4 requantized to int8 per call) against a scalar model of its
// definition (quant.h; requant_q4_panel in quant_amx.cpp, requant_q4_panel_v in quant_simd.h),
// bit for bit: per row S = max_g s * R
// / 127 (R = 8, or 15 with zero points), q = round_even((c - z) * (s_g * (1 / S))), then the
// W8A8 arithmetic y = float(sum xq q) * (xs * S) (+ bias). c - z is recovered from q4_unpack.
struct PrefillLevel {
  std::string isa;
  int64_t min_rows;
};

// Every case's oracle is computed once and each level is checked against it (at the row counts
// its route takes: M >= its threshold).
void check_q4_prefill(const std::vector<PrefillLevel>& levels) {
  std::set<int64_t> rows = {70, 129, 513};
  for (const PrefillLevel& l : levels) rows.insert({l.min_rows, l.min_rows + 1});
  std::mt19937 rng(10);
  ThreadPool pool(2);
  std::vector<int64_t> n_cases(levels.size(), 0);
  for (int64_t M : rows)
    for (int64_t K : {64, 100, 172, 896, 1000})
      for (int64_t N : {1, 16, 17, 40, 100}) {
        auto w = make_weights(N, K, rng);
        for (size_t i = 0; i < w.size(); i += 3) w[i] = std::fabs(w[i]);  // skewed groups
        const auto x = random_vec(size_t(M * K), rng, -2.f, 2.f);
        const auto bias = random_vec(size_t(N), rng);
        const float* b = (M + K + N) % 2 ? bias.data() : nullptr;
        for (Q4Cfg q : {Q4Cfg{32, false}, Q4Cfg{32, true}, Q4Cfg{64, false}, Q4Cfg{128, true}}) {
          const auto p4 = pack_q4(w, N, K, q);
          std::vector<float> wdeq(w.size());
          q4_unpack(p4.data(), N, K, q.group, q.zp, wdeq.data());
          const int64_t Kp = q4_padded_k(K, q.group), ng = Kp / q.group;
          const layout::Q4Layout L = layout::q4_layout(Kp, q.group, q.zp);
          const auto scale = [&](int64_t n, int64_t g) {
            uint16_t h;
            std::memcpy(&h,
                        p4.data() + (n / 16) * q4_panel_bytes(K, q.group, q.zp) + L.scales(g) +
                            (n % 16) * 2,
                        2);
            return f16_to_f32(h);
          };
          std::vector<int8_t> xq(size_t(M * K));
          std::vector<float> xs(static_cast<size_t>(M));
          quantize_rows_i8(x.data(), M, K, K, xq.data(), xs.data());
          std::vector<float> want(size_t(M * N));
          for (int64_t n = 0; n < N; ++n) {
            float smax = 0;
            for (int64_t g = 0; g < ng; ++g) smax = std::max(smax, std::fabs(scale(n, g)));
            const float S = smax * ((q.zp ? 15.f : 8.f) / 127.f);
            const float inv_s = S > 0 ? 1.f / S : 0.f;
            std::vector<int32_t> qw(static_cast<size_t>(K));
            for (int64_t k = 0; k < K; ++k) {
              const float s = scale(n, k / q.group);
              const float cz = s != 0 ? std::nearbyint(wdeq[size_t(n * K + k)] / s) : 0.f;
              qw[size_t(k)] = int32_t(std::nearbyint(cz * (s * inv_s)));
            }
            for (int64_t m = 0; m < M; ++m) {
              int32_t acc = 0;
              for (int64_t k = 0; k < K; ++k) acc += int32_t(xq[size_t(m * K + k)]) * qw[size_t(k)];
              const float sc = xs[size_t(m)] * S;
              float v = float(acc) * sc;
              if (b) v = v + b[n];
              want[size_t(m * N + n)] = v;
            }
          }
          for (size_t li = 0; li < levels.size(); ++li) {
            if (M < levels[li].min_rows) continue;
            ASSERT_TRUE(force_isa(levels[li].isa));
            std::vector<float> y(size_t(M * N), NAN);
            matmul_q4(pool, x.data(), M, K, p4.data(), N, q.group, q.zp, b, y.data(), true);
            const int64_t d = first_diff(y, want);
            ASSERT_EQ(d, -1) << levels[li].isa << " " << cfg_name(q) << " M=" << M << " K=" << K
                             << " N=" << N << " at " << d << ": "
                             << y[size_t(std::max<int64_t>(d, 0))] << " vs "
                             << want[size_t(std::max<int64_t>(d, 0))];
            ++n_cases[li];
          }
        }
      }
  for (size_t li = 0; li < levels.size(); ++li) {
    ASSERT_TRUE(force_isa(levels[li].isa));
    std::printf("  %s: %lld W4A8 prefill cases bit-identical to the requantization model (%s)\n",
                levels[li].isa.c_str(), (long long)n_cases[li], quant_q4_path().c_str());
  }
}

// Every level with such a route is checked: the forced SIMD levels, and "best" when it is a
// path none of them takes (AMX).
TEST_F(QuantKernels, Q4RequantPrefillMatchesOracle) {
  std::vector<PrefillLevel> levels;
  std::set<std::string> paths;
  for (const std::string& l : simd_levels())
    if (force_isa(l) && quant_q4_prefill_min_rows() > 0) {
      levels.push_back({l, quant_q4_prefill_min_rows()});
      paths.insert(quant_q4_path());
    }
  force_isa("best");
  if (quant_q4_prefill_min_rows() > 0 && !paths.count(quant_q4_path()))
    levels.push_back({"best", quant_q4_prefill_min_rows()});
  if (levels.empty()) GTEST_SKIP() << "no W4A8 prefill route at this CPU's levels";
  check_q4_prefill(levels);
  force_isa("best");
}

TEST(QuantKernelsInfo, IsaSelection) {
  EXPECT_TRUE(force_isa("scalar"));
  EXPECT_STREQ(quant_kernel_isa(), "scalar");
  EXPECT_FALSE(force_isa("avx9000"));
  EXPECT_TRUE(force_isa("best"));
  std::printf("  quant kernels: %s; SIMD levels tested:", quant_kernel_isa());
  for (const std::string& l : simd_levels()) std::printf(" %s", l.c_str());
  std::printf("\n");
}

}  // namespace
}  // namespace edgevl::cpu
