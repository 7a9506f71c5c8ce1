#pragma once
// Vector traits for AArch64 Advanced SIMD (NEON), the float kernels of simd_kernels.h. Include
// only from files under src/backend/cpu/arm/: everything is in an anonymous namespace, so each
// file gets its own private copy.
//
// R is a pair of 128-bit registers (8 floats), not one: the shared kernels assume whole
// keys' scores of up to 8 heads fit one vector (attention_part_t), and two independent
// registers per operation is also what keeps both FMA pipes of an A76-class core busy. With
// 32 vector registers a 2 x 4 matmul tile holds 16 accumulators + 8 weight + 2 x registers.
#include <arm_neon.h>

#include <cstring>

#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {
namespace {

struct Neon {
  struct R {
    float32x4_t lo, hi;
  };
  static constexpr int W = 8;
  static constexpr int MR = 2;
  static constexpr int NR = 4;
  // bf16p panel tile (matmul_bf16p_cols): 4 rows x 16 columns = 8 accumulator pairs.
  static constexpr int MRP = 4, NPP = 1;

  template <class Op>
  static R map(R a, R b, Op op) {
    return {op(a.lo, b.lo), op(a.hi, b.hi)};
  }

  static R zero() { return {vdupq_n_f32(0.f), vdupq_n_f32(0.f)}; }
  static R set1(float v) { return {vdupq_n_f32(v), vdupq_n_f32(v)}; }
  static R load(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
  // FCVTL (half to single) is in the armv8-a baseline; half arithmetic is not needed for it.
  static R load(const f16_t* p) {
    const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(p));
    return {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))),
            vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)))};
  }
  static R load(const bf16_t* p) {  // bf16 = the high half of an f32
    const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(p));
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
            vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
  }
  // W dwords of a bf16p panel row (columns n..n+W-1, each dword the pair k, k + 1): the f32
  // weights at k (low halves) and at k + 1 (high halves).
  static void load_bf16_pairs(const uint16_t* p, R& even, R& odd) {
    const uint32x4_t a = vld1q_u32(reinterpret_cast<const uint32_t*>(p));
    const uint32x4_t b = vld1q_u32(reinterpret_cast<const uint32_t*>(p) + 4);
    const uint32x4_t hi = vdupq_n_u32(0xFFFF0000u);
    even = {vreinterpretq_f32_u32(vshlq_n_u32(a, 16)), vreinterpretq_f32_u32(vshlq_n_u32(b, 16))};
    odd = {vreinterpretq_f32_u32(vandq_u32(a, hi)), vreinterpretq_f32_u32(vandq_u32(b, hi))};
  }
  static R load(const int8_t* p) {
    const int16x8_t w = vmovl_s8(vld1_s8(p));
    return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), vcvtq_f32_s32(vmovl_high_s16(w))};
  }
  // Tails: copy the valid part into a zeroed buffer (never reads past an mmapped weight's end).
  template <class T>
  static R load_n(const T* p, int n) {
    alignas(16) T buf[W];
    std::memset(buf, 0, sizeof(buf));
    std::memcpy(buf, p, size_t(n) * sizeof(T));
    return load(buf);
  }
  static void store(float* p, R v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
  }
  static void store_n(float* p, R v, int n) {
    alignas(16) float buf[W];
    store(buf, v);
    std::memcpy(p, buf, size_t(n) * sizeof(float));
  }

  static void prefetch(const void* p) { __builtin_prefetch(p); }

  static R add(R a, R b) {
    return map(a, b, [](auto x, auto y) { return vaddq_f32(x, y); });
  }
  static R sub(R a, R b) {
    return map(a, b, [](auto x, auto y) { return vsubq_f32(x, y); });
  }
  static R mul(R a, R b) {
    return map(a, b, [](auto x, auto y) { return vmulq_f32(x, y); });
  }
  static R div(R a, R b) {
    return map(a, b, [](auto x, auto y) { return vdivq_f32(x, y); });
  }
  static R max(R a, R b) {
    return map(a, b, [](auto x, auto y) { return vmaxq_f32(x, y); });
  }
  static R min(R a, R b) {
    return map(a, b, [](auto x, auto y) { return vminq_f32(x, y); });
  }
  static R fma(R a, R b, R c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
  static R fnma(R a, R b, R c) {  // c - a*b
    return {vfmsq_f32(c.lo, a.lo, b.lo), vfmsq_f32(c.hi, a.hi, b.hi)};
  }
  // A product the compiler may not contract into an FMA with a following add (GCC treats the
  // intrinsics as vector operators): rope_v's bit-identity with the scalar kernel needs it.
  static R mul_rounded(R a, R b) {
    R r = mul(a, b);
    asm("" : "+w"(r.lo), "+w"(r.hi));
    return r;
  }
  static R abs(R a) { return {vabsq_f32(a.lo), vabsq_f32(a.hi)}; }
  // x < 0 ? a : b, by x's sign bit (as x86's blendv: -0.0 selects a).
  static R select_neg(R x, R a, R b) {
    const auto neg = [](float32x4_t v) {
      return vreinterpretq_u32_s32(vshrq_n_s32(vreinterpretq_s32_f32(v), 31));
    };
    return {vbslq_f32(neg(x.lo), a.lo, b.lo), vbslq_f32(neg(x.hi), a.hi, b.hi)};
  }
  static R round(R a) { return {vrndnq_f32(a.lo), vrndnq_f32(a.hi)}; }  // nearest even
  // 2^n for integral-valued n in [-126, 127].
  static R pow2(R n) {
    const auto p = [](float32x4_t v) {
      const int32x4_t e = vaddq_s32(vcvtnq_s32_f32(v), vdupq_n_s32(127));
      return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
    };
    return {p(n.lo), p(n.hi)};
  }

  static float hsum(R v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }
  static float hmax(R v) { return vmaxvq_f32(vmaxq_f32(v.lo, v.hi)); }
  // Four horizontal sums at once: pairwise adds (FADDP) instead of four reductions.
  static void hsum4(R a, R b, R c, R d, float* out) {
    const float32x4_t ab = vpaddq_f32(vaddq_f32(a.lo, a.hi), vaddq_f32(b.lo, b.hi));
    const float32x4_t cd = vpaddq_f32(vaddq_f32(c.lo, c.hi), vaddq_f32(d.lo, d.hi));
    vst1q_f32(out, vpaddq_f32(ab, cd));
  }
};

}  // namespace
}  // namespace edgevl::cpu
