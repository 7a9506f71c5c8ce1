#include "compiler/graph_passes.h"

#include <algorithm>

#include "core/error.h"
#include "graph/bf16_blocks.h"
#include "graph/planner.h"

namespace edgevl::compiler {

namespace {

std::vector<DType> value_types(const Graph& g, const std::vector<TensorEntry>& tensors) {
  std::vector<DType> types;
  for (const Value& v : g.values)
    types.push_back(v.kind == ValueKind::Weight ? tensors.at(size_t(v.weight)).dtype : v.dtype);
  return types;
}

}  // namespace

void fuse_matmul_epilogues(Graph& g) {
  std::vector<int> reads(g.values.size(), 0);
  for (const Op& op : g.ops)
    for (int32_t id : op.inputs) ++reads[size_t(id)];
  std::vector<Op> ops;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    ops.push_back(op);
    if (op.type != OpType::MatMul || op.matmul().epilogue != Epilogue::kNone ||
        i + 1 == g.ops.size() || reads[size_t(op.output)] != 1 || op.output == g.output)
      continue;
    // Only the op right after: its other operand then exists when the matmul runs.
    const Op& next = g.ops[i + 1];
    const bool gelu = next.type == OpType::GeluErf && next.inputs[0] == op.output;
    const bool add =
        next.type == OpType::Add && (next.inputs[0] == op.output || next.inputs[1] == op.output);
    if ((!gelu && !add) || g.values[size_t(next.output)].shape != g.values[size_t(op.output)].shape)
      continue;
    Op& fused = ops.back();
    fused.output = next.output;
    if (add) fused.inputs.push_back(next.inputs[0] == op.output ? next.inputs[1] : next.inputs[0]);
    fused.set(MatMulAttrs{.epilogue = gelu ? Epilogue::kGeluErf : Epilogue::kAddResidual,
                          .pre = op.output});
    ++i;  // absorbed
  }
  g.ops = std::move(ops);
}

void choose_attention_precision(Graph& g, const std::vector<TensorEntry>& tensors) {
  bool any_matmul = false, all_bf16 = true, all_f16 = true;
  for (const Op& op : g.ops)
    if (op.type == OpType::MatMul) {
      any_matmul = true;
      const DType t = tensors.at(size_t(g.values[size_t(op.inputs[1])].weight)).dtype;
      all_bf16 &= t == DType::BF16 || t == DType::BF16P || t == DType::Q8 || t == DType::Q4;
      all_f16 &= t == DType::F16;
    }
  // A tower whose projections are in bf16 or lower has opted into bf16 precision: rounding K
  // and V to bf16 as well lets its attention run on the bf16 kernels. An f16 tower gets the
  // near-f32 split kernel instead of f32 matmuls.
  const AttentionPrecision p = !any_matmul ? AttentionPrecision::kF32
                               : all_bf16  ? AttentionPrecision::kBf16
                               : all_f16   ? AttentionPrecision::kNearF32
                                           : AttentionPrecision::kF32;
  for (Op& op : g.ops)
    if (op.type == OpType::SelfAttention) {
      AttentionAttrs a = op.attention();
      a.precision = p;
      op.set(a);
    }
}

void mark_bf16_block_handoffs(Graph& g, const std::vector<TensorEntry>& tensors) {
  const std::vector<DType> types = value_types(g, tensors);
  for (size_t id = 0; id < g.values.size(); ++id)
    if (g.values[id].kind == ValueKind::Activation)
      g.values[id].bf16_blocks = bf16_blocks_refusal(g, int32_t(id), types).empty();
}

void finish_graph(Graph& g, const std::vector<TensorEntry>& tensors, bool cpu_handoffs) {
  fuse_matmul_epilogues(g);
  choose_attention_precision(g, tensors);
  if (cpu_handoffs) mark_bf16_block_handoffs(g, tensors);
  plan_arena(g);
}

}  // namespace edgevl::compiler
