// Prefill attention on awkward shapes (odd chunk lengths, head groups of 1, 2 and 7, key counts
// that are not multiples of 4, 16 or 32, a chunk after earlier context, one row, head_dim 8 to
// 128) and every KV cache type, against a direct double-precision reference. The f32 path
// (every CPU; q8 caches also on AMX) must in addition reproduce bit for bit the plain per-head
// matmuls over all keys it replaced (whole chunk per matmul, threads splitting each matmul).
// The AMX-BF16 kernel (f32 / f16 caches on AMX CPUs) is held to the f32 path's bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "runtime/execution/causal_attention.h"

namespace edgevl {
namespace {

struct Shape {
  int nh, nkv, hd;
  int64_t pos0, m;
};

// out[i][h][d] over keys j <= pos0 + i, in double, from the f32 cache contents; with it, per
// output, the sums over keys of p |v| and of p |v - out| (p normalized) that bound how far a
// relative error in each p moves it.
struct Reference {
  std::vector<double> out, p_abs_v, p_abs_dev;
};

Reference reference(const std::vector<float>& q, const std::vector<float>& kf,
                    const std::vector<float>& vf, const Shape& s, float scale) {
  const int64_t n_kv = s.pos0 + s.m, group = s.nh / s.nkv;
  const size_t n_out = size_t(s.m * s.nh * s.hd);
  Reference r{std::vector<double>(n_out), std::vector<double>(n_out), std::vector<double>(n_out)};
  for (int64_t i = 0; i < s.m; ++i)
    for (int h = 0; h < s.nh; ++h) {
      const int64_t kvh = h / group, vis = s.pos0 + i + 1;
      std::vector<double> p(static_cast<size_t>(vis));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < vis; ++j) {
        double d = 0;
        for (int c = 0; c < s.hd; ++c)
          d += double(q[size_t((i * s.nh + h) * s.hd + c)]) *
               kf[size_t((kvh * n_kv + j) * s.hd + c)];
        p[size_t(j)] = d * scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      for (auto& v : p) sum += (v = std::exp(v - mx));
      for (auto& v : p) v /= sum;
      for (int c = 0; c < s.hd; ++c) {
        const auto v = [&](int64_t j) { return double(vf[size_t((kvh * n_kv + j) * s.hd + c)]); };
        const size_t at = size_t((i * s.nh + h) * s.hd + c);
        double o = 0;
        for (int64_t j = 0; j < vis; ++j) o += p[size_t(j)] * v(j);
        r.out[at] = o;
        for (int64_t j = 0; j < vis; ++j) {
          r.p_abs_v[at] += p[size_t(j)] * std::fabs(v(j));
          r.p_abs_dev[at] += p[size_t(j)] * std::fabs(v(j) - o);
        }
      }
    }
  return r;
}

// The whole-chunk version: S over all n_kv keys, mask, P V over all keys.
std::vector<float> whole_chunk(cpu::ThreadPool& pool, const std::vector<float>& q,
                               const std::vector<float>& kf, const std::vector<float>& vf,
                               const Shape& s, float scale) {
  const int64_t n_kv = s.pos0 + s.m, group = s.nh / s.nkv, rows = s.m * group;
  std::vector<float> qs(size_t(rows * s.hd)), sc(size_t(rows * n_kv)), vt(size_t(s.hd * n_kv)),
      os(qs.size()), y(q.size());
  for (int h = 0; h < s.nkv; ++h) {
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t g = 0; g < group; ++g)
        std::copy_n(q.data() + (i * s.nh + h * group + g) * s.hd, s.hd,
                    qs.data() + (i * group + g) * s.hd);
    cpu::matmul(pool, qs.data(), rows, s.hd, kf.data() + h * n_kv * s.hd, DType::F32, n_kv, nullptr,
                sc.data());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t visible = s.pos0 + r / group + 1;
      cpu::softmax_rows(sc.data() + r * n_kv, 1, visible, scale);
      std::fill(sc.data() + r * n_kv + visible, sc.data() + (r + 1) * n_kv, 0.f);
    }
    for (int64_t j = 0; j < n_kv; ++j)
      for (int d = 0; d < s.hd; ++d)
        vt[size_t(d * n_kv + j)] = vf[size_t((h * n_kv + j) * s.hd + d)];
    cpu::matmul(pool, sc.data(), rows, n_kv, vt.data(), DType::F32, s.hd, nullptr, os.data());
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t g = 0; g < group; ++g)
        std::copy_n(os.data() + (i * group + g) * s.hd, s.hd,
                    y.data() + (i * s.nh + h * group + g) * s.hd);
  }
  return y;
}

