#pragma once
// Vector traits for AVX2+FMA+F16C (8 floats). Include only from *_avx2.cpp / *_avx512.cpp files.
// Everything is in an anonymous namespace: each ISA file gets its own private copy.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
namespace {

struct Avx2 {
  using R = __m256;
  static constexpr int W = 8;
  static constexpr int MR = 3;  // matmul register tile: 3x4 accumulators + 4 weight vectors
  static constexpr int NR = 4;
  // bf16p panel tile (matmul_bf16p_cols): 5 rows x 16 columns = 10 accumulators, two FMAs each
  // per k pair, so each chain has 10 cycles of other FMAs to hide its 2 x 4 cycles of latency.
  static constexpr int MRP = 5, NPP = 1;

  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load(const f16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static R load(const bf16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // W dwords of a bf16p panel row (columns n..n+W-1, each dword the pair k, k + 1): the f32
  // weights at k (low halves) and at k + 1 (high halves).
  static void load_bf16_pairs(const uint16_t* p, R& even, R& odd) {
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(d, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32(int32_t(0xFFFF0000u))));
  }
  static R load(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // Tails: AVX2 has no 8/16-bit masked load, so copy the valid part into a zeroed buffer (never
  // reads past the end of an mmapped weight).
  template <class T>
  static R load_n(const T* p, int n) {
    alignas(32) T buf[W];
    std::memset(buf, 0, sizeof(buf));
    std::memcpy(buf, p, size_t(n) * sizeof(T));
    return load(buf);
  }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, R v, int n) {
    alignas(32) float buf[W];
    _mm256_store_ps(buf, v);
    std::memcpy(p, buf, size_t(n) * sizeof(float));
  }

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R fnma(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a*b
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static R select_neg(R x, R a, R b) { return _mm256_blendv_ps(b, a, x); }  // x<0 ? a : b
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integral-valued n in [-126, 127].
  static R pow2(R n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }

  static float hsum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(R v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Four horizontal sums at once (cheaper than four separate reductions).
  static void hsum4(R a, R b, R c, R d, float* out) {
    const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    const __m256 abcd = _mm256_hadd_ps(ab, cd);  // per 128-bit lane: a, b, c, d partial sums
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
};

}  // namespace
}  // namespace edgevl::cpu
