#pragma once
// Vector traits for AVX-512 F/BW/VL/DQ (16 floats). Include only from *_avx512.cpp files.
#include "backend/cpu/x86/intrin_x86.h"

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
namespace {

struct Avx512 {
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int MR = 6;  // matmul register tile: 6x4 accumulators + 4 weight vectors
  static constexpr int NR = 4;
  // Panel tile (matmul_bf16p_cols, prefill on f32 panels): 8 rows x 3 panels of 16 columns,
  // 24 accumulators + 6 weight vectors; each broadcast of x feeds 3 FMAs. (12 x 1 ran at half
  // the FMA peak on Zen 5, 12 x 2 at 0.6-0.7, 8 x 3 at 0.7-0.8, 6 x 4 no better.)
  static constexpr int MRP = 8, NPP = 3;

  static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }

  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load(const f16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R load(const bf16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // W dwords of a bf16p panel row (see Avx2::load_bf16_pairs).
  static void load_bf16_pairs(const uint16_t* p, R& even, R& odd) {
    const __m512i d = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(d, _mm512_set1_epi32(int32_t(0xFFFF0000u))));
  }
  static R load(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // Masked loads do not touch (or fault on) the lanes past n.
  static R load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static R load_n(const f16_t* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p));
  }
  static R load_n(const bf16_t* p, int n) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask(n), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static R load_n(const int8_t* p, int n) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask(n), p)));
  }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, R v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R fnma(R a, R b, R c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a*b
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R abs(R a) { return _mm512_abs_ps(a); }
  static R select_neg(R x, R a, R b) {  // x<0 ? a : b
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
  }
  static R round(R a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static R pow2(R n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }

  static __m256 fold(R v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
  static float hsum(R v) {
    const __m256 h = fold(v);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(R v) { return _mm512_reduce_max_ps(v); }
  static void hsum4(R a, R b, R c, R d, float* out) {
    const __m256 ab = _mm256_hadd_ps(fold(a), fold(b)), cd = _mm256_hadd_ps(fold(c), fold(d));
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  // out[p] = the sum of a[p]'s lanes, p < 8, as one tree over all eight: halves, quarters,
  // pairs, neighbours, then one permute into order (24 shuffles and adds; two hsum4s take ~40).
  // Every input's lanes are added in the same order whatever its slot.
  static void hsum8(const R* a, float* out) {
    R b[4], c[2];
    for (int i = 0; i < 4; ++i)  // b_i = [a_i | a_i+4], 8 partial sums each
      b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 4], 0x44),
                           _mm512_shuffle_f32x4(a[i], a[i + 4], 0xEE));
    for (int i = 0; i < 2; ++i)  // c_0 quarters: a0 a4 a2 a6, c_1: a1 a5 a3 a7 (4 partials)
      c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[i], b[i + 2], 0x88),
                           _mm512_shuffle_f32x4(b[i], b[i + 2], 0xDD));
    const __m512d x = _mm512_castps_pd(c[0]), y = _mm512_castps_pd(c[1]);
    const R d = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                              _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    // Lane 4k of e: c_0's quarter k total, lane 4k + 2: c_1's.
    const R e = _mm512_add_ps(d, _mm512_permute_ps(d, 0xB1));
    const R r = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0), e);
    _mm256_storeu_ps(out, _mm512_castps512_ps256(r));
  }
};

}  // namespace
}  // namespace edgevl::cpu
