// The block Hadamard rotation (backend/cpu/hadamard.h) against the matrix it stands for.
#include "backend/cpu/hadamard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace edgevl::cpu {
namespace {

// Sylvester's H_n entry (i, j): (-1)^popcount(i & j), scaled to be orthonormal.
double hadamard_entry(int n, int i, int j) {
  return (__builtin_popcount(unsigned(i & j)) % 2 ? -1.0 : 1.0) / std::sqrt(double(n));
}

// The rotation as a dense product: blocks of `block` over the body, the tail in blocks of the
// largest power of two dividing it (none when odd).
std::vector<double> rotate_dense(const std::vector<float>& x, int64_t K, int block) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t body = K - K % block;
  int tb = block;
  while (tb > 1 && (K - body) % tb != 0) tb /= 2;
  const auto apply = [&](int64_t k0, int n) {
    for (int i = 0; i < n; ++i) {
      double acc = 0;
      for (int j = 0; j < n; ++j) acc += hadamard_entry(n, i, j) * double(x[size_t(k0 + j)]);
      y[size_t(k0 + i)] = acc;
    }
  };
  for (int64_t k = 0; k < body; k += block) apply(k, block);
  if (tb > 1)
    for (int64_t k = body; k < K; k += tb) apply(k, tb);
  return y;
}

TEST(Hadamard, BlockForAnInputDimension) {
  EXPECT_EQ(hadamard_block_for(896), 32);
  EXPECT_EQ(hadamard_block_for(172), 32);  // 5 blocks of 32, then 3 of 4
  EXPECT_EQ(hadamard_block_for(33), 32);
  EXPECT_EQ(hadamard_block_for(24), 8);
  EXPECT_EQ(hadamard_block_for(7), 0);
}

TEST(Hadamard, MatchesTheDenseMatrixOnAwkwardShapes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (int block : {2, 4, 8, 16, 32, 64})
    for (int64_t K : {int64_t(block), int64_t(2 * block), int64_t(172), int64_t(3 * block + 6),
                      int64_t(block + 1), int64_t(4864)}) {
      const int64_t M = 3;
      std::vector<float> x(size_t(M * K));
      for (float& v : x) v = u(rng);
      std::vector<float> got = x;
      hadamard_rows(got.data(), M, K, block);
      for (int64_t m = 0; m < M; ++m) {
        const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
        const std::vector<double> want = rotate_dense(row, K, block);
        for (int64_t k = 0; k < K; ++k)
          ASSERT_NEAR(got[size_t(m * K + k)], want[size_t(k)], 2e-5)
              << "block " << block << " K " << K << " m " << m << " k " << k;
      }
    }
}

TEST(Hadamard, IsItsOwnInverseAndKeepsDotProducts) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t M = 5, K = 172;
  std::vector<float> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(K));
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = nd(rng);
  x[7] = 40.f;  // an outlier channel
  std::vector<float> xr = x, wr = w;
  hadamard_rows(xr.data(), M, K, 32);
  hadamard_rows(wr.data(), 1, K, 32);
  for (int64_t m = 0; m < M; ++m) {
    double plain = 0, rotated = 0;
    for (int64_t k = 0; k < K; ++k) {
      plain += double(x[size_t(m * K + k)]) * w[size_t(k)];
      rotated += double(xr[size_t(m * K + k)]) * wr[size_t(k)];
    }
    EXPECT_NEAR(rotated, plain, 1e-4 * (1 + std::fabs(plain))) << m;
  }
  // The outlier is spread over its block of 32: the row's largest magnitude falls.
  float before = 0, after = 0;
  for (int64_t k = 0; k < K; ++k) {
    before = std::max(before, std::fabs(x[size_t(k)]));
    after = std::max(after, std::fabs(xr[size_t(k)]));
  }
  EXPECT_LT(after, before / 4);
  hadamard_rows(xr.data(), M, K, 32);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(xr[i], x[i], 1e-5f) << i;
}

// The vector form of the 32-block and the plain butterflies give the same bits: every CPU
// stores and multiplies the same rotated values.
TEST(Hadamard, Block32IsBitIdenticalToTheButterflies) {
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> x(32 * 50);
  for (float& v : x) v = nd(rng);
  std::vector<float> want = x;
  for (size_t b = 0; b < 50; ++b) {  // the butterflies as written in the definition
    float* v = want.data() + b * 32;
    for (int h = 1; h < 32; h *= 2)
      for (int i = 0; i < 32; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const float a = v[j], c = v[j + h];
          v[j] = a + c;
          v[j + h] = a - c;
        }
    for (int j = 0; j < 32; ++j) v[j] *= 1.f / std::sqrt(32.f);
  }
  hadamard_rows(x.data(), 50, 32, 32);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], want[i]) << i;
}

TEST(Hadamard, ThreadedCopyMatchesInPlace) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  ThreadPool pool(2);
  for (int64_t M : {1, 3, 200}) {
    const int64_t K = 896;
    std::vector<float> x(size_t(M * K));
    for (float& v : x) v = u(rng);
    std::vector<float> want = x, got(x.size(), NAN);
    hadamard_rows(want.data(), M, K, 32);
    hadamard_rows(pool, x.data(), got.data(), M, K, 32);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << M << " " << i;
  }
}

}  // namespace
}  // namespace edgevl::cpu
