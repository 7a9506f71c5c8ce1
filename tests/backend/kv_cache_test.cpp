// The int8 KV cache (core/kv_layout.h): the quantizer's round-trip error bound and layout, and
// attention over q8 caches on every ISA level against the scalar reference and a double oracle
// on the dequantized cache, on awkward shapes (head_dim 64/80/128, 1/17/300 keys, GQA ratios,
// 1 and 3 KV heads, tails of the 4-key and 64-key blocks).
//
// Tolerances (why): attention over q8 computes dot(q, k_int) * scale where the oracle computes
// dot(q, k_int * scale) in double; both are float dot products of <= 128 terms with |q| <= 2,
// |k| <= 3, so a few 1e-6 absolute on outputs in [-1, 1] (the f16 test allows 2e-6); we allow
// 5e-6, which still fails on a wrong row scale (>= 1/127 relative) or a dropped key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "support/isa_params.h"

namespace edgevl::cpu {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> q8_cache(const KvLayout& lay) {
  return std::vector<uint8_t>(lay.cache_bytes(), 0xa5);  // garbage past what kv_store writes
}

// The first n_kv tokens of every KV head of q8 K and V caches as f32 rows (what the oracle
// attends over).
void heads_to_f32(const std::vector<uint8_t>& kc, const std::vector<uint8_t>& vc, int n_kv_heads,
                  int hd, int64_t cap, int64_t n_kv, std::vector<std::vector<float>>* kh,
                  std::vector<std::vector<float>>* vh) {
  for (int h = 0; h < n_kv_heads; ++h) {
    kh->emplace_back(size_t(n_kv * hd));
    vh->emplace_back(size_t(n_kv * hd));
    kv_head_to_f32(kc.data(), DType::Q8, n_kv_heads, hd, cap, h, n_kv, kh->back().data());
    kv_head_to_f32(vc.data(), DType::Q8, n_kv_heads, hd, cap, h, n_kv, vh->back().data());
  }
}

TEST(KvLayout, Bytes) {
  // qwen2-0.5b at 4096 tokens, one cache: 2 heads x 4096 x 64.
  const KvLayout f16{DType::F16, 2, 64, 4096}, q8{DType::Q8, 2, 64, 4096};
  EXPECT_EQ(f16.cache_bytes(), 2u * 4096 * 64 * 2);
  EXPECT_EQ(q8.scale_offset(), 2u * 4096 * 64);
  EXPECT_EQ(q8.cache_bytes(), 2u * 4096 * 64 + 2u * 4096 * 4);
  EXPECT_DOUBLE_EQ(q8.token_bytes(), 2 * (64 + 4));
  const KvLayout odd{DType::Q8, 3, 80, 17};  // data block not a multiple of 64
  EXPECT_EQ(odd.scale_offset() % 64, 0u);
  EXPECT_GE(odd.scale_offset(), 3u * 17 * 80);
  EXPECT_EQ(odd.cache_bytes() % 64, 0u);
  EXPECT_GE(odd.cache_bytes(), odd.scale_offset() + 3u * 17 * 4);
  EXPECT_TRUE(kv_type_supported(DType::Q8));
  EXPECT_FALSE(kv_type_supported(DType::Q4));
}

// Symmetric per-row int8: scale = max|x| / 127, every element within scale / 2 of its value,
// the largest element exactly representable, an all-zero row exactly zero.
TEST(KvQuant, RoundTripErrorBound) {
  std::mt19937 rng(11);
  ThreadPool pool(1);
  const int n_kv_heads = 3;
  for (int hd : {64, 80, 128}) {
    const int64_t n = 37, cap = 50, pos0 = 5;
    std::vector<float> k = random_vec(size_t(n * n_kv_heads * hd), rng, -3.f, 3.f);
    std::vector<float> v = random_vec(size_t(n * n_kv_heads * hd), rng, -1.f, 1.f);
    // Rows with very different magnitudes, one all zero, one with a single nonzero.
    for (int d = 0; d < hd; ++d) {
      k[size_t(1 * hd + d)] *= 1e-6f;
      k[size_t(4 * hd + d)] *= 1e4f;
      k[size_t(2 * hd + d)] = 0.f;
      v[size_t(7 * hd + d)] = d == 3 ? -0.25f : 0.f;
    }
    const KvLayout lay{DType::Q8, n_kv_heads, hd, cap};
    auto kc = q8_cache(lay), vc = q8_cache(lay);
    kv_store(k.data(), v.data(), n, n_kv_heads, hd, pos0, kc.data(), vc.data(), DType::Q8, cap);
    for (const auto* pair : {&k, &v}) {
      const std::vector<float>& x = *pair;
      const std::vector<uint8_t>& cache = pair == &k ? kc : vc;
      const float* scales = lay.scales(cache.data());
      for (int h = 0; h < n_kv_heads; ++h) {
        std::vector<float> deq(size_t(cap * hd));
        kv_head_to_f32(cache.data(), DType::Q8, n_kv_heads, hd, cap, h, cap, deq.data());
        for (int64_t t = 0; t < n; ++t) {
          const float* src = x.data() + (t * n_kv_heads + h) * hd;
          float amax = 0.f;
          for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(src[d]));
          const float scale = scales[h * cap + pos0 + t];
          ASSERT_FLOAT_EQ(scale, amax / 127.f) << "hd=" << hd << " t=" << t << " h=" << h;
          for (int d = 0; d < hd; ++d) {
            const float got = deq[size_t((pos0 + t) * hd + d)];
            ASSERT_LE(std::fabs(got - src[d]), 0.5f * scale * (1 + 1e-5f))
                << "hd=" << hd << " t=" << t << " h=" << h << " d=" << d;
            if (std::fabs(src[d]) == amax) {
              ASSERT_NEAR(std::fabs(got), amax, amax * 1e-6f);
            }
            if (amax == 0.f) {
              ASSERT_EQ(got, 0.f);
            }
          }
        }
      }
    }
  }
}

class KvIsaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!force_isa(GetParam())) GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  void TearDown() override { force_isa("best"); }
};

// The SIMD dequantization of cache rows matches the scalar one exactly (one multiply each).
TEST_P(KvIsaTest, HeadToF32MatchesScalar) {
  std::mt19937 rng(12);
  for (int hd : {64, 80, 128, 7}) {
    const int n_kv_heads = 2;
    const int64_t cap = 33;
    const auto k = random_vec(size_t(cap * n_kv_heads * hd), rng, -2.f, 2.f);
    for (DType t : {DType::Q8, DType::F16, DType::F32}) {
      const KvLayout lay{t, n_kv_heads, hd, cap};
      std::vector<uint8_t> kc(lay.cache_bytes()), vc(lay.cache_bytes());
      kv_store(k.data(), k.data(), cap, n_kv_heads, hd, 0, kc.data(), vc.data(), t, cap);
      for (int64_t n : {int64_t(1), int64_t(17), cap}) {
        std::vector<float> a(size_t(n * hd), NAN), b(size_t(n * hd), NAN);
        kv_head_to_f32(kc.data(), t, n_kv_heads, hd, cap, 1, n, a.data());
        ASSERT_TRUE(force_isa("scalar"));
        kv_head_to_f32(kc.data(), t, n_kv_heads, hd, cap, 1, n, b.data());
        ASSERT_TRUE(force_isa(GetParam()));
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4))
            << dtype_name(t) << " hd=" << hd << " n=" << n;
      }
    }
  }
}

