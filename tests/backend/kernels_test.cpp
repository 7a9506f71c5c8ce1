// Every CPU kernel against (a) a double-precision oracle written here and (b) the scalar
// reference, for every ISA level this machine can run, on awkward shapes.
//
// Tolerances (why): float accumulation of K products has error ~ sqrt(K) * 6e-8 * sum|x*w| in
// practice and K * 6e-8 * sum|x*w| at worst; we allow 1e-5 * sum|x*w| (+1e-6 absolute), which
// still fails if a single product of a K=4097 dot is dropped or doubled (checked below).
// Transcendentals (exp/erf polynomials) are accurate to a few 1e-7 relative; we allow 2e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "support/isa_params.h"
#include "support/test_util.h"

namespace edgevl::cpu {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Weights in a given type, plus their exact float values for the oracle.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
Weights make_weights(size_t n, DType t, std::mt19937& rng) {
  Weights w;
  w.values = random_vec(n, rng);
  // A few larger entries so F16/BF16 exponents vary.
  for (size_t i = 0; i < n; i += 37) w.values[i] *= 8.f;
  w.bytes.resize(n * dtype_size(t));  // exact size, so a tail over-read shows under ASan
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::F32) {
      std::memcpy(w.bytes.data() + 4 * i, &w.values[i], 4);
    } else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(w.values[i]) : f32_to_bf16(w.values[i]);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      w.values[i] = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return w;
}

// Oracle matmul in double; also returns sum|x*w| per output for the error bound.
void oracle_matmul(const std::vector<float>& x, int64_t M, int64_t K, const std::vector<float>& w,
                   int64_t N, const float* bias, std::vector<double>* y, std::vector<double>* mag) {
  y->assign(static_cast<size_t>(M * N), 0.0);
  mag->assign(static_cast<size_t>(M * N), 0.0);
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

// Index of the first element out of tolerance, or -1.
int64_t first_bad(const std::vector<float>& got, const std::vector<double>& ref,
                  const std::vector<double>& mag) {
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - ref[i]) <= 1e-5 * mag[i] + 1e-6)) return int64_t(i);
  return -1;
}

// x rounded to bf16 like the AMX-BF16 GEMM does (its numerics: bf16 x bf16, f32 accumulation).
std::vector<float> bf16_rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return r;
}

class IsaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!force_isa(GetParam())) GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  void TearDown() override { force_isa("best"); }
  // Runs `f` with the scalar reference selected, then switches back to this test's ISA.
  template <class F>
  void with_scalar(F&& f) {
    ASSERT_TRUE(force_isa("scalar"));
    f();
    ASSERT_TRUE(force_isa(GetParam()));
  }
  // The activations this level's matmul multiplies with weights of type t: rounded to bf16 for
  // BF16 row weights where it runs them on its bf16 GEMM (M rows at or above its threshold; the
  // Arm fp16 level's GEMM takes the vision tower's bf16p panels only).
  std::vector<float> effective_x(const std::vector<float>& x, int64_t M, DType t) const {
    return t == DType::BF16 && bf16_blocks_supported(M, /*panel_weights=*/false) ? bf16_rounded(x)
                                                                                 : x;
  }
};

TEST_P(IsaTest, MatmulAwkwardShapes) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t M : {1, 2, 3, 5, 17, 130})
      for (int64_t K : {1, 3, 17, 63, 65, 255, 4097})
        for (int64_t N : {1, 7, 67}) {
          if (M * K * N > 40'000'000) continue;
          const Weights w = make_weights(static_cast<size_t>(N * K), t, rng);
          const auto x = random_vec(static_cast<size_t>(M * K), rng);
          const auto bias = random_vec(static_cast<size_t>(N), rng);
          const float* b = (N % 2 == 1 && K % 2 == 1) ? bias.data() : nullptr;
          std::vector<float> y(static_cast<size_t>(M * N), NAN),
              ys(static_cast<size_t>(M * N), NAN);
          matmul(pool, x.data(), M, K, w.bytes.data(), t, N, b, y.data());
          with_scalar([&] { matmul(pool, x.data(), M, K, w.bytes.data(), t, N, b, ys.data()); });
          std::vector<double> ref, mag, ref_s, mag_s;
          oracle_matmul(effective_x(x, M, t), M, K, w.values, N, b, &ref, &mag);
          oracle_matmul(x, M, K, w.values, N, b, &ref_s, &mag_s);
          const int64_t bad = first_bad(y, ref, mag), bad_s = first_bad(ys, ref_s, mag_s);
          ASSERT_EQ(bad, -1) << dtype_name(t) << " M=" << M << " K=" << K << " N=" << N << " at "
                             << bad << ": " << y[size_t(std::max<int64_t>(bad, 0))] << " vs "
                             << ref[size_t(std::max<int64_t>(bad, 0))];
          ASSERT_EQ(bad_s, -1) << "scalar " << dtype_name(t) << " M=" << M << " K=" << K;
        }
}

