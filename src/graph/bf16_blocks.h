#pragma once
// The rule for bf16 block hand-offs (Value::bf16_blocks): which values may travel between their
// producer and readers as bf16 tile blocks (kernels.h, matmul_bf16_blocks) instead of f32 rows.
// The compiler flags values by it (compiler/graph_passes.cpp); the runtime checks a loaded
// binary's flags against it before trusting them (executor.cpp), since a flag tells kernels to
// read and write a slot in another layout.
#include <string>
#include <vector>

#include "core/dtype.h"
#include "graph/graph.h"

namespace edgevl {

// value_types: the stored type of every value of g (a weight's tensor type; F32 activations).
// Empty when `value` may be held as blocks; else why not.
std::string bf16_blocks_refusal(const Graph& g, int32_t value,
                                const std::vector<DType>& value_types);

// Whether op is a MatMul on weights stored in bf16 (rows or panels).
bool is_bf16_matmul(const Op& op, const std::vector<DType>& value_types);

}  // namespace edgevl
