// The vision tower's SelfAttention under the bf16 contract on levels without a fused bf16
// attention kernel (run_self_attention's matmul form: K and V^T rounded to bf16 and packed as
// bf16p panels, Q and P in f32). Held to double-precision attention on the same bf16-rounded K
// and V, so the only differences left are f32 sums and the SIMD exp (~1e-6 on outputs of
// weighted means of |v| <= 1): 1e-4 still fails for a key or a dimension out of place, a lost
// padding zero, or K scaled by 1 %.
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

TEST(SelfAttentionMatmuls, Bf16ContractMatchesDoubleOnEveryLevel) {
  // m: one row, a row short of a 16-key panel, a query block boundary (256) and two blocks;
  // head_dim 40 pads K's panels to 64 columns and V^T to 48 rows; 4 / 2 heads share KV heads.
  const std::vector<Case> cases = {
      {1, 2, 2, 64}, {15, 2, 2, 64}, {257, 4, 2, 64}, {300, 3, 3, 40}, {33, 2, 1, 16}};
  cpu::ThreadPool pool(2);
  int ran = 0;
  for (const std::string& isa : test::all_isa_levels()) {
    // Levels with a bf16 GEMM round Q and P to bf16 as well (the AMX / AVX512-BF16 contract,
    // self_attention_test.cpp); here the levels that keep them in f32.
    if (!cpu::force_isa(isa) || cpu::bf16_blocks_supported(std::numeric_limits<int64_t>::max()))
      continue;
    for (const Case& c : cases) {
      if (cpu::has_self_attention_bf16(c.head_dim)) continue;  // the fused kernel's own tests
      ++ran;
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
      op.set(AttentionAttrs{c.n_heads, c.n_kv_heads, c.head_dim, scale, AttentionPrecision::kBf16});
      std::vector<float> y(size_t(c.m * qc), NAN);
      run_self_attention(pool, op, {q.data(), k.data(), v.data(), qc, kc, c.m, y.data(), nullptr},
                         nullptr);
      const int group = c.n_heads / c.n_kv_heads;
      for (int h = 0; h < c.n_heads; ++h)
        for (int64_t i = 0; i < c.m; ++i) {
          const int64_t kvh = h / group;
          std::vector<double> s(size_t(c.m));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < c.m; ++j) {
            double acc = 0;
            for (int64_t e = 0; e < hd; ++e)
              acc += double(q[size_t(i * qc + h * hd + e)]) *
                     bf16_to_f32(f32_to_bf16(k[size_t(j * kc + kvh * hd + e)]));
            s[size_t(j)] = acc * scale;
            mx = std::max(mx, s[size_t(j)]);
          }
          std::vector<double> out(size_t(hd), 0.0);
          for (int64_t j = 0; j < c.m; ++j) {
            const double e = std::exp(s[size_t(j)] - mx);
            sum += e;
            for (int64_t t = 0; t < hd; ++t)
              out[size_t(t)] += e * bf16_to_f32(f32_to_bf16(v[size_t(j * kc + kvh * hd + t)]));
          }
          for (int64_t t = 0; t < hd; ++t)
            ASSERT_NEAR(y[size_t(i * qc + h * hd + t)], out[size_t(t)] / sum, 1e-4)
                << isa << " m=" << c.m << " hd=" << hd << " head " << h << " row " << i << " dim "
                << t;
        }
    }
  }
  cpu::force_isa("best");
  if (ran == 0) GTEST_SKIP() << "every level here has a bf16 GEMM or fused bf16 attention";
}

}  // namespace
}  // namespace edgevl
