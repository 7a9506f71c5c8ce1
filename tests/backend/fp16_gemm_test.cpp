// The AArch64 fp16 level's vision GEMM (arm/fp16: FMLA .8h) against its contract, bit for bit: x
// and the weights rounded to f16 (nearest even, saturated at 65504), each 32-k block summed in
// f16 with one rounding per multiply-add in k order, the blocks summed in f32, then bias and
// residual in f32. The oracle replays exactly that with f16 roundings, so a dropped, doubled or
// reordered product, a wrong lane or a missed saturation shows as a mismatch; a second check
// holds the result to the double product within the contract's error (why it is usable).
// Also: the public block forms equal the unfused sequence, and the dispatcher keeps LLM row
// weights (bf16 / f16) off it. Runs where the CPU has FP16 arithmetic (qemu -cpu max,
// neoverse-n1, cortex-a76); skipped elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
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

#if defined(__aarch64__)

// Halves as their bits; __fp16 (the AArch64 storage type, single-rounding conversions from
// float and double) only inside these helpers.
uint16_t bits_of(__fp16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float value_of(uint16_t b) {
  __fp16 h;
  std::memcpy(&h, &b, 2);
  return float(h);
}
uint16_t to_f16(float v) {  // the contract's rounding: nearest even, saturated, NaN kept
  if (std::isnan(v)) return bits_of(__fp16(v));
  return bits_of(__fp16(std::fmin(std::fmax(v, -65504.f), 65504.f)));
}
uint16_t round_to_f16(double v) {
  const __fp16 h = v;
  return bits_of(h);
}

// The contract replayed: y[m][n] for f16 operands xh[M][K], wh[N][K].
std::vector<float> replay(const std::vector<uint16_t>& xh, int64_t M, int64_t K,
                          const std::vector<uint16_t>& wh, int64_t N, const float* bias,
                          const float* residual) {
  std::vector<float> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.f;
      for (int64_t k0 = 0; k0 < K; k0 += 32) {
        uint16_t h = 0;
        for (int64_t k = k0; k < std::min(K, k0 + 32); ++k)
          h = round_to_f16(std::fma(double(value_of(xh[size_t(m * K + k)])),
                                    double(value_of(wh[size_t(n * K + k)])), double(value_of(h))));
        acc += value_of(h);
      }
      if (bias) acc += bias[n];
      if (residual) acc += residual[m * N + n];
      y[size_t(m * N + n)] = acc;
    }
  return y;
}

bool same(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0 || (std::isnan(a) && std::isnan(b));
}

class Fp16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!force_isa("fp16-all-rows")) GTEST_SKIP() << "no FP16 arithmetic on this CPU";
  }
  void TearDown() override { force_isa("best"); }
};

// bf16_gemm straight from the table on awkward shapes, with bf16p panels, bf16 rows and f16 rows;
// each call writes exactly its columns.
TEST_F(Fp16Gemm, DirectCallsReplayTheContractBitForBit) {
  const KernelTable& t = fp16_kernels(true);
  ASSERT_TRUE(t.bf16_gemm_panels_only);
  std::mt19937 rng(31);
  int64_t cases = 0;
  for (int64_t M : {1, 3, 4, 5, 16, 17, 33})
    for (int64_t K : {1, 17, 31, 32, 33, 100, 1040})
      for (int64_t N : {1, 15, 16, 17, 48, 49}) {
        const int64_t Kp = (K + 31) / 32 * 32, Mp = (M + 15) / 16 * 16;
        // Some activations past the f16 range (saturated) and some tiny ones (f16 denormals).
        auto x = random_vec(size_t(M * K), rng, 4.f);
        for (size_t i = 5; i < x.size(); i += 41) x[i] = i % 2 ? 9e4f : -3e-6f;
        const auto w = random_bf16(size_t(N * K), rng);
        std::vector<uint16_t> wf16(size_t(N * K));
        for (size_t i = 0; i < wf16.size(); ++i) wf16[i] = f32_to_f16(random_vec(1, rng)[0]);
        const auto bias = random_vec(size_t(N), rng);
        const auto res = random_vec(size_t(M * N), rng);
        Aligned<uint16_t> xb(size_t(Mp * Kp), 0xdead);
        t.to_bf16_rows(x.data(), M, K, Kp, xb.p);
        Aligned<uint16_t> panels(bf16_panel_bytes(N, K) / 2, 0);
        pack_bf16_panels(w.data(), N, K, panels.p);
        std::vector<uint16_t> xh(x.size()), wh(w.size());
        for (size_t i = 0; i < x.size(); ++i) xh[i] = to_f16(x[i]);
        for (size_t i = 0; i < w.size(); ++i) wh[i] = to_f16(bf16_to_f32(w[i]));
        const int variant = int(cases++ % 3);  // 0 plain, 1 bias, 2 bias + residual
        const float* b = variant >= 1 ? bias.data() : nullptr;
        const float* r = variant == 2 ? res.data() : nullptr;
        for (int form = 0; form < 3; ++form) {  // bf16p panels, bf16 rows, f16 rows
          const auto want = replay(xh, M, K, form == 2 ? wf16 : wh, N, b, r);
          const uint16_t* wp = form == 0 ? panels.p : form == 1 ? w.data() : wf16.data();
          std::vector<float> y(size_t(M * N), NAN);
          Bf16GemmArgs a{xb.p, Kp, M, K, Kp, wp, form == 2, N, b, y.data()};
          a.w_panels = form == 0;
          a.residual = r;
          const int64_t c0 = std::min<int64_t>(16, N), c1 = std::min<int64_t>(48, N);
          if (c0 < c1) {
            t.bf16_gemm(a, c0, c1);
            for (int64_t i = 0; i < M * N; ++i) {
              if (i % N < c0 || i % N >= c1) {
                ASSERT_TRUE(std::isnan(y[size_t(i)])) << "column " << i % N << " written";
              }
            }
          }
          t.bf16_gemm(a, 0, c0);
          if (c1 < N) t.bf16_gemm(a, c1, N);
          for (int64_t i = 0; i < M * N; ++i)
            ASSERT_TRUE(same(y[size_t(i)], want[size_t(i)]))
                << "form " << form << " variant " << variant << " M=" << M << " K=" << K
                << " N=" << N << " m=" << i / N << " n=" << i % N << ": " << y[size_t(i)] << " vs "
                << want[size_t(i)];
        }
      }
}

