#pragma once
// The bf16p weight layout (DType::BF16P): a bf16 matrix W[N][K] stored the way the AMX-BF16
// GEMM reads its B operand, so that nothing is repacked at run time. Panel p holds rows
// 16p..16p+15; inside it, k pair j (k = 2j, 2j+1) of row n is the 32-bit word at
// [j][n % 16], low half k = 2j: element (n, k) at (n / 16) * 16 * Kp + (k / 2) * 32 +
// (n % 16) * 2 + k % 2, with Kp = K rounded up to 32 and rows past N / columns past K zero.
// One tile row (64 bytes) is then 16 columns x one k pair, and a panel's 32-k step is one
// contiguous 1 KB tile. The same 64 bytes are VDPBF16PS's weight operand (16 columns, each
// dword the pair k, k + 1 of one column) against a broadcast activation pair, so the AVX512-BF16
// GEMM reads the panels in place too. Packing happens in the compiler; kernels without AMX or
// AVX512-BF16 unpack.
#include <cstddef>
#include <cstdint>

namespace edgevl::cpu {

size_t bf16_panel_bytes(int64_t N, int64_t K);
// Kp: K rounded up to 32.
inline int64_t bf16_panel_k(int64_t K) {
  return (K + 31) / 32 * 32;
}
// Where element (n, k) of the matrix lives in its panels (Kp = bf16_panel_k(K)).
inline size_t bf16_panel_index(int64_t n, int64_t k, int64_t Kp) {
  return size_t((n / 16) * 16 * Kp + (k / 2) * 32 + (n % 16) * 2 + k % 2);
}
// w: [N][K] bf16 row-major -> dst (bf16_panel_bytes(N, K) bytes).
void pack_bf16_panels(const uint16_t* w, int64_t N, int64_t K, uint16_t* dst);
// Rows [n0, n1) of the packed matrix back to row-major [n1 - n0][K].
void unpack_bf16_panels(const uint16_t* src, int64_t N, int64_t K, int64_t n0, int64_t n1,
                        uint16_t* w);

}  // namespace edgevl::cpu