void oracle_attention(const std::vector<float>& q, int64_t n_q, int n_heads, int hd,
                      const std::vector<std::vector<float>>& kh,
                      const std::vector<std::vector<float>>& vh, int n_kv_heads, int64_t n_kv,
                      const int32_t* q_pos, float scale, std::vector<double>* out) {
  out->assign(size_t(n_q * n_heads * hd), 0.0);
  const int group = n_heads / n_kv_heads;
  for (int64_t i = 0; i < n_q; ++i)
    for (int h = 0; h < n_heads; ++h) {
      const int64_t nk = q_pos ? std::min<int64_t>(q_pos[i] + 1, n_kv) : n_kv;
      if (nk <= 0) continue;
      const auto& kr = kh[size_t(h / group)];
      const auto& vr = vh[size_t(h / group)];
      std::vector<double> s(static_cast<size_t>(nk));
      double mx = -1e300;
      for (int64_t j = 0; j < nk; ++j) {
        double d = 0;
        for (int e = 0; e < hd; ++e)
          d += double(q[size_t((i * n_heads + h) * hd + e)]) * kr[size_t(j * hd + e)];
        s[size_t(j)] = d * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double l = 0;
      for (auto& x : s) l += (x = std::exp(x - mx));
      for (int64_t j = 0; j < nk; ++j)
        for (int e = 0; e < hd; ++e)
          (*out)[size_t((i * n_heads + h) * hd + e)] += s[size_t(j)] / l * vr[size_t(j * hd + e)];
    }
}

TEST_P(KvIsaTest, AttentionQ8MatchesScalarAndOracle) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  for (int n_kv_heads : {1, 3})
    for (int hd : {64, 80, 128})
      for (int ratio : {1, 2, 7})
        for (int64_t n_kv : {1, 17, 300})
          for (bool causal : {true, false}) {
            const int n_heads = n_kv_heads * ratio;
            const int64_t n_q = causal ? std::min<int64_t>(5, n_kv) : 2, cap = n_kv + 9;
            const auto q = random_vec(size_t(n_q * n_heads * hd), rng, -2.f, 2.f);
            const auto k = random_vec(size_t(n_kv * n_kv_heads * hd), rng, -3.f, 3.f);
            const auto v = random_vec(size_t(n_kv * n_kv_heads * hd), rng, -1.f, 1.f);
            const KvLayout lay{DType::Q8, n_kv_heads, hd, cap};
            auto kc = q8_cache(lay), vc = q8_cache(lay);
            // Two stores (prefill chunk then decode-like rows) into the same caches.
            const int64_t first = n_kv / 2;
            kv_store(k.data(), v.data(), first, n_kv_heads, hd, 0, kc.data(), vc.data(), DType::Q8,
                     cap);
            kv_store(k.data() + first * n_kv_heads * hd, v.data() + first * n_kv_heads * hd,
                     n_kv - first, n_kv_heads, hd, first, kc.data(), vc.data(), DType::Q8, cap);
            std::vector<std::vector<float>> kh, vh;
            heads_to_f32(kc, vc, n_kv_heads, hd, cap, n_kv, &kh, &vh);
            std::vector<int32_t> pos(static_cast<size_t>(n_q));
            for (int64_t i = 0; i < n_q; ++i) pos[size_t(i)] = int32_t(n_kv - n_q + i);
            const int32_t* qp = causal ? pos.data() : nullptr;
            const float scale = 1.f / std::sqrt(float(hd));
            std::vector<float> out(q.size(), NAN), outs(q.size(), NAN);
            attention(pool, q.data(), n_q, n_heads, hd, kc.data(), vc.data(), DType::Q8, n_kv_heads,
                      cap, n_kv, qp, scale, out.data());
            ASSERT_TRUE(force_isa("scalar"));
            attention(pool, q.data(), n_q, n_heads, hd, kc.data(), vc.data(), DType::Q8, n_kv_heads,
                      cap, n_kv, qp, scale, outs.data());
            ASSERT_TRUE(force_isa(GetParam()));
            std::vector<double> ref;
            oracle_attention(q, n_q, n_heads, hd, kh, vh, n_kv_heads, n_kv, qp, scale, &ref);
            for (size_t e = 0; e < ref.size(); ++e) {
              ASSERT_NEAR(out[e], ref[e], 5e-6)
                  << "kv_heads=" << n_kv_heads << " hd=" << hd << " ratio=" << ratio
                  << " n_kv=" << n_kv << " causal=" << causal << " e=" << e;
              ASSERT_NEAR(outs[e], out[e], 5e-6) << "scalar vs " << GetParam() << " hd=" << hd;
            }
          }
}

