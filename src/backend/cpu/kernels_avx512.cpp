// avx512 instantiation of the SIMD kernels (compiled with the avx512 flags; called only after
// dispatch.cpp has checked CPUID/XGETBV). RoPE and kv_store stay scalar: they touch little data.
#if defined(__x86_64__)
#include "backend/cpu/simd_avx512.h"
#include "backend/cpu/simd_kernels.h"

namespace edgevl::cpu {

const KernelTable& avx512_kernels() {
  static const KernelTable t = [] {
    KernelTable k = scalar_kernels();
    k.name = "avx512";
    k.matmul_cols = matmul_cols_v<Avx512>;
    k.attention_one = attention_one_v<Avx512>;
    k.rmsnorm = rmsnorm_v<Avx512>;
    k.layernorm = layernorm_v<Avx512>;
    k.silu_mul = silu_mul_v<Avx512>;
    k.gelu_erf = gelu_erf_v<Avx512>;
    k.add = add_v<Avx512>;
    k.convert_to_f32 = convert_to_f32_v<Avx512>;
    k.softmax_rows = softmax_rows_v<Avx512>;
    return k;
  }();
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
