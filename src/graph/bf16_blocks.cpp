#include "graph/bf16_blocks.h"

#include <algorithm>

#include "core/packed_layout.h"

namespace edgevl {

bool is_bf16_matmul(const Op& op, const std::vector<DType>& value_types) {
  if (op.type != OpType::MatMul) return false;
  const DType t = value_types[size_t(op.inputs[1])];
  return t == DType::BF16 || t == DType::BF16P;
}

std::string bf16_blocks_refusal(const Graph& g, int32_t id, const std::vector<DType>& value_types) {
  const Value& v = g.values[size_t(id)];
  if (v.kind != ValueKind::Activation || v.dtype != DType::F32 || v.shape.size() != 2)
    return "not a 2-d f32 activation";
  if (id == g.input || id == g.output) return "the graph's input or output";
  if (v.shape[1] % 32 != 0) return "columns not a multiple of 32";
  // The blocks start at the slot's first 64-byte boundary and must end inside it.
  if (v.bytes() < size_t(layout::bf16_blocks_bytes(v.shape[0], v.shape[1])) + 64)
    return "its slot is too small for the blocks";
  const Op* producer = nullptr;
  int readers = 0;
  for (const Op& op : g.ops) {
    if (op.output == id) producer = &op;
    const auto n = std::count(op.inputs.begin(), op.inputs.end(), id);
    if (n == 0) continue;
    // The blocks are the activation of a bf16 matmul, and nothing else of any op.
    if (!is_bf16_matmul(op, value_types) || op.inputs[0] != id || n != 1)
      return "read by an op other than a bf16 matmul's activation";
    ++readers;
  }
  if (readers == 0) return "never read";
  if (!producer) return "no producer";
  switch (producer->type) {
    case OpType::LayerNorm: return "";
    case OpType::SelfAttention:
      return producer->attention().precision == AttentionPrecision::kBf16 &&
                     producer->attention().head_dim % 16 == 0
                 ? ""
                 : "made by a self-attention that is not bf16 with heads of 16k";
    case OpType::MatMul:
      return is_bf16_matmul(*producer, value_types) &&
                     producer->matmul().epilogue == Epilogue::kGeluErf
                 ? ""
                 : "made by a matmul that is not bf16 with a GELU epilogue";
    default: return std::string("made by ") + op_name(producer->type);
  }
}

}  // namespace edgevl