// Shapes that cross the GEMM blocking: two K blocks (K > 1024), several weight panels per
// thread chunk, M past the row-block size (192 rows for avx512, 96 for avx2) with a ragged end;
// 1 and 3 threads.
TEST_P(IsaTest, MatmulBlockingBoundaries) {
  std::mt19937 rng(2);
  const int64_t M = 200, K = 1100, N = 301;
  for (DType t : {DType::F16, DType::F32, DType::BF16}) {
    const Weights w = make_weights(static_cast<size_t>(N * K), t, rng);
    const auto x = random_vec(static_cast<size_t>(M * K), rng);
    const auto bias = random_vec(static_cast<size_t>(N), rng);
    std::vector<double> ref, mag;
    oracle_matmul(effective_x(x, M, t), M, K, w.values, N, bias.data(), &ref, &mag);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<size_t>(M * N), NAN);
      matmul(pool, x.data(), M, K, w.bytes.data(), t, N, bias.data(), y.data());
      ASSERT_EQ(first_bad(y, ref, mag), -1) << dtype_name(t) << " threads=" << threads;
    }
  }
}

// The bf16 GEMM levels (AMX-BF16 tiles, AVX512-BF16 VDPBF16PS), forced for every M.
class Bf16Level : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!force_isa(GetParam())) GTEST_SKIP() << GetParam() << " not available on this CPU / OS";
  }
  void TearDown() override { force_isa("best"); }
};

// Tile edges (AMX: 16 rows, 32 k, 16 columns; VDPBF16PS: 8 rows, 48 columns) for the bf16 GEMM
// of every M, and "best" (from its row threshold on): against the oracle on bf16-rounded x.
TEST_P(Bf16Level, MatmulMatchesRoundedOracle) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (int64_t M : {1, 15, 16, 17, 33, 70, 129})
    for (int64_t K : {1, 31, 32, 33, 64, 100, 1040})
      for (int64_t N : {1, 16, 17, 40, 64, 100}) {
        const Weights w = make_weights(static_cast<size_t>(N * K), DType::BF16, rng);
        const auto x = random_vec(static_cast<size_t>(M * K), rng);
        const auto bias = random_vec(static_cast<size_t>(N), rng);
        const float* b = (M + K + N) % 2 ? bias.data() : nullptr;
        std::vector<double> ref, mag;
        oracle_matmul(bf16_rounded(x), M, K, w.values, N, b, &ref, &mag);
        for (const char* isa : {GetParam(), "best"}) {
          ASSERT_TRUE(force_isa(isa));
          std::vector<float> y(static_cast<size_t>(M * N), NAN);
          matmul(pool, x.data(), M, K, w.bytes.data(), DType::BF16, N, b, y.data());
          if (std::string(isa) == "best" && M < 8) continue;  // the f32 path (threshold 8)
          const int64_t bad = first_bad(y, ref, mag);
          ASSERT_EQ(bad, -1) << isa << " M=" << M << " K=" << K << " N=" << N << " at " << bad
                             << ": " << y[size_t(std::max<int64_t>(bad, 0))] << " vs "
                             << ref[size_t(std::max<int64_t>(bad, 0))];
        }
      }
  force_isa("best");
}

#if defined(__x86_64__)
// The AMX activation rounding writes 16 x 32 tile blocks: every value must be f32_to_bf16's,
// bit for bit (ties, NaN, infinities, denormals), at its block position, with the rows past
// M of the last 16-row group and the k past K zero.
TEST(AmxBf16, ActivationBlocksMatchScalarRounding) {
  if (!force_isa("amx-all-rows")) GTEST_SKIP() << "AMX-BF16 not available on this CPU / OS";
  force_isa("best");
  std::mt19937 rng(5);
  const float specials[] = {NAN,        -NAN,   INFINITY,
                            -INFINITY,  1e-40f, -3e-39f,
                            0.f,        -0.f,   1.00390625f /* tie: 1 + 2^-8 */,
                            1.01171875f /* tie, odd */};
  for (int64_t M : {1, 15, 16, 17, 40})
    for (int64_t K : {1, 16, 31, 32, 33, 64, 100}) {
      const int64_t ld = (K + 31) / 32 * 32, Mp = (M + 15) / 16 * 16;
      auto x = random_vec(static_cast<size_t>(M * K), rng);
      for (size_t i = 0; i < x.size(); i += 7) x[i] = specials[(i / 7) % std::size(specials)];
      std::vector<uint16_t> xb(static_cast<size_t>(Mp * ld), 0xdead);
      cpu::amx_kernels(true).to_bf16_rows(x.data(), M, K, ld, xb.data());
      for (int64_t m = 0; m < Mp; ++m)
        for (int64_t k = 0; k < ld; ++k) {
          const uint16_t want = m < M && k < K ? f32_to_bf16(x[size_t(m * K + k)]) : uint16_t(0);
          const uint16_t got =
              xb[size_t((m / 16) * 16 * ld + (k / 32) * 512 + (m % 16) * 32 + k % 32)];
          ASSERT_EQ(got, want) << "M=" << M << " K=" << K << " at m=" << m << " k=" << k;
        }
    }
}
#endif

