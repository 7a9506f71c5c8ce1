#pragma once
// One projection y = x W^T (+ bias) with W in any stored type (F32/F16/BF16, Q8, Q4 with the
// activation mode the tensor was compiled for). The single place that maps a tensor entry to
// its kernel: the executor's MatMul op and the compiler's quantization search both use it, so
// what calibration measures is what the runtime runs.
#include <cstdint>

#include "format/evb.h"

namespace edgevl {
namespace cpu {
class ThreadPool;
}

// x: [M][K] floats, w: the tensor's stored bytes (shape [N][K]), y: [M][N].
// portable: the numerics every CPU computes bit for bit (W4A8 through the integer kernels, F16
// through matmul()), instead of the AMX routes of large calls (Q4 prefill requantized to int8,
// the F16 split): compile-time searches use it, so that a binary does not depend on the CPU
// that compiled it, and they measure the W4A8 numerics decode runs.
// row_invariant: each row of y bit-identical to that row computed alone (M = 1), for Q8 / Q4
// weights (quant.h); batched decode uses it, so that a sequence's result does not depend on the
// others in its step. No effect on F32 / F16 / BF16 weights, whose kernels change with M.
void run_linear(cpu::ThreadPool& pool, const float* x, int64_t M, const TensorEntry& w,
                const void* data, const float* bias, float* y, bool portable = false,
                bool row_invariant = false);

}  // namespace edgevl
