#pragma once
// A graph bound to memory: every value resolved once to a pointer (weights into the mapping,
// activations into the arena) with what its runners need to know about it. GraphRunner owns
// one; the op runners (op_runners.h) read it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/evb.h"
#include "graph/graph.h"
#include "graph/op_table.h"

namespace edgevl {

// Called after each op with the value it produced (rows valid rows of `cols` floats).
using DumpFn = std::function<void(const std::string& graph, const std::string& value,
                                  const float* data, int64_t rows, int64_t cols)>;

// A sequence's state as the graphs address it by layer: the KV caches the Attention op appends
// to and, for models with Gated DeltaNet layers (Qwen3.5), the fixed-size recurrent state that
// takes a KV cache's place: per such layer the conv state ([taps - 1][channels] f32, the last raw
// inputs of the CausalConv1d op) and the delta state ([hv][dk][dv] f32, GatedDeltaRule's S).
// Unlike a KV cache it cannot be cut back to an earlier position (Session says what refuses).
struct KvCaches {
  const std::vector<uint8_t*>* k = nullptr;
  const std::vector<uint8_t*>* v = nullptr;
  DType type = DType::F16;
  int64_t capacity = 0;
  const std::vector<float*>* conv = nullptr;   // per layer, null where the layer has none
  const std::vector<float*>* delta = nullptr;  // per layer, null where the layer has none
};

struct GraphRun;

// Runs some runs of a graph's ops elsewhere (an accelerator backend): each span's ops
// [first_op, end_op) are replaced by one call, which reads the span's inputs from and writes
// its outputs to the values' memory (GraphRun::f).
class GraphDelegate {
 public:
  struct Span {
    int32_t first_op = 0, end_op = 0;
  };
  virtual ~GraphDelegate() = default;
  virtual const std::vector<Span>& spans() const = 0;  // in op order, disjoint
  virtual void run(size_t span, const GraphRun& r) const = 0;
  virtual const char* name() const = 0;  // the profile's kind for a span ("htp")
};

struct BoundGraph {
  const Graph* graph = nullptr;
  std::vector<void*> ptr;                 // per value: its bytes
  std::vector<DType> type;                // per value: as stored
  std::vector<const TensorEntry*> entry;  // weights: type parameters (null for activations)
  std::vector<ValueInfo> values;          // shapes and stored sizes, for the op table
  std::vector<std::string> kinds;         // per op: its profile name (profiler.h)
  std::vector<int32_t> producer;          // per value: the op writing it last (-1: none)
  std::vector<int32_t> row_div;           // per value: row_divisors (graph.h)
  // per value held as blocks: every bf16 matmul writing or reading it has bf16p weights
  std::vector<uint8_t> blocks_panels;
};

}  // namespace edgevl
