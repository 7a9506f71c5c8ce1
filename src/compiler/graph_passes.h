#pragma once
// Passes over a built graph, run by the compiler before the arena is planned. They decide what
// the runtime only carries out: which matmuls absorb the op after them (an epilogue), which
// values may travel between ops as bf16 tile blocks, and at which precision the vision
// tower's self-attention runs. The runtime reads these decisions from the binary; it chooses
// only whether the CPU it runs on has the fused kernels (executor.cpp).
#include <vector>

#include "format/evb.h"
#include "graph/graph.h"

namespace edgevl::compiler {

// A MatMul whose only reader is the GeluErf or Add right after it becomes one MatMul with that
// epilogue (the Add's other operand as the residual, the last input); the product keeps its
// value (and name) as the op's `pre`, and the op writes the absorbed op's output value.
void fuse_matmul_epilogues(Graph& g);

// SelfAttention precision from the graph's projection weights: all stored in bf16 or lower
// (the integer presets' towers) -> bf16; all f16 -> near-f32; else f32.
void choose_attention_precision(Graph& g, const std::vector<TensorEntry>& tensors);

// Flags values that may be handed over as bf16 blocks: every reader a bf16-weight MatMul
// reading it as its activation, a producer with a blocks form (LayerNorm, bf16 SelfAttention,
// a bf16-weight MatMul with a GELU epilogue), and a slot large enough for the blocks.
void mark_bf16_block_handoffs(Graph& g, const std::vector<TensorEntry>& tensors);

// The passes above, then the arena plan (graph/planner.h). `cpu_handoffs` false: no bf16 block
// hand-offs (a binary whose graphs an accelerator shares: values it reads or writes must be
// plain rows).
void finish_graph(Graph& g, const std::vector<TensorEntry>& tensors, bool cpu_handoffs = true);

}  // namespace edgevl::compiler