// Forces the f32 path (the AVX-512 kernels, no AMX) while alive, when this CPU would take the
// AMX one.
struct F32Path {
  const bool forced = cpu::has_causal_attention_bf16(DType::F16) && cpu::force_isa("avx512");
  ~F32Path() {
    if (forced) cpu::force_isa("best");
  }
};

// Largest difference from the double reference: plain, and less the AMX kernel's allowance
// for the 16 bits it keeps of each p (see AmxBf16KernelMatchesReference).
struct Errors {
  double plain = 0, beyond_p_split = 0;
};

// Runs causal_attention on random data of shape s in a kv_type cache; with whole_chunk_differ,
// also counts the outputs that differ from whole_chunk().
Errors run_case(const Shape& s, DType kv_type, size_t* whole_chunk_differ) {
  std::mt19937 rng(uint32_t(s.nh * 131 + s.hd * 7 + s.m + s.pos0));
  std::normal_distribution<float> d(0.f, 1.f);
  const int64_t n_kv = s.pos0 + s.m, capacity = n_kv + 5, width = s.nkv * s.hd;
  std::vector<float> k(size_t(n_kv * width)), v(k.size()), q(size_t(s.m * s.nh * s.hd));
  // Large query/key values make the scores (and so the softmax) sensitive to their rounding.
  for (auto& x : k) x = 2.f * d(rng);
  for (auto& x : v) x = d(rng);
  for (auto& x : q) x = 2.f * d(rng);
  const size_t bytes = size_t(s.nkv) * size_t(capacity) * size_t(s.hd) * 4 + 4096;
  std::vector<uint8_t> kc(bytes), vc(bytes);
  cpu::kv_store(k.data(), v.data(), n_kv, s.nkv, s.hd, 0, kc.data(), vc.data(), kv_type, capacity);
  // The cache's own values (rounded to its type), as the reference reads them.
  std::vector<float> kf(size_t(s.nkv * n_kv * s.hd)), vf(kf.size());
  for (int h = 0; h < s.nkv; ++h) {
    cpu::kv_head_to_f32(kc.data(), kv_type, s.nkv, s.hd, capacity, h, n_kv,
                        kf.data() + h * n_kv * s.hd);
    cpu::kv_head_to_f32(vc.data(), kv_type, s.nkv, s.hd, capacity, h, n_kv,
                        vf.data() + h * n_kv * s.hd);
  }
  Op op;
  op.type = OpType::Attention;
  op.set(AttentionAttrs{s.nh, s.nkv, s.hd, 1.f / std::sqrt(float(s.hd))});
  KvCaches kv;
  kv.type = kv_type;
  kv.capacity = capacity;
  std::vector<int32_t> pos(size_t(s.m));
  for (int64_t i = 0; i < s.m; ++i) pos[size_t(i)] = int32_t(s.pos0 + i);
  const Reference ref = reference(q, kf, vf, s, op.attention().scale);
  cpu::ThreadPool pool(2);
  std::vector<float> y(q.size(), -1.f);
  causal_attention(pool, op, q.data(), s.m, kc.data(), vc.data(), kv, n_kv, pos.data(), y.data());
  // For an f16 cache p = p0 + p1 (each rounded to nearest): relative error <= 2^-17 in the
  // products with v (an f32 cache splits p and v in three: f32-class, no allowance); the exp
  // polynomial's relative error (< 2.7e-6) also enters the row sum, so it acts on v - out.
  const double v_bits = kv_type == DType::F16 ? std::ldexp(1.0, -17) : 0.0;
  Errors e;
  for (size_t i = 0; i < y.size(); ++i) {
    const double err = std::fabs(y[i] - ref.out[i]);
    e.plain = std::max(e.plain, err);
    e.beyond_p_split =
        std::max(e.beyond_p_split, err - v_bits * ref.p_abs_v[i] - 2.7e-6 * ref.p_abs_dev[i]);
  }
  if (whole_chunk_differ) {
    const std::vector<float> whole = whole_chunk(pool, q, kf, vf, s, op.attention().scale);
    *whole_chunk_differ = 0;
    for (size_t i = 0; i < y.size(); ++i) *whole_chunk_differ += y[i] != whole[i];
  }
  return e;
}