// The F16 opt-in: matmul_bf16_compute runs F16 weights on the bf16 GEMM with w and x rounded
// to bf16 (oracle on both rounded), while matmul() on the same F16 weights keeps its f32
// numerics.
TEST_P(Bf16Level, F16OptInRoundsWeightsOnlyWhenAsked) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  for (int64_t M : {8, 17, 70})
    for (int64_t K : {33, 100, 1000})
      for (int64_t N : {1, 17, 100}) {
        const Weights w = make_weights(static_cast<size_t>(N * K), DType::F16, rng);
        const auto x = random_vec(static_cast<size_t>(M * K), rng);
        const auto bias = random_vec(static_cast<size_t>(N), rng);
        std::vector<double> ref, mag, ref_f, mag_f;
        oracle_matmul(bf16_rounded(x), M, K, bf16_rounded(w.values), N, bias.data(), &ref, &mag);
        oracle_matmul(x, M, K, w.values, N, bias.data(), &ref_f, &mag_f);
        for (const char* isa : {GetParam(), "best"}) {
          ASSERT_TRUE(force_isa(isa));
          std::vector<float> y(static_cast<size_t>(M * N), NAN), yf(y.size(), NAN);
          matmul_bf16_compute(pool, x.data(), M, K, w.bytes.data(), DType::F16, N, bias.data(),
                              y.data());
          matmul(pool, x.data(), M, K, w.bytes.data(), DType::F16, N, bias.data(), yf.data());
          ASSERT_EQ(first_bad(y, ref, mag), -1) << isa << " M=" << M << " K=" << K << " N=" << N;
          ASSERT_EQ(first_bad(yf, ref_f, mag_f), -1) << isa << " M=" << M << " K=" << K;
          // Rounding the weights must show: the opt-in result differs from matmul()'s.
          if (K >= 100) {
            EXPECT_NE(first_bad(y, ref_f, mag_f), -1) << "M=" << M << " K=" << K;
          }
        }
      }
  force_isa("best");
}

// F16 linear layers on AMX-BF16 (matmul_f16_weights): the four-product split must stay within
// the f32 oracle's bound (1e-5 * sum|x w|) on tile-edge shapes, K tails and ragged rows; a
// single bf16 rounding of x (what dropping x_lo would give) does not (checked on one shape).
TEST(AmxBf16, F16WeightsSplitStaysNearF32) {
  if (!force_isa("amx-all-rows")) GTEST_SKIP() << "AMX-BF16 not available on this CPU / OS";
  std::mt19937 rng(5);
  int64_t n_cases = 0;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (int64_t M : {1, 32, 33, 70, 130})
      for (int64_t K : {1, 3, 17, 63, 65, 255, 1000})
        for (int64_t N : {1, 7, 40, 67}) {
          const Weights w = make_weights(static_cast<size_t>(N * K), DType::F16, rng);
          const auto x = random_vec(static_cast<size_t>(M * K), rng);
          const auto bias = random_vec(static_cast<size_t>(N), rng);
          const float* b = (K + N) % 2 ? bias.data() : nullptr;
          std::vector<double> ref, mag;
          oracle_matmul(x, M, K, w.values, N, b, &ref, &mag);
          std::vector<float> y(static_cast<size_t>(M * N), NAN);
          matmul_f16_weights(pool, x.data(), M, K,
                             reinterpret_cast<const uint16_t*>(w.bytes.data()), N, b, y.data());
          const int64_t bad = first_bad(y, ref, mag);
          ASSERT_EQ(bad, -1) << "M=" << M << " K=" << K << " N=" << N << " at " << bad << ": "
                             << y[size_t(std::max<int64_t>(bad, 0))] << " vs "
                             << ref[size_t(std::max<int64_t>(bad, 0))];
          if (M == 70 && K == 1000 && N == 67) {
            std::vector<double> ref_b, mag_b;
            oracle_matmul(bf16_rounded(x), M, K, w.values, N, b, &ref_b, &mag_b);
            EXPECT_NE(first_bad(y, ref_b, mag_b), -1) << "x was rounded to bf16 only";
          }
          ++n_cases;
        }
  }
  std::printf("  %lld shapes within the f32 bound; kernel %s\n", (long long)n_cases,
              kernel_paths()[1].second.c_str());
  force_isa("best");
}

