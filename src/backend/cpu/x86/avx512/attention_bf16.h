#pragma once
// AVX-512 BF16 vector pieces shared by the AMX-BF16 attention kernels (attention_amx.cpp: full vision
// attention; causal_attention_amx.cpp: prefill attention over the KV cache) and by the
// VDPBF16PS kernels (bf16_gemm_avx512bf16.cpp). Include only from files compiled with the AMX
// or the avx512bf16 flag set (VCVTNE2PS2BF16 needs AVX512-BF16).
#include <cstdint>

#include "backend/cpu/x86/intrin_x86.h"

namespace edgevl::cpu {
// Internal linkage: every including file (each built with its own ISA flags) keeps its own
// copies, so no copy compiled for one ISA level can be picked for another.
namespace {

// 2^t for t <= 0 (and -inf): 2^n * 2^f with n = round(t), |f| <= 1/2. The callers fold
// log2(e) into the score scale, so this is the whole exp: one FMA before it, none after.
inline __m512 exp2_nonpositive(__m512 t) {
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  // Minimax polynomial of 2^f on [-1/2, 1/2], degree 4: relative error < 2.7e-6.
  __m512 p = _mm512_set1_ps(9.570102207e-03f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.591786280e-02f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402474433e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931217909e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999992847e-01f));
  return _mm512_scalef_ps(p, n);  // n very negative (t = -inf included) gives 0
}

// 32 floats (lo, hi) -> 32 bf16, nearest even (VCVTNE2PS2BF16: denormals flush to zero, which
// moves results by < 1e-38).
inline __m512i to_bf16x32(__m512 lo, __m512 hi) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

inline __mmask16 tail_mask(int64_t valid) {
  return valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << (valid > 0 ? valid : 0)) - 1u);
}

// The 32 bf16 of to_bf16x32 back in f32 (exact), the first 16 in lo, the rest in hi.
inline void bf16x32_to_f32(__m512i b, __m512& lo, __m512& hi) {
  lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(b)), 16));
  hi = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(b, 1)), 16));
}

// The compensated split of 32 floats into n bf16 parts (hi first): part 0 = bf16(x), part k =
// bf16(x - parts 0..k-1) (each difference exact in f32). Two parts carry 16 significant bits
// (relative error <= 2^-17 up to denormals), three carry all 24 of an f32; an f16 x splits
// exactly into two (its 11 bits: 8 in the first, the remaining <= 3 in the second).
inline void split_bf16x32(__m512 x0, __m512 x1, int n, __m512i* parts) {
  for (int k = 0; k < n; ++k) {
    parts[k] = to_bf16x32(x0, x1);
    __m512 h0, h1;
    bf16x32_to_f32(parts[k], h0, h1);
    x0 = _mm512_sub_ps(x0, h0);
    x1 = _mm512_sub_ps(x1, h1);
  }
}

}  // namespace
}  // namespace edgevl::cpu
