#pragma once
// Prefill (chunked, causal) attention of one layer over its KV cache: the fused AMX-BF16 kernel
// (cpu::causal_attention_bf16) for f32 / f16 caches on CPUs with AMX-BF16, else f32 matmuls per
// KV head. The decode path (one query row) is cpu::attention; this is the many-rows path of the
// Attention op, run after the chunk's keys and values were stored in the cache.
#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "graph/graph.h"
#include "runtime/execution/bound_graph.h"

namespace edgevl {

// y[m][nh*hd] = causal attention of the chunk's queries q[m][nh*hd] over the first n_kv cached
// positions (query i sees keys j <= positions[i]). op: i0 = heads, i1 = KV heads, i2 = head
// dim, f0 = scale. kc / vc: the layer's K and V caches as KvCaches describes them. Buffers are
// per thread (they grow to the largest chunk once).
void causal_attention(cpu::ThreadPool& pool, const Op& op, const float* q, int64_t m,
                      const uint8_t* kc, const uint8_t* vc, const KvCaches& kv, int64_t n_kv,
                      const int32_t* positions, float* y);

}  // namespace edgevl