// The tolerance must be tight enough that a kernel dropping one product of a long dot fails.
TEST(MatmulTolerance, DetectsOneMissingProduct) {
  std::mt19937 rng(3);
  const int64_t K = 4097, N = 5;
  const auto x = random_vec(static_cast<size_t>(K), rng, 0.5f, 1.f);
  const auto w = random_vec(static_cast<size_t>(N * K), rng, 0.5f, 1.f);
  std::vector<double> ref, mag;
  oracle_matmul(x, 1, K, w, N, nullptr, &ref, &mag);
  std::vector<float> wrong(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    wrong[size_t(n)] = float(ref[size_t(n)] - x[K - 1] * w[size_t(n * K + K - 1)]);
  EXPECT_NE(first_bad(wrong, ref, mag), -1);
}

// ---------------------------------------------------------------- attention

void oracle_attention(const std::vector<float>& q, int64_t n_q, int n_heads, int hd,
                      const std::vector<float>& kc, const std::vector<float>& vc, int n_kv_heads,
                      int64_t cap, int64_t n_kv, const int32_t* q_pos, float scale,
                      std::vector<double>* out) {
  out->assign(static_cast<size_t>(n_q * n_heads * hd), 0.0);
  const int group = n_heads / n_kv_heads;
  for (int64_t i = 0; i < n_q; ++i)
    for (int h = 0; h < n_heads; ++h) {
      const int64_t nk = q_pos ? std::min<int64_t>(q_pos[i] + 1, n_kv) : n_kv;
      if (nk <= 0) continue;
      const size_t base = size_t(h / group) * size_t(cap * hd);
      std::vector<double> s(static_cast<size_t>(nk));
      double mx = -1e300;
      for (int64_t j = 0; j < nk; ++j) {
        double d = 0;
        for (int e = 0; e < hd; ++e)
          d += double(q[size_t((i * n_heads + h) * hd + e)]) * kc[base + size_t(j * hd + e)];
        s[size_t(j)] = d * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double l = 0;
      for (auto& v : s) l += (v = std::exp(v - mx));
      for (int64_t j = 0; j < nk; ++j)
        for (int e = 0; e < hd; ++e)
          (*out)[size_t((i * n_heads + h) * hd + e)] +=
              s[size_t(j)] / l * vc[base + size_t(j * hd + e)];
    }
}

TEST_P(IsaTest, AttentionMatchesOracle) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  const int n_kv_heads = 2;
  for (DType kv_type : {DType::F32, DType::F16})
    for (int hd : {64, 80, 128})
      for (int ratio : {1, 2, 7})
        for (int64_t n_kv : {1, 67, 200})
          for (bool causal : {true, false}) {
            const int n_heads = n_kv_heads * ratio;
            const int64_t n_q = causal ? std::min<int64_t>(5, n_kv) : 3, cap = n_kv + 3;
            const auto q = random_vec(static_cast<size_t>(n_q * n_heads * hd), rng, -2.f, 2.f);
            const auto k = random_vec(static_cast<size_t>(n_kv * n_kv_heads * hd), rng, -2.f, 2.f);
            const auto v = random_vec(static_cast<size_t>(n_kv * n_kv_heads * hd), rng);
            // Fill the caches through kv_store (also tests it); the tail past n_kv is garbage.
            std::vector<uint8_t> kc(static_cast<size_t>(n_kv_heads * cap * hd) * 4, 0xff),
                vc(static_cast<size_t>(n_kv_heads * cap * hd) * 4, 0xff);
            kv_store(k.data(), v.data(), n_kv, n_kv_heads, hd, 0, kc.data(), vc.data(), kv_type,
                     cap);
            std::vector<float> kf(static_cast<size_t>(n_kv_heads * cap * hd)), vf(kf.size());
            convert_to_f32(kc.data(), kv_type, kf.data(), int64_t(kf.size()));
            convert_to_f32(vc.data(), kv_type, vf.data(), int64_t(vf.size()));
            std::vector<int32_t> pos(static_cast<size_t>(n_q));
            for (int64_t i = 0; i < n_q; ++i) pos[size_t(i)] = int32_t(n_kv - n_q + i);
            const int32_t* qp = causal ? pos.data() : nullptr;
            const float scale = 1.f / std::sqrt(float(hd));
            std::vector<float> out(q.size(), NAN), outs(q.size(), NAN);
            attention(pool, q.data(), n_q, n_heads, hd, kc.data(), vc.data(), kv_type, n_kv_heads,
                      cap, n_kv, qp, scale, out.data());
            with_scalar([&] {
              attention(pool, q.data(), n_q, n_heads, hd, kc.data(), vc.data(), kv_type, n_kv_heads,
                        cap, n_kv, qp, scale, outs.data());
            });
            std::vector<double> ref;
            oracle_attention(q, n_q, n_heads, hd, kf, vf, n_kv_heads, cap, n_kv, qp, scale, &ref);
            for (size_t e = 0; e < ref.size(); ++e) {
              ASSERT_NEAR(out[e], ref[e], 2e-6)
                  << "hd=" << hd << " ratio=" << ratio << " n_kv=" << n_kv << " e=" << e;
              ASSERT_NEAR(outs[e], ref[e], 2e-6) << "scalar hd=" << hd << " n_kv=" << n_kv;
            }
          }
}

// Decode (one query) splits the keys into ranges over the pool and merges the ranges' partial
// softmaxes; head sets of up to 8 per KV head. Shapes cover: a cache too short to split, ranges
// that do not end on a 64-key block, 12 heads per KV head (two sets of 6), 1..3 threads and a
// query position short of the filled cache (keys past it must be ignored), and a head_dim of 72
// (a tail chunk on 8- and 16-lane levels, where the multi-key reduction tree steps aside).
TEST_P(IsaTest, AttentionDecodeSplitsKeysOverThreads) {
  std::mt19937 rng(6);
  const int n_kv_heads = 2;
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  for (DType kv_type : {DType::F32, DType::F16})
    for (int hd : {64, 72, 80})
      for (int ratio : {1, 5, 7, 12})
        for (int64_t n_kv : {3, 130, 700, 2051}) {
          const int n_heads = n_kv_heads * ratio;
          const int64_t cap = n_kv + 5;
          const auto q = random_vec(size_t(n_heads * hd), rng, -2.f, 2.f);
          const auto k = random_vec(size_t(cap * n_kv_heads * hd), rng, -2.f, 2.f);
          const auto v = random_vec(size_t(cap * n_kv_heads * hd), rng);
          std::vector<uint8_t> kc(size_t(n_kv_heads * cap * hd) * 4, 0xff), vc(kc.size(), 0xff);
          kv_store(k.data(), v.data(), cap, n_kv_heads, hd, 0, kc.data(), vc.data(), kv_type, cap);
          std::vector<float> kf(size_t(n_kv_heads * cap * hd)), vf(kf.size());
          convert_to_f32(kc.data(), kv_type, kf.data(), int64_t(kf.size()));
          convert_to_f32(vc.data(), kv_type, vf.data(), int64_t(vf.size()));
          // The query sits at n_kv - 1; the cache holds valid rows up to cap.
          const int32_t pos = int32_t(n_kv - 1);
          const float scale = 1.f / std::sqrt(float(hd));
          // The oracle and the scalar path do not depend on the thread count: once per shape,
          // then the level's kernel on 1, 2 and 3 threads (the splits differ per count).
          std::vector<double> ref;
          oracle_attention(q, 1, n_heads, hd, kf, vf, n_kv_heads, cap, cap, &pos, scale, &ref);
          std::vector<float> outs(q.size(), NAN);
          with_scalar([&] {
            attention(pools[2], q.data(), 1, n_heads, hd, kc.data(), vc.data(), kv_type, n_kv_heads,
                      cap, cap, &pos, scale, outs.data());
          });
          for (size_t e = 0; e < ref.size(); ++e)
            ASSERT_NEAR(outs[e], ref[e], 2e-6) << "scalar hd=" << hd << " n_kv=" << n_kv;
          for (ThreadPool& pool : pools) {
            std::vector<float> out(q.size(), NAN);
            attention(pool, q.data(), 1, n_heads, hd, kc.data(), vc.data(), kv_type, n_kv_heads,
                      cap, cap, &pos, scale, out.data());
            for (size_t e = 0; e < ref.size(); ++e)
              ASSERT_NEAR(out[e], ref[e], 2e-6)
                  << "threads=" << pool.size() << " hd=" << hd << " ratio=" << ratio
                  << " n_kv=" << n_kv << " e=" << e;
          }
        }
}

TEST_P(IsaTest, AttentionLongContextAndEmptyRows) {
  std::mt19937 rng(5);
  ThreadPool pool(3);
  const int hd = 64, n_heads = 4, n_kv_heads = 1;
  const int64_t n_kv = 3001, cap = 4096, n_q = 2;
  const auto q = random_vec(static_cast<size_t>(n_q * n_heads * hd), rng, -3.f, 3.f);
  const auto k = random_vec(static_cast<size_t>(cap * hd), rng, -3.f, 3.f);
  const auto v = random_vec(static_cast<size_t>(cap * hd), rng);
  const std::vector<int32_t> pos = {-1, 2999};  // first query sees nothing -> zeros
  std::vector<float> out(q.size(), NAN);
  attention(pool, q.data(), n_q, n_heads, hd, k.data(), v.data(), DType::F32, n_kv_heads, cap, n_kv,
            pos.data(), 0.125f, out.data());
  std::vector<double> ref;
  oracle_attention(q, n_q, n_heads, hd, k, v, n_kv_heads, cap, n_kv, pos.data(), 0.125f, &ref);
  for (size_t e = 0; e < ref.size(); ++e) ASSERT_NEAR(out[e], ref[e], 2e-6) << e;
}

// ---------------------------------------------------------------- small kernels

const int64_t kLens[] = {1, 3, 7, 15, 16, 17, 33, 63, 65, 896, 4097};

TEST_P(IsaTest, Norms) {
  std::mt19937 rng(6);
  for (int64_t dim : kLens) {
    const int64_t rows = 3;
    auto x = random_vec(static_cast<size_t>(rows * dim), rng, -4.f, 4.f);
    // Row 1 has a large mean (like a residual stream): layernorm must not lose it to rounding.
    for (int64_t i = 0; i < dim; ++i) x[size_t(dim + i)] += 1000.f;
    const auto w = random_vec(static_cast<size_t>(dim), rng),
               b = random_vec(static_cast<size_t>(dim), rng);
    std::vector<float> y(x.size()), ys(x.size()), z(x.size()), zs(x.size());
    rmsnorm(x.data(), w.data(), 1e-6f, rows, dim, y.data());
    layernorm(x.data(), w.data(), b.data(), 1e-5f, rows, dim, z.data());
    with_scalar([&] {
      rmsnorm(x.data(), w.data(), 1e-6f, rows, dim, ys.data());
      layernorm(x.data(), w.data(), b.data(), 1e-5f, rows, dim, zs.data());
    });
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0, mean = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i)
        ss += double(x[size_t(r * dim + i)]) * x[size_t(r * dim + i)];
      for (int64_t i = 0; i < dim; ++i) mean += x[size_t(r * dim + i)];
      mean /= double(dim);
      for (int64_t i = 0; i < dim; ++i) var += std::pow(x[size_t(r * dim + i)] - mean, 2);
      const double inv = 1 / std::sqrt(ss / double(dim) + 1e-6);
      const double inv_ln = 1 / std::sqrt(var / double(dim) + 1e-5);
      for (int64_t i = 0; i < dim; ++i) {
        const size_t e = size_t(r * dim + i);
        const double rr = x[e] * inv * w[size_t(i)];
        const double rl = (x[e] - mean) * inv_ln * w[size_t(i)] + b[size_t(i)];
        // Normalised values are O(1). Row 1 (mean 1000, std 2.3): float rounding of x - mean
        // alone is ~3e-5/2.3 relative, so layernorm gets 5e-5 there.
        ASSERT_NEAR(y[e], rr, 2e-6 * std::max(1.0, std::fabs(rr))) << "rms dim=" << dim;
        ASSERT_NEAR(ys[e], rr, 2e-6 * std::max(1.0, std::fabs(rr))) << "rms scalar dim=" << dim;
        ASSERT_NEAR(z[e], rl, (r == 1 ? 5e-5 : 2e-6) * std::max(1.0, std::fabs(rl)))
            << "ln dim=" << dim;
        ASSERT_NEAR(zs[e], rl, (r == 1 ? 5e-5 : 2e-6) * std::max(1.0, std::fabs(rl)))
            << "ln scalar dim=" << dim;
      }
    }
  }
}