// The activation blocks: the contract's rounding at the block positions, zero padding.
TEST_F(Fp16Gemm, ActivationBlocksRoundSaturateAndPad) {
  const KernelTable& t = fp16_kernels(true);
  std::mt19937 rng(32);
  const float specials[] = {NAN,    INFINITY, -INFINITY, 65504.f, 65519.f, 65520.f,       -7e4f,
                            1e-40f, 3e-8f,    -6e-5f,    0.f,     -0.f,    1.00048828125f};
  for (int64_t M : {1, 15, 17, 40})
    for (int64_t K : {1, 31, 32, 33, 100}) {
      const int64_t ld = (K + 31) / 32 * 32, Mp = (M + 15) / 16 * 16;
      auto x = random_vec(size_t(M * K), rng, 100.f);
      for (size_t i = 0; i < x.size(); i += 5) x[i] = specials[(i / 5) % std::size(specials)];
      std::vector<uint16_t> xb(size_t(Mp * ld), 0xdead);
      t.to_bf16_rows(x.data(), M, K, ld, xb.data());
      for (int64_t m = 0; m < Mp; ++m)
        for (int64_t k = 0; k < ld; ++k) {
          const uint16_t got = block_at(xb.data(), ld, m, k);
          if (m >= M || k >= K) {
            ASSERT_EQ(got, 0) << "padding at m=" << m << " k=" << k;
            continue;
          }
          const float v = x[size_t(m * K + k)];
          if (std::isnan(v))
            ASSERT_TRUE(std::isnan(value_of(got)));
          else
            ASSERT_EQ(got, to_f16(v)) << "x=" << v;
        }
    }
}

// Why the contract is usable: on a vision-tower shape (K 1024 and 4096, activations ~N(0, 1)
// and GELU-like, weights ~0.02) the result is within 2^-9 of sum |x w| of the double product
// of the unrounded operands, the size of error the bf16 levels have.
TEST_F(Fp16Gemm, ErrorAgainstDoubleIsTheBf16Levels) {
  const KernelTable& t = fp16_kernels(true);
  std::mt19937 rng(33);
  std::normal_distribution<float> nd(0.f, 1.f), wd(0.f, 0.02f);
  for (int64_t K : {1024, 4096}) {
    const int64_t M = 8, N = 32, Kp = K;
    std::vector<float> x(size_t(M * K));
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 3 ? nd(rng) : std::fmax(0.f, 3.f * nd(rng));
    std::vector<uint16_t> w(size_t(N * K));
    for (auto& v : w) v = f32_to_bf16(wd(rng));
    Aligned<uint16_t> xb(size_t(16 * Kp), 0);
    t.to_bf16_rows(x.data(), M, K, Kp, xb.p);
    std::vector<float> y(size_t(M * N));
    Bf16GemmArgs a{xb.p, Kp, M, K, Kp, w.data(), false, N, nullptr, y.data()};
    t.bf16_gemm(a, 0, N);
    double worst = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(x[size_t(m * K + k)]) * bf16_to_f32(w[size_t(n * K + k)]);
          s += p;
          mag += std::fabs(p);
        }
        worst = std::max(worst, std::fabs(double(y[size_t(m * N + n)]) - s) / mag);
      }
    EXPECT_LT(worst, 1.0 / 512) << "K=" << K;
    EXPECT_GT(worst, 0.0) << "K=" << K << ": no rounding at all is not this kernel";
  }
}

