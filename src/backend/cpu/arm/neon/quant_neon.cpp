// armv8-a baseline instantiation of the quantized kernels: the int8 dot product of 4 k per
// int32 lane is SMULL + SMULL2 + ADDP + SADALP (quant_neon.h), 4 instructions per 16
// multiply-adds. No extra flags: every AArch64 core runs it.
#include "backend/cpu/arm/neon/quant_neon.h"

namespace edgevl::cpu {

const QuantTable& quant_neon_kernels() {
  static const QuantTable t = make_quant_table<NeonQ>("neon");
  return t;
}

}  // namespace edgevl::cpu
