// avx2 instantiation of the SIMD kernels (compiled with the avx2 flags; called only after
// dispatch.cpp has checked CPUID/XGETBV). RoPE and kv_store stay scalar: they touch little data.
#if defined(__x86_64__)
#include "backend/cpu/simd_avx2.h"
#include "backend/cpu/simd_kernels.h"

namespace edgevl::cpu {

const KernelTable& avx2_kernels() {
  static const KernelTable t = [] {
    KernelTable k = scalar_kernels();
    k.name = "avx2";
    k.matmul_cols = matmul_cols_v<Avx2>;
    k.attention_one = attention_one_v<Avx2>;
    k.rmsnorm = rmsnorm_v<Avx2>;
    k.layernorm = layernorm_v<Avx2>;
    k.silu_mul = silu_mul_v<Avx2>;
    k.gelu_erf = gelu_erf_v<Avx2>;
    k.add = add_v<Avx2>;
    k.convert_to_f32 = convert_to_f32_v<Avx2>;
    k.softmax_rows = softmax_rows_v<Avx2>;
    return k;
  }();
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
