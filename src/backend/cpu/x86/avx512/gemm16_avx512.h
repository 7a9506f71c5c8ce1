#pragma once
// The AVX-512 half of the x86 16-bit GEMM levels' traits (gemm16_driver.h), shared by AMX-BF16
// (matmul_amx.cpp) and VDPBF16PS (bf16_gemm_avx512bf16.cpp): epilogue vectors of 16 floats, the
// bf16 rounding of activations and outputs (round_bf16: f32_to_bf16 bit for bit), and the
// loads of row weights for the repacks. Include only from files compiled with the AVX-512 flags.
#include "backend/cpu/x86/intrin_x86.h"

#include <cstdint>

#include "backend/cpu/gemm16_driver.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/x86/avx512/bf16_avx512.h"

namespace edgevl::cpu {
namespace {

// 32 weights of row n from k0 (valid of them, zero beyond) as bf16; f16 rounded to bf16
// (losing 3 mantissa bits: the opt-in of matmul_bf16_compute).
__m512i load_w32(const Bf16GemmArgs& a, int64_t n, int64_t k0, int64_t valid) {
  const __mmask32 mk = valid >= 32 ? ~__mmask32(0) : __mmask32((1u << valid) - 1u);
  const __m512i raw = _mm512_maskz_loadu_epi16(mk, a.w + n * a.K + k0);
  if (!a.w_f16) return raw;
  const __m512 f0 = _mm512_cvtph_ps(_mm512_castsi512_si256(raw));
  const __m512 f1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1));
  return round_bf16_x2(f0, f1);
}

struct Gemm16Avx512 : Gemm16Defaults {
  using V16 = __m512;
  static __mmask16 mask(int64_t cnt) { return __mmask16((1u << cnt) - 1u); }
  static V16 zero() { return _mm512_setzero_ps(); }
  static V16 load(const float* p) { return _mm512_loadu_ps(p); }
  static V16 load_n(const float* p, int64_t cnt) { return _mm512_maskz_loadu_ps(mask(cnt), p); }
  static V16 add(V16 a, V16 b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V16 v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, V16 v, int64_t cnt) { _mm512_mask_storeu_ps(p, mask(cnt), v); }
  static void store_rounded(uint16_t* dst, V16 v) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst), round_bf16(v));
  }
  static auto gelu_fn() { return avx512_kernels().gelu_erf; }

  // Activation rows: 32 at a time, then 16 (masked) to the end of the row.
  static constexpr int kRowWide = 32, kRowTail = 16;
  static void rows_wide(const float* x, uint16_t* dst, uint16_t* lo) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    _mm512_storeu_si512(dst, round_bf16_x2(v0, v1));
    if (lo)
      _mm512_storeu_si512(lo, round_bf16_x2(_mm512_sub_ps(v0, bf16_hi_f32(v0)),
                                            _mm512_sub_ps(v1, bf16_hi_f32(v1))));
  }
  static void rows_tail(const float* x, int64_t cnt, uint16_t* dst, uint16_t* lo) {
    const __m512 v = _mm512_maskz_loadu_ps(mask(cnt), x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), round_bf16(v));
    if (lo)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo),
                          round_bf16(_mm512_sub_ps(v, bf16_hi_f32(v))));
  }
};

}  // namespace
}  // namespace edgevl::cpu
