// The vision tower's SelfAttention in its matmul forms (run_self_attention without a fused
// kernel): under the bf16 contract (K and V^T rounded to bf16 and packed as bf16p panels, Q and
// P in f32) and in f32. Held to double-precision attention on the same K and V (bf16-rounded for
// the first), so the only differences left are f32 sums and the SIMD exp (~1e-6 on outputs of
// weighted means of |v| <= 1): the tolerances still fail for a key or a dimension out of place,
// a lost padding zero, or K scaled by 1 %.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "runtime/execution/self_attention.h"
#include "support/isa_params.h"

namespace edgevl {
namespace {

struct Case {
  int64_t m;
  int n_heads, n_kv_heads, head_dim;
};

// m: one row, a row short of a 16-key panel, a query block boundary (256) and two blocks;
// head_dim 40 pads K's panels to 64 columns and V^T to 48 rows; 4 / 2 heads share KV heads.
const std::vector<Case> kCases = {
    {1, 2, 2, 64}, {15, 2, 2, 64}, {257, 4, 2, 64}, {300, 3, 3, 40}, {33, 2, 1, 16}};

// Runs the op at `precision` on random q, k, v and holds every output to double-precision
// attention on K and V rounded by `kv` (identity for f32) within `tol`.
void check_case(cpu::ThreadPool& pool, const Case& c, AttentionPrecision precision,
                float (*kv)(float), double tol, const std::string& isa) {
  const int64_t hd = c.head_dim, qc = c.n_heads * hd, kc = c.n_kv_heads * hd;
  std::mt19937 rng(uint32_t(7 + c.m));
  std::uniform_real_distribution<float> d(-2.f, 2.f), dv(-1.f, 1.f);
  std::vector<float> q(size_t(c.m * qc)), k(size_t(c.m * kc)), v(size_t(c.m * kc));
  for (auto& x : q) x = d(rng);
  for (auto& x : k) x = d(rng);
  for (auto& x : v) x = dv(rng);
  Op op;
  op.type = OpType::SelfAttention;
  const float scale = 1.f / std::sqrt(float(hd));
  op.set(AttentionAttrs{c.n_heads, c.n_kv_heads, c.head_dim, scale, precision});
  std::vector<float> y(size_t(c.m * qc), NAN);
  run_self_attention(pool, op, {q.data(), k.data(), v.data(), qc, kc, c.m, y.data(), nullptr});
  const int group = c.n_heads / c.n_kv_heads;
  for (int h = 0; h < c.n_heads; ++h)
    for (int64_t i = 0; i < c.m; ++i) {
      const int64_t kvh = h / group;
      std::vector<double> s(size_t(c.m));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < c.m; ++j) {
        double acc = 0;
        for (int64_t e = 0; e < hd; ++e)
          acc += double(q[size_t(i * qc + h * hd + e)]) * kv(k[size_t(j * kc + kvh * hd + e)]);
        s[size_t(j)] = acc * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      std::vector<double> out(size_t(hd), 0.0);
      for (int64_t j = 0; j < c.m; ++j) {
        const double e = std::exp(s[size_t(j)] - mx);
        sum += e;
        for (int64_t t = 0; t < hd; ++t) out[size_t(t)] += e * kv(v[size_t(j * kc + kvh * hd + t)]);
      }
      for (int64_t t = 0; t < hd; ++t)
        ASSERT_NEAR(y[size_t(i * qc + h * hd + t)], out[size_t(t)] / sum, tol)
            << isa << " m=" << c.m << " hd=" << hd << " head " << h << " row " << i << " dim " << t;
    }
}

float round_bf16(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}
float exact(float x) {
  return x;
}

TEST(SelfAttentionMatmuls, Bf16ContractMatchesDoubleOnEveryLevel) {
  cpu::ThreadPool pool(2);
  int ran = 0;
  for (const std::string& isa : test::all_isa_levels()) {
    // Levels with a bf16 GEMM round Q and P to bf16 as well (the AMX / AVX512-BF16 contract,
    // self_attention_test.cpp); here the levels that keep them in f32.
    if (!cpu::force_isa(isa) || cpu::bf16_blocks_supported(std::numeric_limits<int64_t>::max()))
      continue;
    for (const Case& c : kCases) {
      if (cpu::has_self_attention_bf16(c.head_dim)) continue;  // the fused kernel's own tests
      ++ran;
      check_case(pool, c, AttentionPrecision::kBf16, round_bf16, 1e-4, isa);
    }
  }
  cpu::force_isa("best");
  if (ran == 0) GTEST_SKIP() << "every level here has a bf16 GEMM or fused bf16 attention";
}

// f32 towers (and f16 towers without the split kernel): f32 throughout, so within f32 sums
// and the SIMD exp of double attention on the exact K and V.
TEST(SelfAttentionMatmuls, F32MatchesDoubleOnEveryLevel) {
  cpu::ThreadPool pool(2);
  for (const std::string& isa : test::all_isa_levels()) {
    if (!cpu::force_isa(isa)) continue;
    for (const Case& c : kCases) check_case(pool, c, AttentionPrecision::kF32, exact, 2e-5, isa);
  }
  cpu::force_isa("best");
}

}  // namespace
}  // namespace edgevl
