// The bf16 GEMM of every level that has one (AMX-BF16 TDPBF16PS, AVX512-BF16 VDPBF16PS, Arm
// BF16 BFDOT): the table's bf16_gemm called directly on awkward shapes and column ranges, and
// the public block entry points (matmul_bf16_blocks, layernorm_to_bf16_blocks,
// matmul_bf16_panels) with every epilogue. A level this CPU lacks is skipped.
//
// Tolerances (why): the contract is x rounded to bf16 (nearest even), bf16 weights, exact
// products and f32 accumulation; against a double oracle on the rounded x the error is f32
// accumulation only, bounded like kernels_test (1e-5 * sum|x w| + 1e-6), which still fails
// for one dropped or doubled product. The fused forms (GELU into blocks, block input, residual)
// must equal the unfused sequence on the same level bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "support/gemm16_data.h"

namespace edgevl::cpu {
namespace {

using test::Aligned;
using test::block_at;
using test::random_bf16;
using test::random_vec;

// y = bf16(x) w^T + bias in double, and sum |bf16(x) w| + |bias| for the bound.
void oracle(const std::vector<float>& x, int64_t M, int64_t K, const std::vector<uint16_t>& w,
            int64_t N, const float* bias, std::vector<double>* y, std::vector<double>* mag) {
  y->assign(size_t(M * N), 0.0);
  mag->assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bias[n] : 0.0, a = bias ? std::fabs(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(bf16_to_f32(f32_to_bf16(x[size_t(m * K + k)]))) *
                         double(bf16_to_f32(w[size_t(n * K + k)]));
        s += p;
        a += std::fabs(p);
      }
      (*y)[size_t(m * N + n)] = s;
      (*mag)[size_t(m * N + n)] = a;
    }
}

bool close(float got, double ref, double mag) {
  return std::fabs(double(got) - ref) <= 1e-5 * mag + 1e-6;
}

class Bf16Gemm : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!force_isa(GetParam())) GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  void TearDown() override { force_isa("best"); }
  const KernelTable& table() const {
#if defined(__x86_64__)
    if (std::string(GetParam()) == "amx") return amx_kernels(true);
    return avx512bf16_kernels(true);
#elif defined(__aarch64__)
    return bf16_kernels(true);  // BFDOT (arm/bf16)
#else
    return scalar_kernels();
#endif
  }
};

// bf16_gemm straight from the table: M across the row tiles (8 / 16 / 32) with ragged ends,
// K not a multiple of 32, N around 16 / 48, panels and row weights, bias or none, a residual
// (separate and in place), and column ranges: each call writes exactly [n0, n1).
TEST_P(Bf16Gemm, DirectCallsOnAwkwardShapesAndColumnRanges) {
  const KernelTable& t = table();
  ASSERT_NE(t.bf16_gemm, nullptr);
  std::mt19937 rng(21);
  int64_t cases = 0;
  for (int64_t M : {1, 3, 7, 8, 9, 15, 16, 17, 33, 100})
    for (int64_t K : {1, 17, 31, 32, 33, 100, 1040})
      for (int64_t N : {1, 15, 16, 17, 47, 48, 49, 100}) {
        const int64_t Kp = (K + 31) / 32 * 32, Mp = (M + 15) / 16 * 16;
        const auto x = random_vec(size_t(M * K), rng);
        const auto w = random_bf16(size_t(N * K), rng);
        const auto bias = random_vec(size_t(N), rng);
        const auto res = random_vec(size_t(M * N), rng);
        Aligned<uint16_t> xb(size_t(Mp * Kp), 0xdead);
        t.to_bf16_rows(x.data(), M, K, Kp, xb.p);
        Aligned<uint16_t> panels(bf16_panel_bytes(N, K) / 2, 0);
        pack_bf16_panels(w.data(), N, K, panels.p);
        const int variant = int(cases++ % 4);  // 0 plain, 1 bias, 2 bias + residual, 3 in place
        const float* b = variant >= 1 ? bias.data() : nullptr;
        std::vector<double> ref, mag;
        oracle(x, M, K, w, N, b, &ref, &mag);
        for (bool in_panels : {true, false}) {
          std::vector<float> y(size_t(M * N), NAN);
          if (variant == 3) y = res;
          Bf16GemmArgs a{xb.p,  Kp, M, K,       Kp, in_panels ? panels.p : w.data(),
                         false, N,  b, y.data()};
          a.w_panels = in_panels;
          a.residual = variant == 2 ? res.data() : variant == 3 ? y.data() : nullptr;
          // Columns [16, 48) first (clipped), then the rest in two calls.
          const int64_t c0 = std::min<int64_t>(16, N), c1 = std::min<int64_t>(48, N);
          if (c0 < c1) {
            t.bf16_gemm(a, c0, c1);
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n)
                if (n < c0 || n >= c1) {
                  const float want = variant == 3 ? res[size_t(m * N + n)] : NAN;
                  const float got = y[size_t(m * N + n)];
                  ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : got == want)
                      << "column " << n << " outside [" << c0 << ", " << c1 << ") written";
                }
          }
          t.bf16_gemm(a, 0, c0);
          if (c1 < N) t.bf16_gemm(a, c1, N);
          for (int64_t i = 0; i < M * N; ++i) {
            const double add = variant >= 2 ? double(res[size_t(i)]) : 0.0;
            ASSERT_TRUE(close(y[size_t(i)], ref[size_t(i)] + add, mag[size_t(i)] + std::fabs(add)))
                << GetParam() << (in_panels ? " panels" : " rows") << " variant " << variant
                << " M=" << M << " K=" << K << " N=" << N << " at m=" << i / N << " n=" << i % N
                << ": " << y[size_t(i)] << " vs " << ref[size_t(i)] + add;
          }
        }
      }
}

