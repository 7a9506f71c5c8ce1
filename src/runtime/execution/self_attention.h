#pragma once
// The SelfAttention op (the vision tower's full, non-causal attention over all rows of a tile),
// with its implementations: the fused AMX-BF16 kernel (attention_amx.cpp) under the bf16
// contract and, for f16 towers, its near-f32 split form; the fused VDPBF16PS kernel of
// AVX512-BF16 CPUs without AMX (bf16_gemm_avx512bf16.cpp, bf16 contract only); the bf16
// contract on other CPUs (matmuls on bf16-rounded K and V); and f32.
#include <cstdint>

#include "graph/graph.h"

namespace edgevl {
namespace cpu {
class ThreadPool;
}

struct SelfAttentionIo {
  const float *q, *k, *v;  // rows of qc (q) and kc (k, v) floats; head h at column h * head_dim
  int64_t qc, kc, m;       // m rows
  float* y;                // [m][qc]
  uint16_t* y_blocks;      // non-null: the output as bf16 blocks instead (fused kernel only)
};

// At the op's precision (AttentionAttrs::precision, chosen by the compiler).
void run_self_attention(cpu::ThreadPool& pool, const Op& op, const SelfAttentionIo& io);

}  // namespace edgevl