TEST_P(IsaTest, Elementwise) {
  std::mt19937 rng(7);
  for (int64_t n : kLens) {
    auto g = random_vec(static_cast<size_t>(n), rng, -20.f, 20.f);
    const auto u = random_vec(static_cast<size_t>(n), rng, -3.f, 3.f);
    g[0] = n > 1 ? -100.f : 0.f;  // far tails must not overflow to NaN
    if (n > 2) g[1] = 100.f;
    std::vector<float> s(static_cast<size_t>(n)), ge(static_cast<size_t>(n)),
        gt(static_cast<size_t>(n)), a(static_cast<size_t>(n));
    silu_mul(g.data(), u.data(), s.data(), n);
    gelu_erf(g.data(), ge.data(), n);
    gelu_tanh(g.data(), gt.data(), n);
    add(g.data(), u.data(), a.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[size_t(i)];
      const double rs = x / (1 + std::exp(-x)) * u[size_t(i)];
      const double rg = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
      ASSERT_NEAR(s[size_t(i)], rs, 2e-6 * std::max(1.0, std::fabs(rs))) << "silu x=" << x;
      ASSERT_NEAR(ge[size_t(i)], rg, 2e-6 * std::max(1.0, std::fabs(x))) << "gelu x=" << x;
      const double rt = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
      ASSERT_NEAR(gt[size_t(i)], rt, 2e-6 * std::max(1.0, std::fabs(x))) << "gelu_tanh x=" << x;
      ASSERT_EQ(a[size_t(i)], g[size_t(i)] + u[size_t(i)]);
    }
  }
}

