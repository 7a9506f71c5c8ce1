#pragma once
// The 16-lane (zmm) vector operations that both AVX-512 quantized tables share: loads, stores,
// integer and float arithmetic, activation quantization. The tables (quant_avx512.cpp:
// vpmaddubsw; quant_avx512vnni.cpp: vpdpbusd) derive from ZmmQuant and add their int8 dot
// products and tile shapes. Include only from files built with the AVX-512 flags: everything is
// in an anonymous namespace, so each ISA file gets its own private copy.
#include "backend/cpu/x86/intrin_x86.h"

#include "backend/cpu/simd/quant_simd.h"

namespace edgevl::cpu {
namespace {

struct ZmmQuant {
  using I = __m512i;
  using F = __m512;
  static constexpr int W = 16;

  static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  static I izero() { return _mm512_setzero_si512(); }
  static I loadi(const void* p) { return _mm512_loadu_si512(p); }
  static I set1i(int32_t v) { return _mm512_set1_epi32(v); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I slli7(I a) { return _mm512_slli_epi32(a, 7); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I addi(I a, I b) { return _mm512_add_epi32(a, b); }
  static I andi(I a, I b) { return _mm512_and_si512(a, b); }
  static I ori(I a, I b) { return _mm512_or_si512(a, b); }
  template <int S>
  static I slli(I a) {
    return _mm512_slli_epi32(a, S);
  }
  static void storei(void* p, I v) { _mm512_storeu_si512(p, v); }
  static I cvtr(F v) { return _mm512_cvtps_epi32(v); }  // round to nearest even (MXCSR default)
  static I load_u8x(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I nib_lo(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
  static I nib_hi(I v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
  template <int KK>  // sign-extended byte KK of each int32 lane
  static I sext(I v) {
    return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * KK), 24);
  }
  template <int S>  // (lane >> S) & 15
  static I nib(I v) {
    return _mm512_and_si512(_mm512_srli_epi32(v, S), _mm512_set1_epi32(15));
  }

  static F zerof() { return _mm512_setzero_ps(); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  // 16 IEEE f16 (the Q4 group scales) -> f32 (exact).
  static F loadh(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F loadf_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void storef(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void storef_n(float* p, F v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static F addf(F a, F b) { return _mm512_add_ps(a, b); }
  // GCC implements the intrinsics as vector operators and contracts mul + add into an FMA
  // (C++ defaults to -ffp-contract=fast); the empty asm keeps the product rounded, so the
  // A8 scaling matches the scalar reference bit for bit.
  static F mulf(F a, F b) {
    F r = _mm512_mul_ps(a, b);
    asm("" : "+v"(r));
    return r;
  }
  static F fmaf(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmaf(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a*b

  static float absmax(const float* x, int64_t n) {
    __m512 m = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    if (k < n) m = _mm512_max_ps(m, _mm512_abs_ps(loadf_n(x + k, int(n - k))));
    return _mm512_reduce_max_ps(m);
  }
  // q = clamp(round_even(x * inv), -127, 127) (cvtps rounds to nearest even under the default
  // MXCSR; |x * inv| <= 127 up to rounding, the clamp only guards that).
  static void quant_row(const float* x, int64_t n, float inv, int8_t* q) {
    const __m512 vi = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int64_t k = 0; k < n; k += 16) {
      const int cnt = int(n - k < 16 ? n - k : 16);
      __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(loadf_n(x + k, cnt), vi));
      v = _mm512_max_epi32(_mm512_min_epi32(v, hi), lo);
      _mm_mask_storeu_epi8(q + k, mask(cnt), _mm512_cvtepi32_epi8(v));
    }
  }
};

}  // namespace
}  // namespace edgevl::cpu
