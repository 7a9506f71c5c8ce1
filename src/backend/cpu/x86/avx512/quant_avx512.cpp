// AVX-512 (F/BW/VL/DQ, no VNNI) instantiation of the quantized kernels: Skylake-SP/X-class cores.
// Without VNNI the int8 dot product is vpmaddubsw (u8 x s8 -> int16 pairs) + vpmaddwd with ones
// (-> int32), as on AVX2, but 16 int32 lanes wide and with 32 registers. quant_dispatch.cpp
// (isa_levels.cpp) calls it only after cpu_features() reported AVX-512 F/BW/VL/DQ.
#if defined(__x86_64__)
#include "backend/cpu/x86/avx512/quant_zmm.h"

namespace edgevl::cpu {
namespace {

struct Avx512Q : ZmmQuant {
  // Register tiles (32 zmm): Q8 8x2 int32 accumulators + 2 weight blocks, their absolute values
  // and a signed activation per product; Q4 4x2 int32 + 4x2 int16 + 4x2 float accumulators and
  // 4 nibble vectors; A16 6x4 float accumulators + 4 weight vectors.
  static constexpr int MR8 = 8, NP8 = 2, MR4 = 4, NP4 = 2, MRF = 6, NPF = 4;
  static constexpr int NPV = 4;   // Q8 GEMV: panels a step
  static constexpr int NPV4 = 8;  // Q4 GEMV: panels a step (the VNNI table's)
  // Q8 uses vpmaddubsw(|q|, x negated where q < 0): both within +-127, so the int16 pair sums
  // (<= 2 * 127 * 127) cannot saturate and no correction term is needed. AVX-512 has no
  // vpsignb: the negation is a masked subtract on the sign bits of q (a zero q has |q| = 0, so
  // its product is 0 whatever x becomes).
  static constexpr bool kQ8Biased = false;
  // No requantizing W4A8 prefill route, as on AVX2 (quant_avx2.h): the Q8 product costs more
  // than the Q4 one here.
  static constexpr int64_t kQ4PrefillMinRows = 0;

  static I dot_bytes(I acc, I u, I s) {  // acc += sum of 4 (u8 x s8) per int32 lane
    return _mm512_add_epi32(acc,
                            _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
  }
  static I bcast8(int32_t x) { return _mm512_set1_epi32(x); }
  static I dot8(I acc, I w, I xb) {
    const I xs = _mm512_mask_sub_epi8(xb, _mm512_movepi8_mask(w), _mm512_setzero_si512(), xb);
    return dot_bytes(acc, _mm512_abs_epi8(w), xs);
  }
  static I bcast4(int32_t x) { return _mm512_set1_epi32(x); }
  static I dot4(I acc, I c, I xb) { return dot_bytes(acc, c, xb); }  // codes <= 15: no saturation
  // Q4 x A8 sums kept in int16 lanes for the 4 blocks of a G = 32 group (quant_avx2.h: at most
  // 4 x 7620 = 30480 per lane), then widened once.
  static constexpr int kQ4Blocks16 = 4;
  static I dot4_pair16(I acc16, I lo, I x0, I hi, I x1) {
    return _mm512_add_epi16(
        acc16, _mm512_add_epi16(_mm512_maddubs_epi16(lo, x0), _mm512_maddubs_epi16(hi, x1)));
  }
  static I widen16(I acc, I acc16) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(acc16, _mm512_set1_epi16(1)));
  }
};

}  // namespace

const QuantTable& quant_avx512_kernels() {
  static const QuantTable t = make_quant_table<Avx512Q>("avx512");
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
