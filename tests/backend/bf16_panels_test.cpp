// The bf16p weight layout (bf16_panels.h): packing is the documented index formula with zero
// padding, unpacking inverts it, and a matmul on packed weights gives exactly what the same
// ISA level gives on the row-major bf16 weights (on AMX the kernel repacks rows into this very
// layout, elsewhere the panels are unpacked to rows), for awkward shapes.
#include <gtest/gtest.h>

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

TEST(Bf16Panels, MatmulEqualsRowMajorBf16OnEveryIsa) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  for (const std::string& isa : test::all_isa_levels()) {
    // "amx" and "avx512-bf16" run bf16 panels on their bf16 GEMM from one row but bf16 rows only
    // from a threshold: the two agree on the levels that take one path for both (every other
    // level, and the *-all-rows test hooks).
    if (isa == "amx" || isa == "avx512-bf16" || !force_isa(isa)) continue;
    for (int64_t M : {1, 3, 8, 17, 40})
      for (int64_t K : {1, 31, 64, 100})
        for (int64_t N : {1, 16, 17, 50}) {
          const auto w = random_bf16(size_t(N * K), rng);
          std::vector<uint16_t> packed(bf16_panel_bytes(N, K) / 2);
          pack_bf16_panels(w.data(), N, K, packed.data());
          std::uniform_real_distribution<float> d(-1.f, 1.f);
          std::vector<float> x(static_cast<size_t>(M * K)), bias(static_cast<size_t>(N));
          for (auto& v : x) v = d(rng);
          for (auto& v : bias) v = d(rng);
          std::vector<float> want(static_cast<size_t>(M * N)), got(static_cast<size_t>(M * N));
          matmul(pool, x.data(), M, K, w.data(), DType::BF16, N, bias.data(), want.data());
          matmul_bf16_panels(pool, x.data(), M, K, packed.data(), N, bias.data(), got.data());
          ASSERT_EQ(got, want) << isa << " M=" << M << " K=" << K << " N=" << N;
        }
  }
  force_isa("best");
}

}  // namespace
}  // namespace edgevl::cpu
