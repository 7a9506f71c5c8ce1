#pragma once
// Integer/float vector traits of the quantized kernels (quant_simd.h) for AArch64 Advanced SIMD:
// 4 int32 / 4 floats per register, so one 16-byte load of a Q8 panel block is 4 weight rows x 4
// k, exactly the operand of the int8 dot product instructions. NeonQ is the armv8-a baseline
// (SMULL + ADDP + SADALP); the dotprod file derives from it and replaces dot8 / dot4 by SDOT.
// Include only from files under src/backend/cpu/arm/: everything is in an anonymous namespace.
#include <arm_neon.h>

#include <cstring>

#include "backend/cpu/simd/quant_simd.h"

namespace edgevl::cpu {
namespace {

struct NeonQ {
  using I = int32x4_t;
  using F = float32x4_t;
  static constexpr int W = 4;  // a 16-row panel is four vectors
  // Register tiles (32 vector registers): Q8 4 rows x 1 panel = 16 int32 accumulators + 4
  // weight vectors + a broadcast + the SMULL temporaries; Q4 2 x 1 = 8 int32 + 8 float
  // accumulators + 8 nibble vectors; A16 4 x 1 = 16 float accumulators + 4 weights.
  static constexpr int MR8 = 4, NP8 = 1, MR4 = 2, NP4 = 1, MRF = 4, NPF = 1;
  static constexpr int NPV = 2;
  static constexpr int NPV4 = 2;  // panels per Q4 GEMV step
  // Signed activations times signed weights: no bias, no correction term.
  static constexpr bool kQ8Biased = false;
  // No W4A8 prefill route: the Q4 product (codes straight into the same SMULL sequence) costs
  // what the Q8 one does, so requantizing would only add work.
  static constexpr int64_t kQ4PrefillMinRows = 0;
  static constexpr int kQ4Blocks16 = 0;  // Q4 x A8 straight into int32 (dot4)