// Decode over a long q8 cache: the key ranges split over the pool (and their merge) apply
// each row's K scale to its score and V scale to its weight like the unsplit scalar path.
TEST_P(KvIsaTest, AttentionQ8DecodeLongContext) {
  std::mt19937 rng(15);
  const int n_kv_heads = 2, hd = 64;
  const int64_t n_kv = 2500, cap = 2600;
  for (int threads : {1, 2, 3})
    for (int ratio : {3, 7}) {
      ThreadPool pool(threads);
      const int n_heads = n_kv_heads * ratio;
      const auto q = random_vec(size_t(n_heads * hd), rng, -2.f, 2.f);
      const auto k = random_vec(size_t(n_kv * n_kv_heads * hd), rng, -3.f, 3.f);
      const auto v = random_vec(size_t(n_kv * n_kv_heads * hd), rng, -1.f, 1.f);
      const KvLayout lay{DType::Q8, n_kv_heads, hd, cap};
      auto kc = q8_cache(lay), vc = q8_cache(lay);
      kv_store(k.data(), v.data(), n_kv, n_kv_heads, hd, 0, kc.data(), vc.data(), DType::Q8, cap);
      std::vector<std::vector<float>> kh, vh;
      heads_to_f32(kc, vc, n_kv_heads, hd, cap, n_kv, &kh, &vh);
      const int32_t pos = int32_t(n_kv - 1);
      std::vector<float> out(q.size(), NAN), outs(q.size(), NAN);
      attention(pool, q.data(), 1, n_heads, hd, kc.data(), vc.data(), DType::Q8, n_kv_heads, cap,
                n_kv, &pos, 0.125f, out.data());
      ASSERT_TRUE(force_isa("scalar"));
      attention(pool, q.data(), 1, n_heads, hd, kc.data(), vc.data(), DType::Q8, n_kv_heads, cap,
                n_kv, &pos, 0.125f, outs.data());
      ASSERT_TRUE(force_isa(GetParam()));
      std::vector<double> ref;
      oracle_attention(q, 1, n_heads, hd, kh, vh, n_kv_heads, n_kv, &pos, 0.125f, &ref);
      for (size_t e = 0; e < ref.size(); ++e) {
        ASSERT_NEAR(out[e], ref[e], 5e-6)
            << "threads=" << threads << " ratio=" << ratio << " e=" << e;
        ASSERT_NEAR(outs[e], ref[e], 5e-6) << "scalar threads=" << threads << " e=" << e;
      }
    }
}

// attention_rows (a decode batch's or a verification's rows in one dispatch) gives every row the
// bits of its own attention() call: rows on two caches, several on the same one (consecutive
// key counts, as a verification), a row with no key; short caches (serial) and long ones (key
// ranges split over the pool and merged), f32 / f16 / q8 caches, 2 and 3 threads.
TEST_P(KvIsaTest, AttentionRowsMatchEachRowAlone) {
  std::mt19937 rng(21);
  const int n_kv_heads = 2, n_heads = 14, hd = 64;
  const int64_t cap = 1600;
  const std::vector<std::pair<int, int64_t>> rows_of{{0, 1},    {0, 64},   {0, 65},  {1, 300},
                                                     {0, 1300}, {0, 1301}, {1, 0},   {0, 1302},
                                                     {1, 700},  {0, 1500}, {0, 1501}};
  for (const DType type : {DType::F32, DType::F16, DType::Q8})
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      const KvLayout lay{type, n_kv_heads, hd, cap};
      std::vector<std::vector<uint8_t>> kc, vc;
      for (int c = 0; c < 2; ++c) {
        kc.push_back(q8_cache(lay));
        vc.push_back(q8_cache(lay));
        const auto k = random_vec(size_t(cap * n_kv_heads * hd), rng, -3.f, 3.f);
        const auto v = random_vec(size_t(cap * n_kv_heads * hd), rng, -1.f, 1.f);
        kv_store(k.data(), v.data(), cap, n_kv_heads, hd, 0, kc[size_t(c)].data(),
                 vc[size_t(c)].data(), type, cap);
      }
      const size_t row = size_t(n_heads * hd);
      const auto q = random_vec(row * rows_of.size(), rng, -2.f, 2.f);
      std::vector<float> out(q.size(), NAN), alone(q.size(), NAN);
      std::vector<AttentionRow> rows;
      for (size_t i = 0; i < rows_of.size(); ++i) {
        const auto [c, n_keys] = rows_of[i];
        rows.push_back({q.data() + i * row, kc[size_t(c)].data(), vc[size_t(c)].data(), type, cap,
                        n_keys, out.data() + i * row});
        attention(pool, q.data() + i * row, 1, n_heads, hd, kc[size_t(c)].data(),
                  vc[size_t(c)].data(), type, n_kv_heads, cap, n_keys, nullptr, 0.125f,
                  alone.data() + i * row);
      }
      attention_rows(pool, rows, n_heads, hd, n_kv_heads, 0.125f);
      for (size_t i = 0; i < rows_of.size(); ++i)
        ASSERT_EQ(std::memcmp(out.data() + i * row, alone.data() + i * row, row * 4), 0)
            << dtype_name(type) << " threads " << threads << " row " << i << " ("
            << rows_of[i].second << " keys)";
      // A single short row takes the serial path; the dispatch must agree there too.
      attention_rows(pool, std::span<const AttentionRow>(rows.data(), 1), n_heads, hd, n_kv_heads,
                     0.125f);
      ASSERT_EQ(std::memcmp(out.data(), alone.data(), row * 4), 0);
    }
}

