// AVX-VNNI (VEX-encoded vpdpbusd on 256-bit vectors; Alder Lake / Sapphire Rapids and later)
// instantiation of the quantized kernels: the AVX2 traits with the int8 dot products replaced
// by vpdpbusd. Compiled with the avxvnni flags; quant_dispatch.cpp calls it only after
// cpu_features() reported AVX2+FMA+F16C+BMI2 and AVX-VNNI. Used when AVX-512 VNNI is absent.
#if defined(__x86_64__)
#include "backend/cpu/x86/avx2/quant_avx2.h"

namespace edgevl::cpu {
namespace {

struct AvxVnniQ : Avx2Q {
  // Like the AVX-512 path: the dispatcher stores Q8 activations as xq + 128 (u8), the kernel
  // removes 128 * (row sum of q).
  static constexpr bool kQ8Biased = true;
  // vpdpbusd needs no temporaries (vpmaddubsw + vpmaddwd + vpaddd do): Q8 tiles of 6 rows x 1
  // panel = 12 int32 accumulators + 2 weight vectors + 1 broadcast of the 16 ymm. quant_bench
  // (Zen 5, 1 thread, GOP/s of CPU time): gemm512_q8a8 376 vs 279 with AVX2's 3-row tiles,
  // gemm128_down_q8a8 385 vs 275.
  static constexpr int MR8 = 6;
  static constexpr int MR8B = MR8;  // decode batches too (AVX2's 4 rows would mean more tiles)
  // Q8 GEMV: 2 panels a step (one vpdpbusd per block computes faster than AVX2's five
  // instructions; 4 panels measured 33.6-37.9 GB/s against 35.8-41.2 with 2 threads on Zen 5).
  static constexpr int NPV = 2;
  // The W4A8 prefill route pays here (the Q8 product is one vpdpbusd): quant_bench
  // BM_gemm_rows_q4a8 (1 thread, GOP/s of CPU time; W4A8 tiles vs requantized) M=32 206 vs 200,
  // 48 184 vs 233, 64 164 vs 239, 512 183 vs 315.
  static constexpr int64_t kQ4PrefillMinRows = 32;
  static I bcast8(int32_t x) { return _mm256_set1_epi32(x); }
  // Through inline asm with the accumulator tied, as in quant_avx512vnni.cpp: GCC 12 copies the
  // intrinsic's accumulator to another register and back around every instruction.
  static I dpbusd(I acc, I u, I s) {
    asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
    return acc;
  }
  static I dot8(I acc, I w, I xb) { return dpbusd(acc, xb, w); }
  static I bcast4(int32_t x) { return _mm256_set1_epi32(x); }
  static I dot4(I acc, I c, I xb) { return dpbusd(acc, c, xb); }
  static constexpr int kQ4Blocks16 = 0;   // one vpdpbusd per block: no int16 sums
  static constexpr bool kQ4Gemv = false;  // its GEMV needs kQ4Blocks16 == 4
};

}  // namespace

const QuantTable& quant_avxvnni_kernels() {
  static const QuantTable t = make_quant_table<AvxVnniQ>("avxvnni");
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