  static void prefetch(const void* p) { __builtin_prefetch(p); }
  static I izero() { return vdupq_n_s32(0); }
  static I loadi(const void* p) { return vld1q_s32(static_cast<const int32_t*>(p)); }
  static I set1i(int32_t v) { return vdupq_n_s32(v); }
  static I sub(I a, I b) { return vsubq_s32(a, b); }
  static I slli7(I a) { return vshlq_n_s32(a, 7); }
  static I mullo(I a, I b) { return vmulq_s32(a, b); }
  static I addi(I a, I b) { return vaddq_s32(a, b); }
  static I andi(I a, I b) { return vandq_s32(a, b); }
  static I ori(I a, I b) { return vorrq_s32(a, b); }
  template <int S>
  static I slli(I a) {
    return vshlq_n_s32(a, S);
  }
  static void storei(void* p, I v) { vst1q_s32(static_cast<int32_t*>(p), v); }
  static I cvtr(F v) { return vcvtnq_s32_f32(v); }  // round to nearest even
  static I load_u8x(const uint8_t* p) {             // 4 bytes -> 4 int32
    uint32_t v;
    std::memcpy(&v, p, 4);
    const uint16x8_t h = vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v)));
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
  }
  static I bcast8(int32_t x) { return vdupq_n_s32(x); }
  static I bcast4(int32_t x) { return vdupq_n_s32(x); }
  // acc[r] += sum over 4 k of w[r][k] * x[k], r = the 4 rows in the register. SMULL / SMULL2
  // give the 16 products as int16, ADDP adds the pairs (k0+k1, k2+k3 of each row), SADALP adds
  // those pairs into the row's int32. |w|, |x| <= 127 (quant.h) keep a pair within int16.
  static I dot_bytes(I acc, I w, I x) {
    const int8x16_t a = vreinterpretq_s8_s32(w), b = vreinterpretq_s8_s32(x);
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_high_s8(a, b);
    return vpadalq_s16(acc, vpaddq_s16(lo, hi));
  }
  static I dot8(I acc, I w, I xb) { return dot_bytes(acc, w, xb); }
  static I dot4(I acc, I c, I xb) { return dot_bytes(acc, c, xb); }  // codes 0..15
  static I nib_lo(I v) {
    return vreinterpretq_s32_u8(vandq_u8(vreinterpretq_u8_s32(v), vdupq_n_u8(15)));
  }
  static I nib_hi(I v) { return vreinterpretq_s32_u8(vshrq_n_u8(vreinterpretq_u8_s32(v), 4)); }
  template <int KK>  // byte KK of each int32, sign-extended
  static I sext(I v) {
    if constexpr (KK == 3)
      return vshrq_n_s32(v, 24);
    else
      return vshrq_n_s32(vshlq_n_s32(v, 24 - 8 * KK), 24);
  }
  // Byte KK of each int32 as a float: TBL moves it to the lane's top byte (index 255 reads 0
  // into the bytes below) and SCVTF #24 divides the lane by 2^24, exactly; 2 instructions where
  // sext + cvt take 3 (byte 3 is one SSHR from the top already: the same 2).
  template <int KK>
  static F byte_f(I v) {
    if constexpr (KK == 3) {
      return vcvtq_f32_s32(vshrq_n_s32(v, 24));
    } else {
      constexpr uint8_t z = 255;
      alignas(16) static constexpr uint8_t idx[16] = {z, z, z, KK,     z, z, z, 4 + KK,
                                                      z, z, z, 8 + KK, z, z, z, 12 + KK};
      const int8x16_t top = vqtbl1q_s8(vreinterpretq_s8_s32(v), vld1q_u8(idx));
      return vcvtq_n_f32_s32(vreinterpretq_s32_s8(top), 24);
    }
  }
  template <int S>  // bits S..S+3 of each int32
  static I nib(I v) {
    if constexpr (S == 0)
      return vandq_s32(v, vdupq_n_s32(15));
    else if constexpr (S == 28)
      return vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(v), 28));
    else
      return vandq_s32(vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(v), S)),
                       vdupq_n_s32(15));
  }

  static F zerof() { return vdupq_n_f32(0.f); }
  static F set1f(float v) { return vdupq_n_f32(v); }
  static F cvt(I v) { return vcvtq_f32_s32(v); }
  static F loadf(const float* p) { return vld1q_f32(p); }
  // 4 IEEE f16 (the Q4 group scales) -> f32 (FCVTL, exact; armv8-a baseline).
  static F loadh(const uint8_t* p) {
    uint16_t h[4];
    std::memcpy(h, p, sizeof h);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
  }
  static F loadf_n(const float* p, int n) {
    alignas(16) float buf[4] = {0.f, 0.f, 0.f, 0.f};
    std::memcpy(buf, p, size_t(n) * sizeof(float));
    return vld1q_f32(buf);
  }
  static void storef(float* p, F v) { vst1q_f32(p, v); }
  static void storef_n(float* p, F v, int n) {
    alignas(16) float buf[4];
    vst1q_f32(buf, v);
    std::memcpy(p, buf, size_t(n) * sizeof(float));
  }
  static F addf(F a, F b) { return vaddq_f32(a, b); }
  // The empty asm keeps the product rounded (GCC would contract it with a following add into
  // an FMLA), so the A8 scaling matches the scalar reference bit for bit.
  static F mulf(F a, F b) {
    F r = vmulq_f32(a, b);
    asm("" : "+w"(r));
    return r;
  }
  static F fmaf(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F fnmaf(F a, F b, F c) { return vfmsq_f32(c, a, b); }  // c - a*b

  static float absmax(const float* x, int64_t n) {
    float32x4_t m = vdupq_n_f32(0.f);
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
    if (k < n) m = vmaxq_f32(m, vabsq_f32(loadf_n(x + k, int(n - k))));
    return vmaxvq_f32(m);
  }
  // q = clamp(round_even(x * inv), -127, 127), 8 at a time (the narrowing saturates first, the
  // max then lifts -128 to -127).
  static void quant_row(const float* x, int64_t n, float inv, int8_t* q) {
    const float32x4_t vi = vdupq_n_f32(inv);
    for (int64_t k = 0; k < n; k += 8) {
      const int cnt = int(n - k < 8 ? n - k : 8);
      alignas(16) float buf[8] = {};
      const float* src = x + k;
      if (cnt < 8) {
        std::memcpy(buf, src, size_t(cnt) * sizeof(float));
        src = buf;
      }
      const int32x4_t a = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(src), vi));
      const int32x4_t b = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(src + 4), vi));
      const int8x8_t r =
          vmax_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))), vdup_n_s8(-127));
      if (cnt == 8) {
        vst1_s8(q + k, r);
      } else {
        alignas(8) int8_t out[8];
        vst1_s8(out, r);
        std::memcpy(q + k, out, size_t(cnt));
      }
    }
  }
};

}  // namespace
}  // namespace edgevl::cpu
