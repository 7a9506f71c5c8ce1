#pragma once
// Runs one graph: every value resolved to a pointer once (weights into the mapping,
// activations into the arena), then a switch over the op list calling the CPU kernels.
// Shared by the LLM session and the vision encoder; nothing is allocated while running.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/model.h"

namespace edgevl {
namespace cpu {
class ThreadPool;
}

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
  // Scratch floats the graph needs besides the arena: per-head attention matrices (for
  // prefill attention they grow with the KV capacity).
  size_t scratch_floats(int64_t kv_capacity = 0) const;

  // `rows` valid rows of the graph width (values with a static row count other than the
  // width always run whole); positions[i] is the position of row i (LLM graphs).
  void run(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions, const KvCaches* kv,
           float* scratch, const DumpFn& dump) const;

 private:
  const Graph* g_;
  std::vector<void*> ptr_;
  std::vector<DType> type_;
  std::vector<const TensorEntry*> entry_;  // weights: type parameters (null for activations)
  size_t scratch_floats_ = 0;
  bool bf16_attention_ = false;  // SelfAttention matmuls in bf16 (see the constructor)
};

}  // namespace edgevl
