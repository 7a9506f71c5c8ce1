#pragma once
// Runs one graph: every value resolved to a pointer once (weights into the mapping,
// activations into the arena), then each op through its runner (op_runners.h).
// Shared by the LLM session and the vision encoder; nothing is allocated while running.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/op_table.h"
#include "runtime/execution/bound_graph.h"
#include "runtime/execution/model.h"

namespace edgevl {
namespace cpu {
class ThreadPool;
}
class Profiler;

class GraphRunner {
 public:
  GraphRunner(const Model& m, const Graph& g, uint8_t* arena);
  const Graph& graph() const { return *b_.graph; }
  float* value(int32_t id) const { return static_cast<float*>(b_.ptr[size_t(id)]); }
  float* input() const { return value(b_.graph->input); }
  float* output() const { return value(b_.graph->output); }
  // Hands the delegate's spans of ops to it (an accelerator backend); null: all on the CPU.
  void set_delegate(std::unique_ptr<GraphDelegate> d) { delegate_ = std::move(d); }
  const GraphDelegate* delegate() const { return delegate_.get(); }
  // `rows` valid rows of the graph width (values with a static row count other than the
  // width always run whole); positions[i] is the position of row i (LLM graphs).
  // With a profiler, every op's time, FLOPs and bytes are recorded in it. With `out`, the
  // graph's output is written there ([rows][cols]) instead of to the arena: the head graphs
  // hand their logits to the caller without a copy (the output must be a matmul's).
  // rope_thw: the rows' (t, h, w) positions for MRoPE Rope ops ([rows][3]); null: every axis
  // is positions[i] (text).
  void run(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions, const KvCaches* kv,
           const DumpFn& dump, Profiler* profiler = nullptr, float* out = nullptr,
           const int32_t* rope_thw = nullptr) const;
  // Every row its own sequence (batched decode): row i is the token at positions[i] of the
  // caches *row_kv[i] (row_kv may be null for a graph without attention; a sequence appears
  // once, or at consecutive positions in consecutive rows: a verification). Attention runs per
  // row over its own cache (one dispatch for all rows), elementwise ops per row, matmuls
  // once over all rows with run_linear's row_invariant: each row's result is bit-identical to
  // running it alone through a width-1 graph of the same ops, for Q8 / Q4 weights (linear.h).
  void run_rows(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                const KvCaches* const* row_kv, const DumpFn& dump, Profiler* profiler = nullptr,
                float* out = nullptr, const int32_t* rope_thw = nullptr) const;

 private:
  // row_kv non-null: run_rows (per-row caches and positions), else kv for all rows.
  void run_impl(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions, const KvCaches* kv,
                const KvCaches* const* row_kv, const DumpFn& dump, Profiler* profiler, float* out,
                const int32_t* rope_thw) const;
  BoundGraph b_;
  std::unique_ptr<GraphDelegate> delegate_;
};

}  // namespace edgevl
