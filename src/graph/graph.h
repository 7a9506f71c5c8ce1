#pragma once
// The op IR: a graph is a flat list of ops over named values with static shapes. Weights are
// referenced by index into the model's tensor table (shared by all graphs); activations live
// at offsets in one arena planned at compile time; inputs are bound by the runtime.
#include <cstdint>
#include <string>
#include <vector>

#include "core/byte_io.h"
#include "core/dtype.h"

namespace edgevl {

// Stored in .evb files: append only, never renumber.
enum class OpType : uint32_t {
  RmsNorm = 0,    // in: x, weight            p: eps
  MatMul = 1,     // in: x, weight[, bias]    y[M,N] = x[M,K] W[N,K]^T + b
  Rope = 2,       // in: x, cos, sin          in place on x; positions come from the runtime
  Attention = 3,  // in: q, k, v              stores k,v in the layer's KV cache, causal attention
  SiluMul = 4,    // in: gate, up
  Add = 5,        // in: a, b
  LayerNorm = 6,  // in: x, weight, bias      p: eps
  GeluErf = 7,    // in: x
  SelfAttention = 8,  // in: q, k, v          full (non-causal) attention over the rows, no cache
  PixelShuffle = 9,   // in: x [1 + g*g, c]   drop the class token, InternVL pixel shuffle v2
  PatchIm2col = 10,   // in: pixels [3, s*s]  -> [1 + g*g, 3*p*p], row 0 zero (class-token slot)
};
const char* op_name(OpType t);

enum class ValueKind : uint32_t {
  Weight = 0,      // `weight` indexes the model tensor table
  Activation = 1,  // lives in the arena at `offset` (the graph input too: the runtime
                   // writes the embedding rows there before running)
};

struct Value {
  std::string name;  // e.g. "layer.3.attn_out"; weights use their tensor-table name
  ValueKind kind = ValueKind::Activation;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // activations: [rows, cols] with rows = graph width
  int64_t offset = -1;         // arena byte offset (activations)
  int32_t weight = -1;         // tensor-table index (weights)
  size_t bytes() const;
};

struct Op {
  OpType type{};
  std::vector<int32_t> inputs;  // value ids
  int32_t output = -1;          // value id (for Rope: same as inputs[0], in place)
  int32_t layer = -1;           // transformer layer, for KV addressing and profiles
  // Attention / SelfAttention: n_heads, n_kv_heads, head_dim; Rope: n_heads, head_dim;
  // PixelShuffle: grid (patches per side), factor (1 / downsample ratio).
  // PatchIm2col: patch size, image size.
  int32_t i0 = 0, i1 = 0, i2 = 0;
  float f0 = 0.f;  // eps / attention scale
};

struct Graph {
  std::string name;   // "prefill", "decode", "head"
  int32_t width = 0;  // token rows per execution (static)
  std::vector<Value> values;
  std::vector<Op> ops;
  int32_t input = -1;   // value id of the input rows (an activation)
  int32_t output = -1;  // value id of the result
  int64_t arena_bytes = 0;

  int32_t find(const std::string& value_name) const;  // -1 when absent
};

void write_graph(ByteWriter& w, const Graph& g);
// Validates op arity, value ids, shapes and arena extents; throws naming the graph.
Graph read_graph(ByteReader& r, size_t n_weights);

}  // namespace edgevl