// The oracle: the first index of the largest non-NaN value, 0 when there is none.
int64_t argmax_oracle(const std::vector<float>& x) {
  int64_t best = -1;
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[size_t(best)])) best = int64_t(i);
  return best < 0 ? 0 : best;
}

TEST_P(IsaTest, ArgmaxFirstLargestSkippingNaN) {
  std::mt19937 rng(12);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (int64_t n : {1, 2, 7, 16, 17, 31, 33, 511, 512, 513, 1025, 4097, 151936}) {
    const size_t sz = size_t(n);
    std::uniform_int_distribution<size_t> at(0, sz - 1);
    std::vector<std::vector<float>> cases;
    cases.push_back(random_vec(sz, rng, -30.f, 30.f));
    auto last = random_vec(sz, rng, -5.f, -1.f);  // all negative, largest in the tail
    last.back() = -0.5f;
    cases.push_back(last);
    auto ties = random_vec(sz, rng, -1.f, 1.f);  // the same maximum three times: the first wins
    for (int r = 0; r < 3; ++r) ties[at(rng)] = 7.f;
    cases.push_back(ties);
    cases.push_back(std::vector<float>(sz, -inf));
    cases.push_back(std::vector<float>(sz, nan));
    cases.push_back(std::vector<float>(sz, 0.f));
    auto zeros = std::vector<float>(sz, -1.f);  // -0 and +0 compare equal: the first wins
    zeros[at(rng)] = -0.f;
    zeros[at(rng)] = 0.f;
    cases.push_back(zeros);
    auto nans = random_vec(sz, rng, -3.f, 3.f);  // NaNs anywhere, the first element included
    nans[0] = nan;
    for (int r = 0; r < 5; ++r) nans[at(rng)] = nan;
    cases.push_back(nans);
    auto big = random_vec(sz, rng, -3.f, 3.f);
    big[at(rng)] = inf;
    cases.push_back(big);
    for (size_t c = 0; c < cases.size(); ++c) {
      const int64_t want = argmax_oracle(cases[c]);
      ASSERT_EQ(argmax(cases[c].data(), n), want) << "n " << n << " case " << c;
      with_scalar([&] { ASSERT_EQ(argmax(cases[c].data(), n), want) << "scalar n " << n; });
    }
  }
}

