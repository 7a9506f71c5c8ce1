#include "graph/graph.h"

#include "core/error.h"

namespace edgevl {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kNone: return "none";
    case Epilogue::kGeluErf: return "gelu";
    case Epilogue::kAddResidual: return "add";
  }
  return "unknown";
}

int32_t Op::residual() const {
  return type == OpType::MatMul && matmul().epilogue == Epilogue::kAddResidual ? inputs.back() : -1;
}

int32_t Op::bias() const {
  if (type != OpType::MatMul) return -1;
  const size_t plain = inputs.size() - (residual() >= 0 ? 1 : 0);
  return plain == 3 ? inputs[2] : -1;
}

size_t Value::bytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return size_t(n) * dtype_size(dtype);
}

int32_t Graph::find(const std::string& value_name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == value_name) return int32_t(i);
  return -1;
}

std::vector<int32_t> row_divisors(const Graph& g) {
  std::vector<int32_t> div(g.values.size(), 0);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].kind == ValueKind::Activation && !g.values[v].shape.empty() &&
        g.values[v].shape[0] == g.width)
      div[v] = 1;
  for (const Op& op : g.ops) {
    int32_t& d = div[size_t(op.output)];
    if (d != 0) continue;
    const int64_t out_rows = g.values[size_t(op.output)].shape[0];
    for (const int32_t in : op.inputs) {
      const int32_t din = div[size_t(in)];
      if (din == 0) continue;
      const int64_t in_rows = g.values[size_t(in)].shape[0];
      if (out_rows == in_rows) {
        d = din;
      } else if (op.type == OpType::View && in_rows == out_rows * op.view().factor) {
        d = din * op.view().factor;
      }
      if (d != 0) break;
    }
  }
  return div;
}

}  // namespace edgevl
