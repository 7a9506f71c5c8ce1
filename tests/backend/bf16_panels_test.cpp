// The bf16p weight layout (bf16_panels.h): packing is the documented index formula with zero
// padding, unpacking inverts it, and a matmul on packed weights agrees with a double reference
// on every level with an f32 path, for awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "support/isa_params.h"

namespace edgevl::cpu {
namespace {

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(d(rng));
  return v;
}

TEST(Bf16Panels, LayoutAndRoundTrip) {
  std::mt19937 rng(1);
  for (const auto& [N, K] :
       {std::pair<int64_t, int64_t>{1, 1}, {15, 31}, {16, 32}, {17, 33}, {40, 100}, {64, 1024}}) {
    const auto w = random_bf16(size_t(N * K), rng);
    const int64_t Np = (N + 15) / 16 * 16, Kp = (K + 31) / 32 * 32;
    ASSERT_EQ(bf16_panel_bytes(N, K), size_t(Np * Kp * 2));
    std::vector<uint16_t> packed(bf16_panel_bytes(N, K) / 2, 0xBEEF);
    pack_bf16_panels(w.data(), N, K, packed.data());
    for (int64_t n = 0; n < Np; ++n)
      for (int64_t k = 0; k < Kp; ++k) {
        const uint16_t want = n < N && k < K ? w[size_t(n * K + k)] : uint16_t(0);
        ASSERT_EQ(packed[size_t((n / 16) * 16 * Kp + (k / 2) * 32 + (n % 16) * 2 + k % 2)], want)
            << "N=" << N << " K=" << K << " n=" << n << " k=" << k;
      }
    std::vector<uint16_t> back(size_t(N * K));
    unpack_bf16_panels(packed.data(), N, K, 0, N, back.data());
    EXPECT_EQ(back, w);
  }
}

// Every level without a bf16 GEMM runs f32 products on the panels: the scalar level unpacks them to
// rows, the SIMD levels read them in place (matmul_bf16p_cols), summing in another order. Both are
// held to a double reference within f32 rounding of the sum of |products|, on shapes with row tails
// of every tile height, odd K, K past one 256-k block (odd tail in the last block), partial panels,
// and more rows than one 240-row block.
TEST(Bf16Panels, MatmulMatchesDoubleReferenceOnEveryIsa) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  struct Shape {
    int64_t M, K, N;
  };
  std::vector<Shape> shapes;
  for (int64_t M : {1, 3, 8, 17, 40})
    for (int64_t K : {0, 1, 31, 64, 100})
      for (int64_t N : {1, 16, 17, 50}) shapes.push_back({M, K, N});
  shapes.push_back({13, 513, 33});
  shapes.push_back({251, 600, 40});
  shapes.push_back({241, 256, 16});
  for (const std::string& isa : test::all_isa_levels()) {
    // Levels with a bf16 GEMM (AMX, AVX512-BF16, AArch64 BF16, their *-all-rows hooks) run the
    // panels on it with x rounded to bf16: bf16_gemm_test.cpp holds them to that contract.
    if (!force_isa(isa) || bf16_blocks_supported(std::numeric_limits<int64_t>::max())) continue;
    for (const auto& [M, K, N] : shapes) {
      const auto w = random_bf16(size_t(N * K), rng);
      std::vector<uint16_t> packed(bf16_panel_bytes(N, K) / 2);
      pack_bf16_panels(w.data(), N, K, packed.data());
      std::uniform_real_distribution<float> d(-1.f, 1.f);
      std::vector<float> x(static_cast<size_t>(M * K)), bias(static_cast<size_t>(N));
      for (auto& v : x) v = d(rng);
      for (auto& v : bias) v = d(rng);
      std::vector<float> got(static_cast<size_t>(M * N), -7.f);
      matmul_bf16_panels(pool, x.data(), M, K, packed.data(), N, bias.data(), got.data());
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = bias[size_t(n)], mag = std::abs(want);
          for (int64_t k = 0; k < K; ++k) {
            const double p = double(x[size_t(m * K + k)]) * bf16_to_f32(w[size_t(n * K + k)]);
            want += p;
            mag += std::abs(p);
          }
          // f32 rounding of up to 600 terms stays far below this; a term dropped or counted
          // twice (~mag / K) does not.
          ASSERT_NEAR(got[size_t(m * N + n)], want, 4e-6 * mag + 1e-6)
              << isa << " M=" << M << " K=" << K << " N=" << N << " m=" << m << " n=" << n;
        }
    }
  }
  force_isa("best");
}

}  // namespace
}  // namespace edgevl::cpu
