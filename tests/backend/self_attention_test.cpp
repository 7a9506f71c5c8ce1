// The fused AMX-BF16 full-attention kernel (attention_amx.cpp) against its scalar reference
// (same bf16 contract, std::exp) and against exact double-precision attention.
//
// Tolerances (why): kernel and reference round the same bf16 inputs; they differ by f32
// accumulation order and by the polynomial exp (< 3e-6 relative), which can move a bf16
// rounding of e by one unit (2^-8 relative) for a few keys. Output rows are weighted means of
// v (|v| <= 1), so 2e-3 absolute is ~10x the expected worst case and still fails for a wrong
// key, a dropped tile or a misplaced row. Against exact attention the bf16 rounding of q, k,
// v and e gives errors of ~1e-2 relative on the scores; 3e-2 absolute on outputs is allowed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"

namespace edgevl::cpu {
namespace {

struct Case {
  int64_t n;
  int hd;
  int64_t ldq, ldkv, ldo;
};

std::vector<float> random_vec(size_t n, std::mt19937& rng, float amp) {
  std::uniform_real_distribution<float> d(-amp, amp);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Exact attention in double (softmax(scale q k^T) v) for row i.
std::vector<double> exact_row(const Case& c, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v, float scale,
                              int64_t i) {
  std::vector<double> s(size_t(c.n)), out(size_t(c.hd), 0.0);
  double mx = -1e300, sum = 0;
  for (int64_t j = 0; j < c.n; ++j) {
    double acc = 0;
    for (int d = 0; d < c.hd; ++d) acc += double(q[i * c.ldq + d]) * k[j * c.ldkv + d];
    s[size_t(j)] = acc * scale;
    mx = std::max(mx, s[size_t(j)]);
  }
  for (int64_t j = 0; j < c.n; ++j) {
    const double e = std::exp(s[size_t(j)] - mx);
    sum += e;
    for (int d = 0; d < c.hd; ++d) out[size_t(d)] += e * v[j * c.ldkv + d];
  }
  for (auto& x : out) x /= sum;
  return out;
}

// Random q, k, v of one case: scores of a few units (amplitude 2 on q and k) so that the
// softmax is neither flat nor one-hot.
struct Inputs {
  std::vector<float> q, k, v;
  float scale;
};
Inputs random_inputs(const Case& c, std::mt19937& rng) {
  return {random_vec(size_t(c.n * c.ldq), rng, 2.f), random_vec(size_t(c.n * c.ldkv), rng, 2.f),
          random_vec(size_t(c.n * c.ldkv), rng, 1.f), 1.f / std::sqrt(float(c.hd))};
}

TEST(SelfAttentionBf16, MatchesReferenceOnAwkwardShapes) {
  if (!has_self_attention_bf16(64)) GTEST_SKIP() << "no AMX-BF16 attention kernel on this CPU";
  std::mt19937 rng(11);
  const std::vector<Case> cases = {
      {1, 64, 64, 64, 64},   {2, 32, 40, 33, 32},      {15, 64, 192, 192, 64},
      {16, 64, 64, 64, 64},  {17, 128, 130, 131, 128}, {31, 64, 100, 100, 70},
      {32, 32, 32, 32, 32},  {33, 64, 3 * 64, 64, 64}, {65, 96, 96, 97, 96},
      {40, 16, 16, 16, 16},  {33, 48, 3 * 48, 48, 48}, {100, 64, 1024, 1024, 1024},
      {257, 64, 64, 64, 64},
  };
  for (const Case& c : cases) {
    const auto [q, k, v, scale] = random_inputs(c, rng);
    std::vector<float> got(size_t(c.n * c.ldo), NAN), ref(size_t(c.n * c.ldo), NAN);
    ASSERT_TRUE(self_attention_head_bf16(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd,
                                         scale, got.data(), c.ldo));
    self_attention_head_bf16_ref(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd, scale,
                                 ref.data(), c.ldo);
    for (int64_t i = 0; i < c.n; ++i) {
      const std::vector<double> exact = exact_row(c, q, k, v, scale, i);
      for (int d = 0; d < c.hd; ++d) {
        const size_t at = size_t(i * c.ldo + d);
        ASSERT_NEAR(got[at], ref[at], 2e-3)
            << "n=" << c.n << " hd=" << c.hd << " row " << i << " dim " << d;
        ASSERT_NEAR(got[at], exact[size_t(d)], 3e-2) << "n=" << c.n << " row " << i;
      }
      // Columns between head_dim and the output stride are not written.
      for (int64_t d = c.hd; d < c.ldo && i + 1 < c.n; ++d)
        ASSERT_TRUE(std::isnan(got[size_t(i * c.ldo + d)]));
    }
  }
}

// The split (near-f32) form against exact attention: q, k, v and e carry 16 significant bits
// (errors < 2^-17 relative, random in sign). Measured worst output error 2.1e-6 (n = 257; the
// bf16 contract: 1.6e-3); 2e-5 absolute allows 10x that and still fails a lost lo product,
// which would leave errors of the bf16 order (checked on the largest case).
TEST(SelfAttentionSplit, MatchesExactAttentionOnAwkwardShapes) {
  if (!has_self_attention_split(64)) GTEST_SKIP() << "no split attention kernel (AMX) on this CPU";
  std::mt19937 rng(12);
  const std::vector<Case> cases = {
      {1, 64, 64, 64, 64},      {2, 32, 40, 33, 32},  {17, 128, 130, 131, 128},
      {33, 64, 3 * 64, 64, 64}, {65, 96, 96, 97, 96}, {40, 16, 16, 16, 16},
      {257, 64, 64, 64, 64},
  };
  for (const Case& c : cases) {
    const auto [q, k, v, scale] = random_inputs(c, rng);
    std::vector<float> got(size_t(c.n * c.ldo), NAN), bf16(size_t(c.n * c.ldo), NAN);
    ASSERT_TRUE(self_attention_head_split(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd,
                                          scale, got.data(), c.ldo));
    ASSERT_TRUE(self_attention_head_bf16(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd,
                                         scale, bf16.data(), c.ldo));
    double worst = 0, worst_bf16 = 0;
    for (int64_t i = 0; i < c.n; ++i) {
      const std::vector<double> exact = exact_row(c, q, k, v, scale, i);
      for (int d = 0; d < c.hd; ++d) {
        const size_t at = size_t(i * c.ldo + d);
        ASSERT_NEAR(got[at], exact[size_t(d)], 2e-5)
            << "n=" << c.n << " hd=" << c.hd << " row " << i << " dim " << d;
        worst = std::max(worst, std::fabs(got[at] - exact[size_t(d)]));
        worst_bf16 = std::max(worst_bf16, std::fabs(bf16[at] - exact[size_t(d)]));
      }
      for (int64_t d = c.hd; d < c.ldo && i + 1 < c.n; ++d)
        ASSERT_TRUE(std::isnan(got[size_t(i * c.ldo + d)]));
    }
    if (c.n == 257) {
      std::printf("  n=257: worst error split %.2e, bf16 %.2e\n", worst, worst_bf16);
      EXPECT_GT(worst_bf16, 2e-5);
    }
  }
}

TEST(SelfAttentionBf16, SharpSoftmaxPicksTheMatchingKey) {
  // One key aligned with each query and a large scale: the output must be that key's value
  // row (a wrong key order or transposition fails this at once).
  if (!has_self_attention_bf16(64)) GTEST_SKIP() << "no AMX-BF16 attention kernel on this CPU";
  const int64_t n = 40;
  const int hd = 64;
  std::vector<float> q(size_t(n * hd), 0.f), k(size_t(n * hd), 0.f), v(size_t(n * hd));
  for (int64_t i = 0; i < n; ++i) {
    q[size_t(i * hd + i % hd)] = 1.f;
    k[size_t(i * hd + i % hd)] = 1.f;
    for (int d = 0; d < hd; ++d) v[size_t(i * hd + d)] = float(i) + float(d) / 128.f;
  }
  std::vector<float> out(size_t(n * hd));
  ASSERT_TRUE(
      self_attention_head_bf16(q.data(), hd, k.data(), v.data(), hd, n, hd, 100.f, out.data(), hd));
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < hd; ++d)
      ASSERT_NEAR(out[size_t(i * hd + d)], float(i) + float(d) / 128.f, 0.02f * (1 + float(i)))
          << "row " << i << " dim " << d;
}

TEST(SelfAttentionBf16, BlockOutputIsTheRoundedRowOutput) {
  // Heads writing their columns of a bf16-block output (the o_proj input) must give what the
  // f32 output rounded by the matmul's own conversion gives: f32_to_bf16 of each value at its
  // block position, zero rows up to the 16-row group.
  if (!has_self_attention_bf16(64)) GTEST_SKIP() << "no AMX-BF16 attention kernel on this CPU";
  std::mt19937 rng(7);
  for (const auto& [n, hd, heads] :
       {std::tuple{37, 16, 4}, std::tuple{33, 64, 2}, std::tuple{70, 32, 3}}) {
    const int64_t width = int64_t(hd) * heads, ld = (width + 31) / 32 * 32;
    const int64_t rows_p = (n + 15) / 16 * 16;
    auto q = random_vec(size_t(n * width), rng, 2.f);
    auto k = random_vec(size_t(n * width), rng, 2.f);
    auto v = random_vec(size_t(n * width), rng, 1.f);
    std::vector<float> out(size_t(n * width));
    std::vector<uint16_t> raw(size_t(rows_p * ld + 32), 0xFFFF);
    auto* blocks = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(raw.data()) + 63) &
                                               ~uintptr_t(63));
    for (int h = 0; h < heads; ++h) {
      const int64_t c = int64_t(h) * hd;
      ASSERT_TRUE(self_attention_head_bf16(q.data() + c, width, k.data() + c, v.data() + c, width,
                                           n, hd, 0.125f, out.data() + c, width));
      ASSERT_TRUE(self_attention_head_bf16(q.data() + c, width, k.data() + c, v.data() + c, width,
                                           n, hd, 0.125f, nullptr, 0, blocks, ld, c));
    }
    for (int64_t m = 0; m < rows_p; ++m)
      for (int64_t c = 0; c < width; ++c) {
        const uint16_t got = blocks[(m / 16) * 16 * ld + (c / 32) * 512 + (m % 16) * 32 + c % 32];
        const uint16_t want = m < n ? f32_to_bf16(out[size_t(m * width + c)]) : uint16_t(0);
        ASSERT_EQ(got, want) << "n=" << n << " hd=" << hd << " row " << m << " col " << c;
      }
  }
}