TEST_P(IsaTest, SoftmaxRowsMatchesOracle) {
  std::mt19937 rng(11);
  for (int64_t cols : {1, 3, 15, 16, 17, 63, 1025}) {
    const int64_t rows = 3;
    auto x = random_vec(static_cast<size_t>(rows * cols), rng, -30.f, 30.f);
    x[0] = 80.f;  // large logits must not overflow
    auto y = x;
    softmax_rows(y.data(), rows, cols, 0.125f);
    for (int64_t r = 0; r < rows; ++r) {
      double m = -1e300, sum = 0;
      for (int64_t i = 0; i < cols; ++i) m = std::max(m, 0.125 * x[size_t(r * cols + i)]);
      for (int64_t i = 0; i < cols; ++i) sum += std::exp(0.125 * x[size_t(r * cols + i)] - m);
      for (int64_t i = 0; i < cols; ++i) {
        const double want = std::exp(0.125 * x[size_t(r * cols + i)] - m) / sum;
        ASSERT_NEAR(y[size_t(r * cols + i)], want, 2e-6 * std::max(want, 1e-3))
            << "cols " << cols << " row " << r << " i " << i;
      }
    }
  }
}

TEST_P(IsaTest, ConvertExact) {
  std::mt19937 rng(8);
  for (int64_t n : kLens)
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      const Weights w = make_weights(static_cast<size_t>(n), t, rng);
      std::vector<float> out(static_cast<size_t>(n));
      convert_to_f32(w.bytes.data(), t, out.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[size_t(i)], w.values[size_t(i)]);
    }
}