// The public forms on the fp16 level: GELU into blocks == matmul, gelu_erf, f16 rounding; the
// layernorm's blocks == its f32 rows; the residual form == matmul + add; matmul_bf16_panels ==
// the block form. And the gate: bf16 / f16 row weights (an LLM's) take the f32 path exactly as
// the dotprod level runs them, and blocks are refused for them.
TEST_F(Fp16Gemm, PublicFormsAndTheVisionOnlyGate) {
  std::mt19937 rng(34);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (int64_t M : {1, 17, 130})
      for (int64_t K : {32, 1056})
        for (int64_t N : {32, 160}) {
          const std::string at = "threads " + std::to_string(threads) + " M=" + std::to_string(M) +
                                 " K=" + std::to_string(K) + " N=" + std::to_string(N);
          const int64_t Mp = (M + 15) / 16 * 16;
          ASSERT_TRUE(bf16_blocks_supported(M, true));
          ASSERT_FALSE(bf16_blocks_supported(M, false));
          const auto x = random_vec(size_t(M * K), rng, 2.f);
          const auto w = random_bf16(size_t(N * K), rng);
          const auto bias = random_vec(size_t(N), rng);
          const auto lw = random_vec(size_t(K), rng), lb = random_vec(size_t(K), rng);
          Aligned<uint16_t> panels(bf16_panel_bytes(N, K) / 2, 0);
          pack_bf16_panels(w.data(), N, K, panels.p);

          std::vector<float> y(size_t(M * N));
          matmul_bf16_panels(pool, x.data(), M, K, panels.p, N, bias.data(), y.data());
          std::vector<float> g(y.size());
          gelu_erf(y.data(), g.data(), int64_t(y.size()));
          Aligned<uint16_t> yb(bf16_blocks_bytes(M, N) / 2, 0xdead);
          matmul_bf16_blocks(pool, x.data(), nullptr, M, K, panels.p, true, N, bias.data(), nullptr,
                             yb.p);
          for (int64_t m = 0; m < Mp; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const uint16_t want = m < M ? to_f16(g[size_t(m * N + n)]) : uint16_t(0);
              ASSERT_EQ(block_at(yb.p, N, m, n), want) << at << " gelu m=" << m << " n=" << n;
            }

          std::vector<float> ln(size_t(M * K));
          layernorm(x.data(), lw.data(), lb.data(), 1e-6f, M, K, ln.data());
          Aligned<uint16_t> xb(bf16_blocks_bytes(M, K) / 2, 0xdead);
          layernorm_to_bf16_blocks(pool, x.data(), lw.data(), lb.data(), 1e-6f, M, K, xb.p);
          std::vector<float> from_rows(size_t(M * N)), from_blocks(size_t(M * N), NAN);
          matmul_bf16_panels(pool, ln.data(), M, K, panels.p, N, bias.data(), from_rows.data());
          matmul_bf16_blocks(pool, nullptr, xb.p, M, K, panels.p, true, N, bias.data(),
                             from_blocks.data(), nullptr);
          ASSERT_EQ(from_blocks, from_rows) << at << " block input";

          const auto res = random_vec(size_t(M * N), rng);
          std::vector<float> sum(size_t(M * N)), got(size_t(M * N), NAN);
          for (size_t i = 0; i < sum.size(); ++i) sum[i] = from_rows[i] + res[i];
          matmul_bf16_blocks(pool, nullptr, xb.p, M, K, panels.p, true, N, bias.data(), got.data(),
                             nullptr, res.data());
          ASSERT_EQ(got, sum) << at << " residual";

          // Row weights: the dotprod level's f32 path, bit for bit; blocks refused.
          std::vector<float> fp16_rows(size_t(M * N)), dot_rows(size_t(M * N));
          matmul(pool, x.data(), M, K, w.data(), DType::BF16, N, bias.data(), fp16_rows.data());
          matmul_bf16_compute(pool, x.data(), M, K, w.data(), DType::BF16, N, bias.data(),
                              got.data());
          ASSERT_EQ(got, fp16_rows) << at << " matmul_bf16_compute on bf16 rows";
          EXPECT_THROW(matmul_bf16_blocks(pool, x.data(), nullptr, M, K, w.data(), false, N,
                                          bias.data(), got.data(), nullptr),
                       std::exception)
              << at;
          ASSERT_TRUE(force_isa("dotprod"));
          matmul(pool, x.data(), M, K, w.data(), DType::BF16, N, bias.data(), dot_rows.data());
          ASSERT_TRUE(force_isa("fp16-all-rows"));
          ASSERT_EQ(fp16_rows, dot_rows) << at << " bf16 rows";
        }
  }
}

#else

TEST(Fp16Gemm, AArch64Only) {
  GTEST_SKIP() << "the fp16 level is AArch64's";
}

#endif

}  // namespace
}  // namespace edgevl::cpu