// to_bf16_rows: f32_to_bf16 bit for bit (ties, NaN, infinities, denormals) at the block
// positions, zero past K and for the rows of the last 16-row group past M.
TEST_P(Bf16Gemm, ActivationBlocksMatchScalarRounding) {
  const KernelTable& t = table();
  std::mt19937 rng(22);
  const float specials[] = {NAN,     -NAN, INFINITY, -INFINITY,   1e-40f,
                            -3e-39f, 0.f,  -0.f,     1.00390625f, 1.01171875f};
  for (int64_t M : {1, 15, 16, 17, 40})
    for (int64_t K : {1, 16, 31, 32, 33, 64, 100}) {
      const int64_t ld = (K + 31) / 32 * 32, Mp = (M + 15) / 16 * 16;
      auto x = random_vec(size_t(M * K), rng);
      for (size_t i = 0; i < x.size(); i += 7) x[i] = specials[(i / 7) % std::size(specials)];
      std::vector<uint16_t> xb(size_t(Mp * ld), 0xdead);
      t.to_bf16_rows(x.data(), M, K, ld, xb.data());
      for (int64_t m = 0; m < Mp; ++m)
        for (int64_t k = 0; k < ld; ++k) {
          const uint16_t want = m < M && k < K ? f32_to_bf16(x[size_t(m * K + k)]) : uint16_t(0);
          ASSERT_EQ(block_at(xb.data(), ld, m, k), want) << "M=" << M << " K=" << K << " m=" << m;
        }
    }
}

