// Armv8.2 dot product (FEAT_DotProd: SDOT) instantiation of the quantized kernels: the NEON
// traits with the int8 dot product of 4 k per int32 lane as one SDOT instead of four
// instructions. Compiled with -march=armv8.2-a+dotprod (the _dotprod suffix); the dispatcher
// calls it only after getauxval(AT_HWCAP) reported asimddp.
#include "backend/cpu/arm/neon/quant_neon.h"

namespace edgevl::cpu {
namespace {

struct DotprodQ : NeonQ {
  // SDOT needs no temporaries: 6 rows x 1 panel = 24 int32 accumulators + 4 weight vectors +
  // a broadcast of the 32 registers.
  static constexpr int MR8 = 6;
  static I dot8(I acc, I w, I xb) {
    return vdotq_s32(acc, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(xb));
  }
  static I dot4(I acc, I c, I xb) { return dot8(acc, c, xb); }  // codes 0..15 are valid s8
};

}  // namespace

const QuantTable& quant_dotprod_kernels() {
  static const QuantTable t = make_quant_table<DotprodQ>("dotprod");
  return t;
}

}  // namespace edgevl::cpu
