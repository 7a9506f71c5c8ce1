#include "runtime/execution/linear.h"

#include <vector>

#include "backend/cpu/hadamard.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "core/error.h"

namespace edgevl {

void run_linear(cpu::ThreadPool& pool, const float* x, int64_t M, const TensorEntry& w,
                const void* data, const float* bias, float* y, bool portable, bool row_invariant) {
  check(w.shape.size() == 2, "internal: '{}' is not a matrix", w.name);
  const int64_t N = w.shape[0], K = w.shape[1];
  const auto* packed = static_cast<const uint8_t*>(data);
  // The stored rows are W H (evb.h): the input is rotated the same way first, by the int8
  // quantization as it reads each row, or here for float activations (into the calling
  // thread's buffer, reused from call to call).
  const int rotate_in_quant = w.act8 ? w.rotation : 0;
  if (w.rotation && !w.act8) {
    thread_local std::vector<float> rotated;
    if (rotated.size() < size_t(M * K)) rotated.resize(size_t(M * K));  // grows, never shrinks
    cpu::hadamard_rows(pool, x, rotated.data(), M, K, w.rotation);
    x = rotated.data();
  }
  if (w.dtype == DType::Q8)
    cpu::matmul_q8(pool, x, M, K, packed, N, bias, y, w.act8, row_invariant, rotate_in_quant);
  else if (w.dtype == DType::BF16P)
    cpu::matmul_bf16_panels(pool, x, M, K, data, N, bias, y);
  else if (w.dtype == DType::Q4)
    cpu::matmul_q4(pool, x, M, K, packed, N, w.group, w.zero_point, bias, y, w.act8, !portable,
                   row_invariant, rotate_in_quant);
  else if (w.dtype == DType::F16 && !portable)
    cpu::matmul_f16_weights(pool, x, M, K, static_cast<const uint16_t*>(data), N, bias, y);
  else
    cpu::matmul(pool, x, M, K, data, w.dtype, N, bias, y);
}

}  // namespace edgevl
