#pragma once
// Integer/float vector traits of the quantized kernels for AVX2 (8 int32 / 8 floats). Include
// only from quant_avx2.cpp / quant_avxvnni.cpp: everything is in an anonymous namespace, so each
// ISA file gets its own private copy.
#include <immintrin.h>

#include "backend/cpu/simd/quant_simd.h"

namespace edgevl::cpu {
namespace {

struct Avx2Q {
  using I = __m256i;
  using F = __m256;
  static constexpr int W = 8;  // a 16-row panel is two vectors
  // Register tiles (16 ymm): Q8 3x1 panels = 6 int32 accumulators; Q4 2x1 panels = 4 int32 +
  // 4 float accumulators; A16 4x1 panels = 8 float accumulators.
  static constexpr int MR8 = 3, NP8 = 1, MR4 = 2, NP4 = 1, MRF = 4, NPF = 1;
  // Q8 tiles of decode batches (2..16 rows): 4 rows, so that a batch of 4 loads each weight
  // block (and takes its vpabsb) once; with 3-row tiles its 4th row ran a pass of its own,
  // re-reading the panel at the cost of a whole GEMV's instructions (callgrind, K=896 N=4864,
  // 4 rows: 0.99 -> 0.77 instructions per weight byte, with dot8's register pin below; 1 row
  // 0.28). 8 int32 accumulators + 2 weight vectors + their absolute values + a broadcast and a
  // product fit the 16 ymm.
  static constexpr int MR8B = 4;
  // Panels per Q8 GEMV step. quant_bench BM_gemv_q8a8_cold on Zen 5 forced to avx2 (GB/s,
  // medians of 3, alternated): 1 thread 19.0-20.9 (2 panels) -> 22.7-25.7 (4) in 4 of 4 pairs;
  // 2 threads 29.2-39.8 -> 33.7-47.1 in 6 of 6, then even in 3 more. End to end (`edgevl
  // bench --isa avx2 --tg 64`, qwen2-0.5b w8a8, 9 alternated pairs): 64.4 -> 72.7 tok/s median,
  // 7 pairs of 9 faster. AVX-VNNI keeps 2 (quant_avxvnni.cpp).
  static constexpr int NPV = 4;
  // Panels per Q4 GEMV step: more weight streams in flight. quant_bench BM_gemv_q4a8_cold on Zen 5
  // forced to avx2 (GB/s, medians of 5, three alternations): 1 thread 13.4-14.9 (2 panels) ->
  // 16.2-17.5 (3) -> 17.3-18.5 (4); 2 threads 23.7-26.3 -> 26.2-28.4 -> 27.4-29.9; avx2-vnni
  // likewise (15.0 -> 17.5-18.3). 4 panels keep 16 accumulators in 16 ymm: the float ones
  // spill, but they change once per group. Not measured on a smaller AVX2 core (Zen 3, Intel).
  // The decode GEMV (quant_q4_gemv.h) too: 2 panels a step cost 0.42 instructions per weight
  // byte against 0.38 with 4 (callgrind, K=896 N=4864).
  static constexpr int NPV4 = 4;
  // Q8 uses vpmaddubsw(|q|, sign(xq, q)): both sides are within +-127, so the int16 pair sums
  // (<= 2 * 127 * 127) cannot saturate, and no correction term is needed.
  static constexpr bool kQ8Biased = false;
  // No W4A8 prefill route (q4_prefill_v): the Q8 product here (vpabsb + vpsignb + vpmaddubsw +
  // vpmaddwd) costs more than the Q4 one (unsigned codes go straight into vpmaddubsw), so
  // requantizing gained nothing (quant_bench gemm512_q4a8, 1 thread: 131 vs 143 GOP/s; at 48
  // and 64 rows it lost).
  static constexpr int64_t kQ4PrefillMinRows = 0;

