#include "runtime/execution/model_cost.h"

#include <algorithm>

#include "graph/op_table.h"

namespace edgevl {

namespace {

std::vector<ValueInfo> infos(const Model& m, const Graph& g) {
  return value_infos(
      g, [&](int32_t w) { return m.weight(w).shape; },
      [&](int32_t w) { return m.weight(w).bytes; });
}

// The summed cost of every op of g at `rows` valid rows and `n_kv` keys per query row. Values
// as tall as the graph width follow the valid rows; others always run whole (as they execute).
OpCost graph_cost(const Model& m, const Graph& g, int64_t rows, double n_kv) {
  const std::vector<ValueInfo> values = infos(m, g);
  const std::vector<int32_t> div = row_divisors(g);
  OpCost sum;
  for (const Op& op : g.ops) {
    const CostArgs args{.rows = live_rows(g, div, op.output, rows),
                        .n_kv = n_kv,
                        .kv_type = m.runtime_config().kv_type};
    const OpCost c = op_cost(g, op, values, args);
    sum.flops += c.flops;
    sum.bytes += c.bytes;
    sum.weight_bytes += c.weight_bytes;
    sum.kv_bytes += c.kv_bytes;
  }
  return sum;
}

}  // namespace

ModelCost::ModelCost(const Model& m) : m_(m) {
  step_ = m.find_graph("decode");
  if (!step_) step_ = &m.graph("prefill");
  // One row at one key: the weights once and one token's K and V of every layer.
  const OpCost step = graph_cost(m, *step_, 1, 1), head = graph_cost(m, m.graph("head"), 1, 1);
  kv_token_bytes_ = step.kv_bytes;
  const TensorEntry& embedding = m.weight(m.runtime_config().embedding_tensor);
  weight_bytes_ = step.weight_bytes + head.weight_bytes +
                  double(m.config().hidden) * double(dtype_size(embedding.dtype));
}

double ModelCost::prefill_flops(double n, double past) const {
  return graph_cost(m_, *step_, int64_t(n), past + (n + 1) / 2).flops +
         graph_cost(m_, m_.graph("head"), 1, 1).flops;
}

double ModelCost::vision_flops() const {
  const Graph* g = m_.find_graph("vision");
  return g ? graph_cost(m_, *g, g->width, 0).flops : 0.0;
}

double ModelCost::qwen_vision_flops(int64_t patches) const {
  const Graph* g = m_.find_graph("qwen_vision");
  return g ? graph_cost(m_, *g, std::min<int64_t>(patches, g->width), 0).flops : 0.0;
}

}  // namespace edgevl