// q8 attention tracks attention over the float K/V it was quantized from: the error is the
// quantization's, bounded well below the signal (guards against a scale applied twice or to
// the wrong row, which the self-consistent oracle above could share with kv_head_to_f32).
TEST_P(KvIsaTest, AttentionQ8CloseToFloatCache) {
  std::mt19937 rng(14);
  ThreadPool pool(2);
  const int n_kv_heads = 2, n_heads = 14, hd = 64;
  const int64_t n_kv = 300, cap = 320, n_q = 1;
  const auto q = random_vec(size_t(n_q * n_heads * hd), rng, -2.f, 2.f);
  const auto k = random_vec(size_t(n_kv * n_kv_heads * hd), rng, -3.f, 3.f);
  const auto v = random_vec(size_t(n_kv * n_kv_heads * hd), rng, -1.f, 1.f);
  double err = 0, mag = 0;
  std::vector<float> out8(q.size()), out32(q.size());
  for (DType t : {DType::Q8, DType::F32}) {
    const KvLayout lay{t, n_kv_heads, hd, cap};
    std::vector<uint8_t> kc(lay.cache_bytes()), vc(lay.cache_bytes());
    kv_store(k.data(), v.data(), n_kv, n_kv_heads, hd, 0, kc.data(), vc.data(), t, cap);
    attention(pool, q.data(), n_q, n_heads, hd, kc.data(), vc.data(), t, n_kv_heads, cap, n_kv,
              nullptr, 1.f / 8.f, t == DType::Q8 ? out8.data() : out32.data());
  }
  for (size_t e = 0; e < q.size(); ++e) {
    err = std::max(err, double(std::fabs(out8[e] - out32[e])));
    mag = std::max(mag, double(std::fabs(out32[e])));
  }
  EXPECT_GT(mag, 0.05);
  EXPECT_LT(err, 0.02 * mag) << "max error " << err << " of max output " << mag;
}

TEST(KvQuant, RejectsUnsupportedType) {
  float x = 0;
  uint8_t c[64] = {};
  EXPECT_THROW(kv_store(&x, &x, 1, 1, 1, 0, c, c, DType::Q4, 1), Error);
  EXPECT_THROW(kv_head_to_f32(c, DType::Q8, 1, 1, 1, 1, 1, &x), Error);  // head out of range
}

INSTANTIATE_TEST_SUITE_P(Isa, KvIsaTest, ::testing::ValuesIn(test::all_isa_levels()),
                         test::isa_param_name);

}  // namespace
}  // namespace edgevl::cpu