// Every level with the kernel (AMX-BF16 tiles, AVX512-BF16 VDPBF16PS) forced in turn: every n
// from 1 to 40 (the 8-row register tiles and 32-row query blocks of the VDPBF16PS kernel, the
// 16 / 32 tiles of AMX, ragged in both), 1025 (the InternViT tile) and head_dim 16..128, each
// against the scalar reference; the block output against the row output rounded.
TEST(SelfAttentionBf16, EveryLevelMatchesReference) {
  int levels = 0;
  for (const char* level : {"amx", "avx512-bf16"}) {
    if (!force_isa(level)) continue;
    ++levels;
    std::mt19937 rng(13);
    std::vector<Case> cases;
    for (int64_t n = 1; n <= 40; ++n) {
      const int hd = 16 * int(1 + n % 8);  // 16..128
      cases.push_back({n, hd, 3 * hd, 3 * hd + 1, hd + 5});
    }
    cases.push_back({1025, 64, 3 * 64, 3 * 64, 64});
    cases.push_back({1025, 16, 16, 16, 16});
    cases.push_back({77, 128, 128, 128, 128});
    for (const Case& c : cases) {
      ASSERT_TRUE(has_self_attention_bf16(c.hd)) << level;
      const auto [q, k, v, scale] = random_inputs(c, rng);
      std::vector<float> got(size_t(c.n * c.ldo), NAN), ref(size_t(c.n * c.ldo), NAN);
      ASSERT_TRUE(self_attention_head_bf16(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd,
                                           scale, got.data(), c.ldo));
      self_attention_head_bf16_ref(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd, scale,
                                   ref.data(), c.ldo);
      // One key's e rounded the other way (2^-8 relative) moves an output by up to 2^-8 times
      // its weight e / sum times |v - out| <= 2: with a few keys each weighs up to 1.
      const double tol = c.n < 32 ? 8e-3 : 2e-3;
      double worst = 0;
      for (int64_t i = 0; i < c.n; ++i) {
        const std::vector<double> exact = exact_row(c, q, k, v, scale, i);
        for (int d = 0; d < c.hd; ++d) {
          const size_t at = size_t(i * c.ldo + d);
          worst = std::max(worst, double(std::fabs(got[at] - ref[at])));
          ASSERT_NEAR(got[at], ref[at], tol)
              << level << " n=" << c.n << " hd=" << c.hd << " row " << i << " dim " << d;
          ASSERT_NEAR(got[at], exact[size_t(d)], 3e-2) << level << " n=" << c.n << " row " << i;
        }
        for (int64_t d = c.hd; d < c.ldo && i + 1 < c.n; ++d)
          ASSERT_TRUE(std::isnan(got[size_t(i * c.ldo + d)])) << level << " n=" << c.n;
      }
      if (c.n < 8 || c.n >= 1025)
        std::printf("  %s n=%lld hd=%d: worst |kernel - ref| %.2e\n", level, (long long)c.n, c.hd,
                    worst);
      // The same head as bf16 blocks (columns 32.. of a 32 + hd + 32 wide output).
      const int64_t ld = (32 + c.hd + 32 + 31) / 32 * 32, rows_p = (c.n + 15) / 16 * 16;
      std::vector<uint16_t> raw(size_t(rows_p * ld + 32), 0xFFFF);
      auto* blocks = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(raw.data()) + 63) &
                                                 ~uintptr_t(63));
      ASSERT_TRUE(self_attention_head_bf16(q.data(), c.ldq, k.data(), v.data(), c.ldkv, c.n, c.hd,
                                           scale, nullptr, 0, blocks, ld, 32));
      for (int64_t m = 0; m < rows_p; ++m)
        for (int64_t col = 0; col < ld; ++col) {
          const uint16_t b =
              blocks[(m / 16) * 16 * ld + (col / 32) * 512 + (m % 16) * 32 + col % 32];
          const bool mine = col >= 32 && col < 32 + c.hd;
          const uint16_t want = !mine     ? uint16_t(0xFFFF)
                                : m < c.n ? f32_to_bf16(got[size_t(m * c.ldo + col - 32)])
                                          : uint16_t(0);
          ASSERT_EQ(b, want) << level << " n=" << c.n << " hd=" << c.hd << " row " << m << " col "
                             << col;
        }
    }
  }
  force_isa("best");
  if (levels == 0) GTEST_SKIP() << "no bf16 attention kernel (AMX-BF16, AVX512-BF16) on this CPU";
}

TEST(SelfAttentionBf16, DeclinesUnsupportedHeadDims) {
  float x = 0;
  EXPECT_FALSE(has_self_attention_bf16(40));
  EXPECT_FALSE(self_attention_head_bf16(&x, 40, &x, &x, 40, 1, 40, 1.f, &x, 40));
}

}  // namespace
}  // namespace edgevl::cpu