// The public block forms against the unfused sequence on the same level, bit for bit: GELU
// rounded into blocks == matmul to f32, gelu_erf, f32_to_bf16 (padding rows zero); block input
// from layernorm_to_bf16_blocks == layernorm to f32 rows then the matmul; the residual form ==
// matmul then add, also in place; panels == rows. 1 and 3 threads (column chunks of 32).
TEST_P(Bf16Gemm, BlockFormsEqualTheUnfusedSequence) {
  std::mt19937 rng(23);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (int64_t M : {1, 8, 17, 40, 130})
      for (int64_t K : {32, 96, 1056})
        for (int64_t N : {32, 96, 160}) {
          const int64_t Mp = (M + 15) / 16 * 16;
          ASSERT_TRUE(bf16_blocks_supported(M));
          const auto x = random_vec(size_t(M * K), rng, 2.f);
          const auto w = random_bf16(size_t(N * K), rng);
          const auto bias = random_vec(size_t(N), rng);
          const auto lw = random_vec(size_t(K), rng), lb = random_vec(size_t(K), rng);
          Aligned<uint16_t> panels(bf16_panel_bytes(N, K) / 2, 0);
          pack_bf16_panels(w.data(), N, K, panels.p);
          const std::string at = std::string(GetParam()) + " threads " + std::to_string(threads) +
                                 " M=" + std::to_string(M) + " K=" + std::to_string(K) +
                                 " N=" + std::to_string(N);

          // GELU into blocks.
          std::vector<float> y(size_t(M * N));
          matmul_bf16_blocks(pool, x.data(), nullptr, M, K, w.data(), false, N, bias.data(),
                             y.data(), nullptr);
          std::vector<float> g(y.size());
          gelu_erf(y.data(), g.data(), int64_t(y.size()));
          for (bool in_panels : {false, true}) {
            Aligned<uint16_t> yb(bf16_blocks_bytes(M, N) / 2, 0xdead);
            matmul_bf16_blocks(pool, x.data(), nullptr, M, K, in_panels ? panels.p : w.data(),
                               in_panels, N, bias.data(), nullptr, yb.p);
            for (int64_t m = 0; m < Mp; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const uint16_t want = m < M ? f32_to_bf16(g[size_t(m * N + n)]) : uint16_t(0);
                ASSERT_EQ(block_at(yb.p, N, m, n), want) << at << " gelu m=" << m << " n=" << n;
              }
          }

          // Block input from the layernorm == f32 rows of the layernorm.
          std::vector<float> ln(size_t(M * K));
          layernorm(x.data(), lw.data(), lb.data(), 1e-6f, M, K, ln.data());
          Aligned<uint16_t> xb(bf16_blocks_bytes(M, K) / 2, 0xdead);
          layernorm_to_bf16_blocks(pool, x.data(), lw.data(), lb.data(), 1e-6f, M, K, xb.p);
          std::vector<float> from_rows(size_t(M * N)), from_blocks(size_t(M * N), NAN);
          matmul_bf16_blocks(pool, ln.data(), nullptr, M, K, w.data(), false, N, bias.data(),
                             from_rows.data(), nullptr);
          matmul_bf16_blocks(pool, nullptr, xb.p, M, K, panels.p, true, N, bias.data(),
                             from_blocks.data(), nullptr);
          ASSERT_EQ(from_blocks, from_rows) << at << " block input";
          std::vector<double> ref, mag;
          oracle(ln, M, K, w, N, bias.data(), &ref, &mag);
          for (size_t i = 0; i < from_rows.size(); ++i)
            ASSERT_TRUE(close(from_rows[i], ref[i], mag[i])) << at << " at " << i;

          // Residual: separate and in place.
          const auto res = random_vec(size_t(M * N), rng);
          std::vector<float> sum(size_t(M * N)), inplace = res;
          for (size_t i = 0; i < sum.size(); ++i) sum[i] = from_rows[i] + res[i];
          std::vector<float> got(size_t(M * N), NAN);
          matmul_bf16_blocks(pool, nullptr, xb.p, M, K, panels.p, true, N, bias.data(), got.data(),
                             nullptr, res.data());
          ASSERT_EQ(got, sum) << at << " residual";
          matmul_bf16_blocks(pool, nullptr, xb.p, M, K, w.data(), false, N, bias.data(),
                             inplace.data(), nullptr, inplace.data());
          ASSERT_EQ(inplace, sum) << at << " residual in place";

          // matmul_bf16_panels (f32 rows in and out) == the rows form.
          std::vector<float> yp(size_t(M * N), NAN);
          matmul_bf16_panels(pool, ln.data(), M, K, panels.p, N, bias.data(), yp.data());
          ASSERT_EQ(yp, from_rows) << at << " matmul_bf16_panels";
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Level, Bf16Gemm,
                         ::testing::Values("amx-all-rows", "avx512-bf16-all-rows", "bf16-all-rows"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace edgevl::cpu
