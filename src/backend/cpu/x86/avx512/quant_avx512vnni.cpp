// AVX-512 + VNNI instantiation of the quantized kernels (compiled with the avx512vnni flags;
// quant_dispatch.cpp calls it only after cpu_features() reported AVX-512 F/BW/VL/DQ + VNNI).
// Int8 dot products use vpdpbusd: 64 u8 x s8 products summed in fours into 16 int32 per
// instruction, so one 64-byte weight block (16 rows x 4 k) is one instruction per row tile.
#if defined(__x86_64__)
#include <cmath>

#include "backend/cpu/x86/avx512/quant_zmm.h"

namespace edgevl::cpu {
namespace {

struct Vnni512 : ZmmQuant {
  // Register tiles (32 zmm): Q8 12x2 int32 accumulators + 2 weight blocks; Q4 6x2 int32 + 6x2
  // float accumulators + 4 nibble vectors; A16 6x4 float accumulators + 4 weight vectors.
  static constexpr int MR8 = 12, NP8 = 2, MR4 = 6, NP4 = 2, MRF = 6, NPF = 4;
  static constexpr int NPV = 4;  // panels per GEMV step: 4 independent accumulator chains
  // Q4 GEMV: 8 panels a step (1-thread cold GEMV +17% over 4 on Zen 5; Q8 gains nothing)
  static constexpr int NPV4 = 8;
  // vpdpbusd takes u8 x s8: Q8 feeds xq ^ 0x80 = xq + 128 as the unsigned side (the
  // dispatcher stores the activations biased for this table) and removes 128 * (row sum of q)
  // afterwards.
  static constexpr bool kQ8Biased = true;
  // W4A8 calls from this many rows take the requantizing prefill route (q4_prefill_v).
  // quant_bench BM_gemm_rows_q4a8 (K=896, N=4864, 1 thread, GOP/s of CPU time, Zen 5, busy
  // machine; W4A8 tiles vs requantized): M=24 353 vs 307, 32 346 vs 376, 48 327 vs 435.
  static constexpr int64_t kQ4PrefillMinRows = 32;
  static constexpr int kQ4Blocks16 = 0;  // Q4 x A8 straight into int32 (vpdpbusd)

  static I bcast8(int32_t x) { return _mm512_set1_epi32(x); }  // already biased (table flag)
  // vpdpbusd through inline asm with the accumulator as a tied operand: GCC 12 register-
  // allocates the intrinsic's accumulator badly in the 24-accumulator tiles (a register copy
  // per instruction and the accumulators bounced through the stack every k step).
  static I dpbusd(I acc, I u, I s) {
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
    return acc;
  }
  static I dot8(I acc, I w, I xb) { return dpbusd(acc, xb, w); }
  static I bcast4(int32_t x) { return _mm512_set1_epi32(x); }
  static I dot4(I acc, I c, I xb) { return dpbusd(acc, c, xb); }
};

}  // namespace

const QuantTable& quant_avx512vnni_kernels() {
  static const QuantTable t = make_quant_table<Vnni512>("avx512vnni");
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
