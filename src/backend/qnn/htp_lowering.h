#pragma once
// edgevl graph IR -> HTP graphs. The HTP takes the runs of ops it supports (projections, norms,
// activations, elementwise); the ops it is not given (attention with its caches, RoPE with its
// run-time positions, the vision tower's pixel reshuffles) stay on the CPU between them. Each
// run is one HTP graph (a "segment"); its inputs and outputs are the activations that cross the
// boundary, at the graph's static width, in the build's type (f16 for the fp16 build).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/qnn/htp_graph.h"
#include "graph/graph.h"

namespace edgevl::qnn {

// What the HTP may take beyond the dense ops. Attention with its KV cache runs there when the
// graph's rows are one sequence's consecutive tokens (prefill AR-N, decode AR-1): the cache is
// then graph I/O (HtpIoRole), as the seeds' split has it. The per-row caches of a decode batch
// keep attention and RoPE on the CPU. RoPE and attention compute in fp16 in every build (the
// quantized ones dequantize into them and quantize out).
struct HtpCaps {
  bool attention = false;
  // SelfAttention over all the graph's rows (InternViT's tower, which always runs whole): no
  // mask, no state.
  bool self_attention = false;
  // One HTP graph per transformer layer (each layer's output a graph output): what
  // quant-report --target builds to show the error layer by layer.
  bool split_layers = false;
};

// Whether the HTP backend takes this op of g (the backend's answer to "supports(op)").
bool htp_supports(const Graph& g, const Op& op, const HtpCaps& caps = {});

// A graph input or output that is not one of the model graph's values: what the runtime makes
// of its own state for the HTP graph, and takes back from it. `index` is the op it belongs to.
enum class HtpIoRole : uint32_t {
  Value = 0,    // an activation (index: its value id)
  RopeCos = 1,  // [W, 1, head_dim] per row cos (rotated pairs twice, 1 past rot_dim); Rope op
  RopeSin = 2,  // [W, 1, head_dim] per row sin with the first half negated (0 past rot_dim)
  Mask = 3,     // [W, C + W] additive: 0 where row i may see key j, kMaskedScore elsewhere
  KPast = 4,    // [kv_heads, C, head_dim] the layer's K cache (C: the compiled context); Attention
  VPast = 5,    // same for V
  KNew = 6,     // [kv_heads, W, head_dim] the chunk's keys (after RoPE), for the cache
  VNew = 7,     // same for the values
};
struct HtpIo {
  HtpIoRole role = HtpIoRole::Value;
  int32_t index = -1;
};
// Added to a score to hide its key: exp(beta * (s + kMaskedScore) - max) is 0 in fp16.
inline constexpr float kMaskedScore = -30000.f;

struct HtpSegment {
  int32_t first_op = 0, end_op = 0;  // ops [first_op, end_op) of the graph
  std::vector<int32_t> inputs;       // activation value ids read from the arena, in order
  std::vector<int32_t> outputs;      // activation value ids written back, in order
  std::string name;                  // "<graph>.seg<i>": the HTP graph's name
  // The runtime's state (attention): in the HTP graph's input / output order these come
  // first, then the values.
  std::vector<HtpIo> extra_inputs, extra_outputs;
  int32_t context = 0;  // C of the KV inputs (0: no attention in the segment)
};

// The maximal runs of supported ops. `min_ops`: shorter runs without a matmul stay on the CPU
// (a call to the accelerator costs more than a lone elementwise op). `context`: the KV cache
// length the attention graphs are compiled for (with caps.attention).
std::vector<HtpSegment> htp_partition(const Graph& g, int min_ops = 2, const HtpCaps& caps = {},
                                      int32_t context = 0);

// A weight as floats in its logical [rows, cols] (or [n]) shape; the runtime unpacks packed
// and quantized types.
using WeightFn = std::function<std::vector<float>(int32_t tensor_index)>;
// The shape of a weight as stored in the tensor table.
using WeightShapeFn = std::function<std::vector<int64_t>(int32_t tensor_index)>;

// An activation's calibrated range (min, max), by value name; false when none was recorded.
using RangeFn = std::function<bool(const std::string& value, float* lo, float* hi)>;

// How the HTP graph stores values. fp16: weights f16, float math (the reference build). Else
// a16w8 as the HTP prefers: activations uint16 with static encodings from the calibrated ranges
// (asymmetric, [min(lo, 0), max(hi, 0)]), matrices int8 symmetric per output channel, biases
// int32 at input scale x channel scale, norm weights uint16 symmetric.
struct HtpPrecision {
  bool fp16 = true;
  RangeFn range;        // required when !fp16
  int weight_bits = 8;  // quantized builds: 8 (a16w8) or 4 (a16w4: int4 per output channel)
  // Quantized builds: a matrix's own storage by tensor name (the overrides file): 16 keeps its
  // matmul in fp16 (between a Dequantize and a Quantize), 8 or 4 its weight bits; 0 the preset.
  std::function<int(const std::string& tensor)> weight_override;
};

// The shape of an extra input or output of segment s (HtpIoRole).
std::vector<uint32_t> htp_io_dims(const Graph& g, const HtpSegment& s, const HtpIo& io);

// The uint16 encoding of [lo, hi] (widened to hold 0), and the symmetric one of [-a, a].
QnnType u16_encoding(float lo, float hi);
QnnType u16_symmetric(float absmax);

// Adds segment s of g to `out` (a fresh HtpGraph): its inputs, weights as static tensors, the
// ops, its outputs. The caller finalizes.
void lower_segment(const Graph& g, const HtpSegment& s, HtpGraph& out, const WeightFn& weight,
                   const WeightShapeFn& weight_shape, const HtpPrecision& p = {});

}  // namespace edgevl::qnn