testing::Message where(const Shape& s, DType kv_type) {
  return testing::Message() << "nh " << s.nh << " nkv " << s.nkv << " hd " << s.hd << " pos0 "
                            << s.pos0 << " m " << s.m << " kv " << dtype_name(kv_type);
}

const Shape kShapes[] = {{14, 2, 64, 0, 128}, {14, 2, 64, 93, 37}, {4, 4, 8, 0, 5},
                         {6, 2, 24, 17, 1},   {8, 1, 32, 0, 70},   {7, 7, 16, 250, 130},
                         {4, 2, 128, 45, 77}, {7, 1, 128, 200, 33}};

// Outputs are convex combinations of V (|v| ~ 1..4): f32 rounding gives ~2e-6.
constexpr double kF32Bound = 2e-5;

TEST(CausalAttention, MatchesWholeChunkAndReference) {
  const F32Path f32_path;
  for (const DType t : {DType::F32, DType::F16, DType::Q8})
    for (const Shape& s : kShapes) {
      size_t differ = 0;
      EXPECT_LT(run_case(s, t, &differ).plain, kF32Bound) << where(s, t);
      EXPECT_EQ(differ, 0u) << where(s, t);
    }
}

// The AMX-BF16 kernel splits every operand into bf16 parts (kernels.h causal_attention_bf16):
// q into three (all 24 bits of an f32) and k exactly (f16) or into three (f32), so the scores
// are f32-class (the products dropped are below 2^-24 |q| |k|). With an f16 cache p is split
// into two, so each p is off by up to 2^-17 relative and the output may move by 2^-17 sum p |v|
// more than on the f32 path; with an f32 cache p and v are split into three (f32-class). Beyond
// that allowance and the exp polynomial's 2.7e-6 (computed per output by the reference) the
// kernel must stay within the f32 path's bound. Measured: max |error| 1.2e-5, 2.8e-6 beyond the
// allowance; q in two parts (the first version) is 8e-5 beyond it and plain bf16 (one
// product) 4e-2.
TEST(CausalAttention, AmxBf16KernelMatchesReference) {
  if (!cpu::has_causal_attention_bf16(DType::F16))
    GTEST_SKIP() << "no AMX-BF16 prefill attention on this CPU";
  Errors worst;
  for (const DType t : {DType::F32, DType::F16})
    for (const Shape& s : kShapes) {
      const Errors e = run_case(s, t, nullptr);
      EXPECT_LT(e.beyond_p_split, kF32Bound) << where(s, t);
      worst.plain = std::max(worst.plain, e.plain);
      worst.beyond_p_split = std::max(worst.beyond_p_split, e.beyond_p_split);
    }
  std::printf(
      "[ attn     ] AMX-BF16 prefill attention: max |error| %.3g, %.3g beyond the p split\n",
      worst.plain, worst.beyond_p_split);
}

}  // namespace
}  // namespace edgevl
