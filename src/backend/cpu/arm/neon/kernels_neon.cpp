// NEON instantiation of the float kernels (simd_kernels.h over the Neon traits). Advanced SIMD
// is part of armv8-a, so this file needs no extra flags and every AArch64 level uses it.
#include "backend/cpu/arm/neon/simd_neon.h"
#include "backend/cpu/simd/simd_kernels.h"

namespace edgevl::cpu {

const KernelTable& neon_kernels() {
  static const KernelTable t = simd_kernel_table<Neon>("neon");
  return t;
}

}  // namespace edgevl::cpu
