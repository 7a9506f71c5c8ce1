#pragma once
// AVX-512 helpers of the AMX-BF16 kernels (matmul_amx.cpp, attention_amx.cpp) and the VDPBF16PS
// ones (bf16_gemm_avx512bf16.cpp): f32 -> bf16
// rounding bit-identical to f32_to_bf16 in core/dtype.h, and the 16 x 16 dword transpose that
// builds VNNI-2 tile rows. Include only from files compiled with the AVX-512 flags.
#include "backend/cpu/x86/intrin_x86.h"

#include <cstdint>

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
// Internal linkage: every including file (each built with its own ISA flags) keeps its own
// copies, so no copy compiled for one ISA level can be picked for another.
namespace {

// f32 -> bf16 rounded to nearest even, NaN kept (quieted): the integer form of f32_to_bf16,
// bit for bit (vcvtneps2bf16 would flush denormals).
// rounded_bf16_bits: the f32 bits whose high 16 bits are that bf16 (low bits are garbage).
inline __m512i rounded_bf16_bits(__m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
}
inline __m256i round_bf16(__m512 f) {
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded_bf16_bits(f), 16));
}

// round_bf16(f) as f32: the hi part of the split f = hi + lo (lo = f - hi is exact in f32).
inline __m512 bf16_hi_f32(__m512 f) {
  return _mm512_castsi512_ps(_mm512_and_si512(rounded_bf16_bits(f), _mm512_set1_epi32(-65536)));
}

// Two vectors at once, same bits as round_bf16: the rounded words' high halves picked by one
// two-source permute (one shuffle per 32 values instead of two shifts and two vpmovdw).
inline __m512i round_bf16_x2(__m512 f0, __m512 f1) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  const __m512i u0 = _mm512_castps_si512(f0), u1 = _mm512_castps_si512(f1);
  __m512i r0 = _mm512_add_epi32(
      u0, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u0, 16), one)));
  __m512i r1 = _mm512_add_epi32(
      u1, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u1, 16), one)));
  r0 = _mm512_mask_or_epi32(r0, _mm512_cmpgt_epi32_mask(_mm512_and_si512(u0, abs), inf), u0, quiet);
  r1 = _mm512_mask_or_epi32(r1, _mm512_cmpgt_epi32_mask(_mm512_and_si512(u1, abs), inf), u1, quiet);
  const __m512i odd =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(r0, odd, r1);
}

// In-register transpose of 16 rows x 16 dwords (r[i] = row i) into columns.
inline void transpose16(__m512i r[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  // 128-bit lane L of b[4i + j] holds column 4L + j of rows 4i..4i+3.
  for (int j = 0; j < 4; ++j) {
    const __m512i u0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44);
    const __m512i u1 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
    const __m512i v0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xEE);
    const __m512i v1 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(u0, u1, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(u0, u1, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
  }
}

// The end of a fused attention head (AMX-BF16 and VDPBF16PS kernels): query rows r0 ..
// r0 + block - 1 of its unnormalized output o (row stride hdp floats; `rows` of them valid)
// times each row's inv_sum, written as f32 rows of a.out, or with a.out_blocks as this head's
// columns a.col0.. of the bf16 blocks of the next matmul's input, rounded like to_bf16_rows
// (round_bf16, not VCVTNE2PS2BF16: bit-identical to writing f32 and rounding there); padding
// rows of the last 16-row group are zero.
inline void store_attention_rows(const SelfAttnArgs& a, int64_t r0, int64_t block, int64_t rows,
                                 const float* o, int64_t hdp, const float* inv_sum) {
  const int64_t hd = a.head_dim;
  if (a.out_blocks) {
    const int64_t row_end = (a.n + 15) / 16 * 16;
    for (int64_t i = 0; i < block && r0 + i < row_end; ++i) {
      const int64_t m = r0 + i;
      const __m512 inv = _mm512_set1_ps(i < rows ? inv_sum[i] : 0.f);
      for (int64_t d = 0; d < hd; d += 16) {
        const int64_t c = a.col0 + d;
        uint16_t* dst =
            a.out_blocks + (m / 16) * 16 * a.ld_blocks + (c / 32) * 512 + (m % 16) * 32 + c % 32;
        const __m512 v =
            i < rows ? _mm512_mul_ps(_mm512_load_ps(o + i * hdp + d), inv) : _mm512_setzero_ps();
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst), round_bf16(v));
      }
    }
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 inv = _mm512_set1_ps(inv_sum[i]);
    for (int64_t d = 0; d < hd; d += 16)
      _mm512_storeu_ps(a.out + (r0 + i) * a.ldo + d,
                       _mm512_mul_ps(_mm512_load_ps(o + i * hdp + d), inv));
  }
}

}  // namespace
}  // namespace edgevl::cpu
