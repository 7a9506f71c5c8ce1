#pragma once
// How each op kind executes on the CPU: the runtime's half of the op table (graph/op_table.h
// holds the rest of what an op is). GraphRunner resolves values and runs the op list; each op's
// runner reads its operands through GraphRun and calls the kernels.
#include <algorithm>
#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "graph/graph.h"
#include "runtime/execution/bound_graph.h"
#include "runtime/execution/profiler.h"

namespace edgevl {

// One execution of a graph as an op's runner sees it.
struct GraphRun {
  const BoundGraph& bound;
  cpu::ThreadPool& pool;
  int32_t rows;  // valid rows of the graph width
  const int32_t* positions;
  const KvCaches* kv;             // all rows' cache (run)
  const KvCaches* const* row_kv;  // per-row caches (run_rows), else null
  const DumpFn& dump;
  Profiler* profiler;
  float* out;   // the caller's buffer for the graph's output, or null
  double n_kv;  // keys a query row attends to (a mean over a batch's rows), for the profile
  mutable Profiler::Clock::time_point t0{};  // when the op's current step started
  // Rows' (t, h, w) rotary positions for MRoPE Rope ops ([rows][3]); null: each is positions[i].
  const int32_t* rope_thw = nullptr;

  const Graph& graph() const { return *bound.graph; }
  bool per_row() const { return row_kv != nullptr; }
  float* f(int32_t id) const {
    return out && id == graph().output ? out : static_cast<float*>(bound.ptr[size_t(id)]);
  }
  const void* data(int32_t id) const { return bound.ptr[size_t(id)]; }
  const TensorEntry& weight(int32_t id) const { return *bound.entry[size_t(id)]; }
  int64_t cols(int32_t id) const { return graph().values[size_t(id)].shape.back(); }
  // Values as tall as the graph width follow the valid row count (the masked last chunk), and
  // so do the rows joined from them (live_rows, graph.h); others (e.g. the 256 rows after the
  // vision pixel shuffle) always run whole.
  int64_t rows_of(int32_t id) const { return live_rows(graph(), bound.row_div, id, rows); }
  // Whether value id is held as bf16 blocks in this run: flagged by the compiler, on a CPU with
  // the block kernels (and the fused attention kernel, for an attention output), and nobody
  // asked to see the values (dump hook). The same answer for its producer and its readers.
  bool in_blocks(int32_t id) const;
  uint16_t* blocks(int32_t id) const;

  // Row-wise work over the pool when there is enough of it to pay for the dispatch (prefill and
  // vision); decode-sized rows run on the calling thread. fn(r0, r1) handles rows [r0, r1).
  template <class F>
  void split_rows(int64_t n_rows, int64_t n_cols, F&& fn) const {
    constexpr int64_t kMinElems = 1 << 16;
    const int64_t tasks =
        std::min<int64_t>(n_rows, std::max<int64_t>(1, n_rows * n_cols / kMinElems)) > 1
            ? pool.size() * 4
            : 1;
    if (tasks == 1) return fn(0, n_rows);
    const int64_t step = (n_rows + tasks - 1) / tasks;
    pool.parallel_for(tasks, [&](int64_t t) {
      const int64_t r0 = t * step, r1 = std::min(n_rows, r0 + step);
      if (r0 < r1) fn(r0, r1);
    });
  }
  // Elementwise work over n = m * c elements. The rows of a batch run one by one: a flat split
  // could hand an element to a SIMD tail in one batch and to the vector body in another
  // (different rounding for silu / gelu). fn(a, b) handles elements [a, b).
  template <class F>
  void elementwise(int64_t m, int64_t c, F&& fn) const {
    if (!per_row()) return split_rows(m * c, 1, fn);
    for (int64_t r = 0; r < m; ++r) fn(r * c, (r + 1) * c);
  }

  // The op's FLOPs and bytes in this execution (op_table.h), for the profile.
  OpCost cost(const Op& op) const;

  // For a runner that runs an op in two steps: records the first (`value` the step produced,
  // with the op's whole cost) in the profile and the dump, and starts timing the second.
  void first_step_done(size_t op_index, const Op& op, int32_t value) const;
};

// What a runner tells the profile about how it ran the op.
struct OpRan {
  const char* fused = nullptr;      // a fused form: its suffix to the op's profile kind
  const char* last_step = nullptr;  // ran in two steps (first_step_done): the second's name
  double last_step_bytes = 0;       // and the bytes it moved (it does no multiply-adds)
};

struct OpRunner {
  OpRan (*run)(const GraphRun&, size_t op_index, const Op&);
};
const OpRunner& op_runner(OpType t);

}  // namespace edgevl
