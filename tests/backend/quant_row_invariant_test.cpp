// Row invariance of the quantized matmuls (quant.h, row_invariant): batched decode runs B
// sequences' rows through one call and promises each row the bits it gets alone (M = 1). At
// every ISA level the CPU runs, for M = 1..16 (every register-tile remainder of the A8 kernels
// and of the A16 direct kernel at any M, which row_invariant extends past its 4 rows), on
// awkward shapes (K not a multiple of 4 / 64 / the group, N not a multiple of 16, N < 16):
// - each row of the M-row call equals the M = 1 call on that row, bit for bit;
// - A8 equals the scalar reference bit for bit (the integer definition, quant.h); A16 (float
//   FMA, order per ISA) stays within 1e-5 of sum |x * w| of a double oracle on the unpacked
//   weights, like the A16 checks of quant_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "support/isa_params.h"

namespace edgevl::cpu {
namespace {

struct Shape {
  int64_t K, N;
};
// K: below one Q8 block, odd, a Q4 group tail, the Qwen2-0.5B hidden size; N: below a panel,
// a panel tail, several panels plus a tail.
constexpr Shape kShapes[] = {{3, 5}, {37, 17}, {100, 45}, {131, 129}, {896, 40}};

struct Weight {
  std::string name;
  std::vector<uint8_t> packed;
  std::vector<float> deq;  // the unpacked weights, [N][K]
  // y[M][N] = x W^T (+ bias) through matmul_q8 / matmul_q4.
  std::function<void(ThreadPool&, const float*, int64_t, const float*, float*, bool a8,
                     bool row_invariant)>
      call;
};

std::vector<float> random_vec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<Weight> weights_for(const Shape& s, std::mt19937& rng) {
  const int64_t K = s.K, N = s.N;
  auto w = random_vec(size_t(N * K), rng);
  for (int64_t n = 0; n < N; ++n)  // rows of different magnitudes
    for (int64_t k = 0; k < K; ++k) w[size_t(n * K + k)] *= float(1 + n % 7);
  std::vector<Weight> out;
  {
    Weight q;
    q.name = "q8";
    q.packed.resize(q8_packed_bytes(N, K));
    q8_pack(w.data(), N, K, q.packed.data());
    q.deq.resize(w.size());
    q8_unpack(q.packed.data(), N, K, q.deq.data());
    const uint8_t* p = q.packed.data();
    q.call = [=](ThreadPool& pool, const float* x, int64_t M, const float* b, float* y, bool a8,
                 bool inv) { matmul_q8(pool, x, M, K, p, N, b, y, a8, inv); };
    out.push_back(std::move(q));
  }
  for (int group : {32, 128})
    for (bool zp : {false, true}) {
      Weight q;
      q.name = "q4 g" + std::to_string(group) + (zp ? " zp" : "");
      q.packed.resize(q4_packed_bytes(N, K, group, zp));
      q4_pack(w.data(), N, K, group, zp, q.packed.data());
      q.deq.resize(w.size());
      q4_unpack(q.packed.data(), N, K, group, zp, q.deq.data());
      const uint8_t* p = q.packed.data();
      q.call = [=](ThreadPool& pool, const float* x, int64_t M, const float* b, float* y, bool a8,
                   bool inv) {
        // fast_prefill stays on: row_invariant must keep the call off the prefill route.
        matmul_q4(pool, x, M, K, p, N, group, zp, b, y, a8, /*fast_prefill=*/true, inv);
      };
      out.push_back(std::move(q));
    }
  return out;
}

class QuantRowInvariant : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!force_isa(GetParam())) GTEST_SKIP() << "this CPU does not run " << GetParam();
  }
  void TearDown() override { force_isa("best"); }
};

TEST_P(QuantRowInvariant, EachRowAsAlone) {
  std::mt19937 rng(21);
  ThreadPool pool(2);
  for (const Shape& s : kShapes) {
    const int64_t K = s.K, N = s.N;
    for (Weight& w : weights_for(s, rng)) {
      const auto bias = random_vec(size_t(N), rng);
      for (int64_t M = 1; M <= 16; ++M) {
        const auto x = random_vec(size_t(M * K), rng);
        const float* b = M % 2 ? bias.data() : nullptr;
        for (bool a8 : {true, false}) {
          const std::string what = GetParam() + " " + w.name + (a8 ? " a8" : " a16") +
                                   " M=" + std::to_string(M) + " K=" + std::to_string(K) +
                                   " N=" + std::to_string(N);
          std::vector<float> y(size_t(M * N)), one(static_cast<size_t>(N)), ref(size_t(M * N));
          w.call(pool, x.data(), M, b, y.data(), a8, true);
          for (int64_t m = 0; m < M; ++m) {
            w.call(pool, x.data() + m * K, 1, b, one.data(), a8, false);
            ASSERT_EQ(std::memcmp(one.data(), y.data() + m * N, size_t(N) * 4), 0)
                << what << ": row " << m << " differs from the row alone";
          }
          if (a8) {  // the integer definition: the scalar reference's bits
            ASSERT_TRUE(force_isa("scalar"));
            w.call(pool, x.data(), M, b, ref.data(), a8, false);
            ASSERT_TRUE(force_isa(GetParam()));
            ASSERT_EQ(std::memcmp(ref.data(), y.data(), y.size() * 4), 0)
                << what << ": differs from the scalar reference";
            continue;
          }
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double r = b ? b[n] : 0.0, mag = std::fabs(r);
              for (int64_t k = 0; k < K; ++k) {
                const double t = double(x[size_t(m * K + k)]) * w.deq[size_t(n * K + k)];
                r += t;
                mag += std::fabs(t);
              }
              ASSERT_NEAR(y[size_t(m * N + n)], r, 1e-5 * mag + 1e-6)
                  << what << " at (" << m << ", " << n << ")";
            }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantRowInvariant, ::testing::ValuesIn(test::all_isa_levels()),
                         test::isa_param_name);

}  // namespace
}  // namespace edgevl::cpu