TEST_P(IsaTest, RopeRotateHalf) {
  std::mt19937 rng(9);
  const int n_heads = 3, hd = 80, half = hd / 2, max_pos = 50;
  std::vector<float> cos_t(static_cast<size_t>(max_pos * half)), sin_t(cos_t.size());
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / hd);
      cos_t[size_t(p * half + i)] = float(std::cos(a));
      sin_t[size_t(p * half + i)] = float(std::sin(a));
    }
  const std::vector<int32_t> pos = {0, 7, 49};
  const auto x0 = random_vec(static_cast<size_t>(3 * n_heads * hd), rng);
  auto x = x0;
  rope_rotate_half(x.data(), 3, n_heads, hd, pos.data(), cos_t.data(), sin_t.data());
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < half; ++i) {
        const size_t o = size_t((t * n_heads + h) * hd);
        const double c = cos_t[size_t(pos[t] * half + i)], s = sin_t[size_t(pos[t] * half + i)];
        const double a = x0[o + i], b = x0[o + i + half];
        ASSERT_NEAR(x[o + i], a * c - b * s, 1e-6);
        ASSERT_NEAR(x[o + i + half], b * c + a * s, 1e-6);
      }
}

TEST(Kernels, RejectsBadArguments) {
  ThreadPool pool(1);
  float x = 1, y = 0;
  EXPECT_THROW(matmul(pool, &x, 1, 1, &x, DType::Q8, 1, nullptr, &y), Error);
  EXPECT_THROW(attention(pool, &x, 1, 3, 1, &x, &x, DType::F32, 2, 1, 1, nullptr, 1.f, &y), Error);
  EXPECT_THROW(kv_store(&x, &x, 2, 1, 1, 0, &y, &y, DType::F32, 1), Error);
}

TEST(Kernels, FeaturesAndPaths) {
  EXPECT_FALSE(cpu_features_string().empty());
  EXPECT_GE(default_thread_count(), 1);
  force_isa("best");
  bool has_matmul_f16 = false;
  for (const auto& [family, isa] : kernel_paths()) has_matmul_f16 |= family == "matmul_f16";
  EXPECT_TRUE(has_matmul_f16);
  EXPECT_FALSE(force_isa("avx9000"));
  std::printf("cpu: %s\n", cpu_features_string().c_str());
  for (const auto& [family, isa] : kernel_paths())
    std::printf("  %s: %s\n", family.c_str(), isa.c_str());
}

// Every level either runs (and becomes the active one) or is refused naming exactly the features
// this CPU lacks; unknown names list the known ones. "best" is the highest level that runs.
TEST(Kernels, IsaLevelSelection) {
  const std::vector<std::string> levels = isa_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), "scalar");
  std::string best;
  for (const std::string& l : levels) {
    const std::string missing = isa_missing_features(l);
    if (missing.empty()) {
      EXPECT_NO_THROW(select_isa(l)) << l;
      EXPECT_EQ(active_isa(), l);
      best = l;
    } else {
      const std::string msg = test::error_of([&] { select_isa(l); });
      EXPECT_NE(msg.find("lacks " + missing), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + l + "'"), std::string::npos) << msg;
    }
  }
  EXPECT_NE(test::error_of([] { select_isa("avx9000"); }).find("known: scalar"), std::string::npos);
  EXPECT_THROW(isa_missing_features("avx9000"), Error);
  if (!std::getenv("EDGEVL_ISA")) {
    select_isa("best");
    EXPECT_EQ(active_isa(), best);
  }
  force_isa("best");
}

INSTANTIATE_TEST_SUITE_P(Isa, IsaTest, ::testing::ValuesIn(test::all_isa_levels()),
                         test::isa_param_name);
INSTANTIATE_TEST_SUITE_P(Level, Bf16Level,
                         ::testing::Values("amx-all-rows", "avx512-bf16-all-rows", "bf16-all-rows"),
                         [](const auto& info) {
                           return test::isa_param_name({std::string(info.param), info.index});
                         });

}  // namespace
}  // namespace edgevl::cpu
