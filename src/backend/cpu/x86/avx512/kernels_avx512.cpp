// avx512 instantiation of the SIMD kernels (compiled with the avx512 flags; called only after
// dispatch.cpp has checked CPUID/XGETBV). RoPE and kv_store stay scalar: they touch little data.
#if defined(__x86_64__)
#include "backend/cpu/x86/avx512/simd_avx512.h"
#include "backend/cpu/simd/simd_kernels.h"

namespace edgevl::cpu {

const KernelTable& avx512_kernels() {
  static const KernelTable t = simd_kernel_table<Avx512>("avx512");
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
