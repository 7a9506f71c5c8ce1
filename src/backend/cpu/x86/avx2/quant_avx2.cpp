// AVX2 instantiation of the quantized kernels (compiled with the avx2 flags; quant_dispatch.cpp
// calls it only after cpu_features() reported AVX2+FMA+F16C+BMI2). Without VNNI the int8 dot
// product is vpmaddubsw (u8 x s8 -> pairs of int16) + vpmaddwd with ones (-> int32).
#if defined(__x86_64__)
#include "backend/cpu/x86/avx2/quant_avx2.h"

namespace edgevl::cpu {

const QuantTable& quant_avx2_kernels() {
  static const QuantTable t = make_quant_table<Avx2Q>("avx2");
  return t;
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
