#pragma once
// The SelfAttention op (the vision tower's full, non-causal attention over all rows of a tile),
// with its three implementations: the fused AMX-BF16 kernel (attention_amx.cpp), the bf16
// contract on other CPUs (matmuls on bf16-rounded K and V), and f32.
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

// bf16: the tower's matmuls are bf16, so is its attention (see executor.cpp). scratch: the
// f32 path's per-head buffers (GraphRunner::scratch_floats).
void run_self_attention(cpu::ThreadPool& pool, const Op& op, const SelfAttentionIo& io, bool bf16,
                        float* scratch);

}  // namespace edgevl