  static __m256i lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  static I izero() { return _mm256_setzero_si256(); }
  static I loadi(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static I set1i(int32_t v) { return _mm256_set1_epi32(v); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I slli7(I a) { return _mm256_slli_epi32(a, 7); }
  static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I addi(I a, I b) { return _mm256_add_epi32(a, b); }
  static I andi(I a, I b) { return _mm256_and_si256(a, b); }
  static I ori(I a, I b) { return _mm256_or_si256(a, b); }
  template <int S>
  static I slli(I a) {
    return _mm256_slli_epi32(a, S);
  }
  static void storei(void* p, I v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
  static I cvtr(F v) { return _mm256_cvtps_epi32(v); }  // round to nearest even (MXCSR default)
  static I load_u8x(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I dot_bytes(I acc, I u, I s) {  // acc += sum of 4 (u8 x s8) per int32 lane
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static I bcast8(int32_t x) { return _mm256_set1_epi32(x); }
  // The empty asm keeps each accumulator in one register: without it GCC 12 shuffled the 8 of
  // a 4-row tile through other registers and the stack every block (6 moves and 2 spills).
  static I dot8(I acc, I w, I xb) {
    I r = dot_bytes(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(xb, w));
    asm("" : "+x"(r));
    return r;
  }
  static I bcast4(int32_t x) { return _mm256_set1_epi32(x); }
  static I dot4(I acc, I c, I xb) { return dot_bytes(acc, c, xb); }  // codes <= 15: no saturation
  // Q4 x A8 sums kept in int16 lanes: a lane of dot4_pair16 gains 4 products of a code (<= 15)
  // and an activation (|x| <= 127), at most 7620, so the 4 blocks of a G = 32 group fit
  // (30480 <= 32767) before widen16 moves them to int32: per block 2 vpmaddubsw + 2 vpaddw
  // instead of 2 x (vpmaddubsw + vpmaddwd + vpaddd).
  static constexpr int kQ4Blocks16 = 4;
  // W4A8 decode through q4a8_gemv_panels (quant_q4_gemv.h has the figures).
  static constexpr bool kQ4Gemv = true;
  static I dot4_pair16(I acc16, I lo, I x0, I hi, I x1) {
    return _mm256_add_epi16(
        acc16, _mm256_add_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_maddubs_epi16(hi, x1)));
  }
  static I widen16(I acc, I acc16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(acc16, _mm256_set1_epi16(1)));
  }
  static I nib_lo(I v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
  static I nib_hi(I v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }
  template <int KK>
  static I sext(I v) {
    return _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * KK), 24);
  }
  template <int S>
  static I nib(I v) {
    return _mm256_and_si256(_mm256_srli_epi32(v, S), _mm256_set1_epi32(15));
  }

  static F zerof() { return _mm256_setzero_ps(); }
  static F set1f(float v) { return _mm256_set1_ps(v); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  // 8 IEEE f16 (the Q4 group scales) -> f32 (F16C, exact).
  static F loadh(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // vmaskmov does not fault on masked-off lanes.
  static F loadf_n(const float* p, int n) { return _mm256_maskload_ps(p, lane_mask(n)); }
  static void storef(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void storef_n(float* p, F v, int n) { _mm256_maskstore_ps(p, lane_mask(n), v); }
  static F addf(F a, F b) { return _mm256_add_ps(a, b); }
  // GCC implements the intrinsics as vector operators and contracts mul + add into an FMA
  // (C++ defaults to -ffp-contract=fast); the empty asm keeps the product rounded, so the
  // A8 scaling matches the scalar reference bit for bit.
  static F mulf(F a, F b) {
    F r = _mm256_mul_ps(a, b);
    asm("" : "+v"(r));
    return r;
  }
  static F fmaf(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmaf(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a*b

  static float absmax(const float* x, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.f);
    __m256 m = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k += 8) {
      const int cnt = int(n - k < 8 ? n - k : 8);
      const __m256 v = cnt == 8 ? _mm256_loadu_ps(x + k) : loadf_n(x + k, cnt);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
  }
  static void quant_row(const float* x, int64_t n, float inv, int8_t* q) {
    const __m256 vi = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    // Low byte of each int32 to the low 4 bytes of each 128-bit half.
    const __m256i pick =
        _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                         -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    for (int64_t k = 0; k < n; k += 8) {
      const int cnt = int(n - k < 8 ? n - k : 8);
      const __m256 xv = cnt == 8 ? _mm256_loadu_ps(x + k) : loadf_n(x + k, cnt);
      __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(xv, vi));
      v = _mm256_max_epi32(_mm256_min_epi32(v, hi), lo);
      v = _mm256_shuffle_epi8(v, pick);
      const __m128i b =
          _mm_unpacklo_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      if (cnt == 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(q + k), b);
      } else {
        alignas(16) int8_t buf[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(buf), b);
        for (int i = 0; i < cnt; ++i) q[k + i] = buf[i];
      }
    }
  }
};

}  // namespace
}  // namespace edgevl::cpu
