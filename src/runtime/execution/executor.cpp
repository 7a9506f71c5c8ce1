#include "runtime/execution/executor.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "graph/bf16_blocks.h"
#include "graph/op_table.h"
#include "runtime/execution/op_runners.h"
#include "runtime/execution/profiler.h"

namespace edgevl {

GraphRunner::GraphRunner(const Model& m, const Graph& g, uint8_t* arena) {
  BoundGraph& b = b_;
  b.graph = &g;
  for (const Value& v : g.values) {
    if (v.kind == ValueKind::Weight) {
      b.ptr.push_back(const_cast<void*>(m.weight_data(v.weight)));
      b.type.push_back(m.weight(v.weight).dtype);
      b.entry.push_back(&m.weight(v.weight));
    } else {
      b.ptr.push_back(arena + v.offset);
      b.type.push_back(v.dtype);
      b.entry.push_back(nullptr);
    }
  }
  // The bf16 block hand-offs the compiler flagged (graph_passes.cpp) make kernels read and
  // write slots in another layout: trust them only where the rule holds for this binary.
  b.row_div = row_divisors(g);
  b.producer.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) b.producer[size_t(g.ops[i].output)] = int32_t(i);
  for (size_t id = 0; id < g.values.size(); ++id)
    if (g.values[id].bf16_blocks) {
      const std::string why = bf16_blocks_refusal(g, int32_t(id), b.type);
      check(why.empty(), "{}: graph '{}': value '{}' is flagged as bf16 blocks but {}",
            m.file().path(), g.name, g.values[id].name, why);
    }
  b.blocks_panels.assign(g.values.size(), 1);
  for (const Op& op : g.ops)
    if (op.type == OpType::MatMul && b.type[size_t(op.inputs[1])] != DType::BF16P)
      b.blocks_panels[size_t(op.inputs[0])] = b.blocks_panels[size_t(op.output)] = 0;
  b.values = value_infos(
      g, [&](int32_t w) { return m.weight(w).shape; },
      [&](int32_t w) { return m.weight(w).bytes; });
  // Shapes and attributes were checked against the op table when the Model loaded the graph
  // (model.cpp, validate_graph); what is checked here is what binding to this CPU adds.
  for (const Op& op : g.ops) {
    b.kinds.push_back(
        profile_kind(op, op.type == OpType::MatMul ? b.entry[size_t(op.inputs[1])] : nullptr));
    // The kernels read every operand as f32 but those the op table lets be stored packed.
    const uint32_t packed_ok = op_def(op.type).may_be_packed;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      check((packed_ok >> i & 1) || b.type[size_t(op.inputs[i])] == DType::F32,
            "{}: graph '{}': op {} reads '{}' as float but it is stored as {}", m.file().path(),
            g.name, op_name(op.type), g.values[size_t(op.inputs[i])].name,
            dtype_name(b.type[size_t(op.inputs[i])]));
    if (op.type == OpType::MatMul && op.matmul().epilogue != Epilogue::kNone)
      check(b.type[size_t(op.matmul().pre)] == DType::F32,
            "{}: graph '{}': matmul '{}' keeps its product in a non-float value", m.file().path(),
            g.name, g.values[size_t(op.output)].name);
  }
}

void GraphRunner::run(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                      const KvCaches* kv, const DumpFn& dump, Profiler* profiler, float* out,
                      const int32_t* rope_thw) const {
  run_impl(pool, rows, positions, kv, nullptr, dump, profiler, out, rope_thw);
}

void GraphRunner::run_rows(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                           const KvCaches* const* row_kv, const DumpFn& dump, Profiler* profiler,
                           float* out, const int32_t* rope_thw) const {
  // A graph without attention gets a table of nulls: per-row mode is keyed on the table.
  static const KvCaches* const kNoCaches[1] = {nullptr};
  check(rows >= 1 && rows <= graph().width, "internal: {} rows for graph '{}' of width {}", rows,
        graph().name, graph().width);
  run_impl(pool, rows, positions, nullptr, row_kv ? row_kv : kNoCaches, dump, profiler, out,
           rope_thw);
}

void GraphRunner::run_impl(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                           const KvCaches* kv, const KvCaches* const* row_kv, const DumpFn& dump,
                           Profiler* profiler, float* out, const int32_t* rope_thw) const {
  const Graph& g = graph();
  // Only a matmul writes its output without reading it first (see run()).
  check(!out || (!g.ops.empty() && g.ops.back().output == g.output &&
                 g.ops.back().type == OpType::MatMul),
        "internal: graph '{}' cannot write its output to the caller's buffer", g.name);
  const bool per_row = row_kv != nullptr;
  // Per row of a batch, the mean count of keys a row attends to (each row sees its own).
  double n_kv = positions ? double(positions[0] + rows) : double(rows);
  if (per_row) {
    n_kv = 0;
    for (int64_t r = 0; r < rows; ++r) n_kv += double(positions[r] + 1) / double(rows);
  }
  const GraphRun run{b_,   pool,     rows, positions, kv, row_kv,
                     dump, profiler, out,  n_kv,      {}, rope_thw};
  const std::vector<GraphDelegate::Span>* spans = delegate_ ? &delegate_->spans() : nullptr;
  size_t next_span = 0;
  for (size_t op_index = 0; op_index < g.ops.size(); ++op_index) {
    if (spans && next_span < spans->size() && (*spans)[next_span].first_op == int32_t(op_index)) {
      const GraphDelegate::Span sp = (*spans)[next_span];
      const auto t0 = Profiler::Clock::now();
      delegate_->run(next_span++, run);
      if (profiler) {
        OpCost c;
        for (int32_t i = sp.first_op; i < sp.end_op; ++i) {
          const OpCost oc = run.cost(g.ops[size_t(i)]);
          c.flops += oc.flops;
          c.bytes += oc.bytes;
        }
        const Op& last = g.ops[size_t(sp.end_op - 1)];
        profiler->record(g.name, delegate_->name(), g.values[last.output].name, last.layer, t0,
                         Profiler::Clock::now(), c.flops, c.bytes);
      }
      op_index = size_t(sp.end_op) - 1;
      continue;
    }
    const Op& op = g.ops[op_index];
    if (profiler) run.t0 = Profiler::Clock::now();
    const OpRan ran = op_runner(op.type).run(run, op_index, op);
    const int64_t m = run.rows_of(op.output);
    if (profiler) {
      const std::string& kind = b_.kinds[op_index];
      const OpCost c = ran.last_step ? OpCost{.bytes = ran.last_step_bytes} : run.cost(op);
      profiler->record(g.name,
                       ran.last_step ? std::string(ran.last_step)
                       : ran.fused   ? kind + ran.fused
                                     : kind,
                       g.values[op.output].name, op.layer, run.t0, Profiler::Clock::now(), c.flops,
                       c.bytes);
    }
    if (dump) dump(g.name, g.values[op.output].name, run.f(op.output), m, run.cols(op.output));
  }
}

}  // namespace edgevl
