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

}  // namespace edgevl
