#pragma once
// Runs one graph: every value resolved to a pointer once (weights into the mapping,
// activations into the arena), then each op through its runner (op_runners.h).
// Shared by the LLM session and the vision encoder; nothing is allocated while running.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/op_table.h"
#include "runtime/model.h"

namespace edgevl {
namespace cpu {
class ThreadPool;
}
class Profiler;

// Called after each op with the value it produced (rows valid rows of `cols` floats).
using DumpFn = std::function<void(const std::string& graph, const std::string& value,
                                  const float* data, int64_t rows, int64_t cols)>;

// The per-layer KV caches the Attention op appends to.
struct KvCaches {
  const std::vector<uint8_t*>* k = nullptr;
  const std::vector<uint8_t*>* v = nullptr;
  DType type = DType::F16;
  int64_t capacity = 0;
};

class GraphRunner {
 public:
  GraphRunner(const Model& m, const Graph& g, uint8_t* arena);
  const Graph& graph() const { return *g_; }
  float* value(int32_t id) const { return static_cast<float*>(ptr_[size_t(id)]); }
  float* input() const { return value(g_->input); }
  float* output() const { return value(g_->output); }
  // Scratch floats the graph needs besides the arena (the f32 SelfAttention's per-head
  // matrices; the other attention paths keep per-thread buffers).
  size_t scratch_floats() const { return scratch_floats_; }

  // `rows` valid rows of the graph width (values with a static row count other than the
  // width always run whole); positions[i] is the position of row i (LLM graphs).
  // With a profiler, every op's time, FLOPs and bytes are recorded in it. With `out`, the
  // graph's output is written there ([rows][cols]) instead of to the arena: the head graphs
  // hand their logits to the caller without a copy (the output must be a matmul's).
  void run(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions, const KvCaches* kv,
           float* scratch, const DumpFn& dump, Profiler* profiler = nullptr,
           float* out = nullptr) const;
  // Every row its own sequence (batched decode): row i is the token at positions[i] of the
  // caches *row_kv[i] (row_kv may be null for a graph without attention; a sequence appears
  // once, or at consecutive positions in consecutive rows: a verification). Attention runs per
  // row over its own cache (one dispatch for all rows), elementwise ops per row, matmuls
  // once over all rows with run_linear's row_invariant: each row's result is bit-identical to
  // running it alone through a width-1 graph of the same ops, for Q8 / Q4 weights (linear.h).
  void run_rows(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                const KvCaches* const* row_kv, float* scratch, const DumpFn& dump,
                Profiler* profiler = nullptr, float* out = nullptr) const;

 private:
  // row_kv non-null: run_rows (per-row caches and positions), else kv for all rows.
  void run_impl(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions, const KvCaches* kv,
                const KvCaches* const* row_kv, float* scratch, const DumpFn& dump,
                Profiler* profiler, float* out) const;
  // n_kv: the keys each query row attends to (a mean over the rows of a batch); per_row: each
  // row reads a cache of its own (run_rows), else all rows share one.
  OpCost cost(const Op& op, int64_t m, double n_kv, const KvCaches* kv, bool per_row) const;
  friend struct GraphRun;

  const Graph* g_;
  std::vector<void*> ptr_;
  std::vector<DType> type_;
  std::vector<const TensorEntry*> entry_;  // weights: type parameters (null for activations)
  std::vector<ValueInfo> values_;          // shapes and stored sizes, for the op table
  std::vector<std::string> kinds_;         // per op: its profile name (profiler.h)
  std::vector<int32_t> producer_;          // per value: the op writing it last (-1: none)
  // per value held as blocks: every bf16 matmul writing or reading it has bf16p weights
  std::vector<uint8_t> blocks_panels_;
  size_t scratch_floats_ = 0;
};

}  // namespace edgevl
