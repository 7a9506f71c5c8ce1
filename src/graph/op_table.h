#pragma once
// The op table: one entry per op kind, the one place that says what an op is. Its name, how
// many operands it takes and which of them may be weights, the rule its shapes and attributes
// obey (as the output shape they imply), what it costs (FLOPs and bytes, for the profiler and
// `bench`) and whether its output may take an input's arena slot. The loader's validation,
// `read_graph`, the planner, the profiler and `bench` all read this table; the function that
// executes an op lives in the runtime's matching table (runtime/execution/op_runners.cpp), since
// the graph layer knows no kernel.
//
// Adding an op: an OpType value (graph.h, append only), its entry here (op_table.cpp), its
// runner (runtime/execution/op_runners.cpp), its kernels (reference + SIMD) and a test.
// CONTRIBUTING.md says it step by step.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "graph/graph.h"

namespace edgevl {

// What an op's rule sees of each value of its graph: a weight's shape and size as stored in the
// tensor table, an activation's as declared in the graph.
struct ValueInfo {
  std::vector<int64_t> shape;
  double stored_bytes = 0;  // weights: bytes as stored (packed, quantized); activations: 0
  bool weight = false;
};
// One ValueInfo per value of g; `tensor_shape(i)` / `tensor_bytes(i)` give the tensor table's.
template <class ShapeFn, class BytesFn>
std::vector<ValueInfo> value_infos(const Graph& g, ShapeFn tensor_shape, BytesFn tensor_bytes) {
  std::vector<ValueInfo> out(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    out[i].weight = v.kind == ValueKind::Weight;
    out[i].shape = out[i].weight ? tensor_shape(v.weight) : v.shape;
    out[i].stored_bytes = out[i].weight ? double(tensor_bytes(v.weight)) : 0.0;
  }
  return out;
}

// An op of a graph, with its operands resolved.
struct OpView {
  const Graph& g;
  const Op& op;
  const std::vector<ValueInfo>& values;

  int32_t in(size_t i) const { return op.inputs[i]; }
  const std::vector<int64_t>& shape(int32_t id) const { return values[size_t(id)].shape; }
  int64_t rows(int32_t id) const { return shape(id).front(); }
  int64_t cols(int32_t id) const { return shape(id).back(); }
  int64_t numel(int32_t id) const;
  bool weight(int32_t id) const { return values[size_t(id)].weight; }
};

// One execution of an op, for its cost.
struct CostArgs {
  int64_t rows = 0;            // rows of its output that run (the valid rows of a masked chunk)
  double n_kv = 0;             // Attention: the keys each query row attends to (a mean over rows)
  DType kv_type = DType::F16;  // Attention: the KV cache's stored type
  bool per_row_kv = false;     // Attention: each row reads a cache of its own (a decode batch)
};
struct OpCost {
  double flops = 0;         // 2 per multiply-add
  double bytes = 0;         // read and written: weights as stored, activations as f32, the cache
  double weight_bytes = 0;  // the weights' part of `bytes`
  double kv_bytes = 0;      // the KV cache's part of `bytes`
};

struct OpDef {
  OpType type;
  const char* name;
  int min_inputs, max_inputs;
  uint32_t may_be_weight;   // bit i: input i may be a weight (else it must be an activation)
  uint32_t may_be_packed;   // bit i: input i may be stored other than as f32 (packed, quantized)
  bool rows_follow_output;  // every activation input has the output's row count
  // What the stored graph alone must satisfy (attributes naming values, operand counts per
  // attribute), checked when a graph is read; null: nothing beyond the arity. Empty when fine.
  std::string (*structure)(const Graph&, const Op&);
  // The output shape the operands and attributes imply, or {} when they are inconsistent.
  std::vector<int64_t> (*output_shape)(const OpView&);
  OpCost (*cost)(const OpView&, const CostArgs&);
  // The inputs whose arena slot the output may take when they die at this op: the kernel reads
  // each element before writing it. Empty: never.
  std::vector<int32_t> (*in_place)(const Op&);
};

// Every op kind's entry; throws on a value outside the enum (validate it first).
const OpDef& op_def(OpType t);
bool op_type_known(uint32_t t);

// Empty when op's arity and structure hold in g (read_graph, before any weight is known).
std::string op_structure_problem(const Graph& g, const Op& op);
// Empty when op is well formed in g (arity, operand kinds, row counts, shapes, attributes);
// else what is wrong. Checks what the stored graph alone can tell, with weights' shapes.
std::string op_problem(const Graph& g, const Op& op, const std::vector<ValueInfo>& values);

// The cost of op with `args`, by its table entry.
OpCost op_cost(const Graph& g, const Op& op, const std::vector<ValueInfo>& values,
               const CostArgs& args);

}  // namespace edgevl
