#pragma once
// The op IR: a graph is a flat list of ops over named values with static shapes. What each op
// kind is (operands, shapes, cost, in-place rule) is its entry in the op table (op_table.h).
// Weights are referenced by index into the model's tensor table (shared by all graphs); activations
// live at offsets in one arena planned at compile time; inputs are bound by the runtime.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace edgevl {

// Stored in .evb files: append only, never renumber.
enum class OpType : uint32_t {
  RmsNorm = 0,    // in: x, weight            (NormAttrs)
  MatMul = 1,     // in: x, weight[, bias][, residual]   y = epilogue(x[M,K] W[N,K]^T + b)
  Rope = 2,       // in: x, cos, sin          in place on x; positions come from the runtime
  Attention = 3,  // in: q, k, v              stores k,v in the layer's KV cache, causal attention
  SiluMul = 4,    // in: gate, up
  Add = 5,        // in: a, b
  LayerNorm = 6,  // in: x, weight, bias      (NormAttrs)
  GeluErf = 7,    // in: x
  SelfAttention = 8,  // in: q, k, v          full (non-causal) attention over the rows, no cache
  PixelShuffle = 9,   // in: x [1 + g*g, c]   drop the class token, InternVL pixel shuffle v2
  PatchIm2col = 10,   // in: pixels [3, s*s]  -> [1 + g*g, 3*p*p], row 0 zero (class-token slot)
  // Gated DeltaNet (Qwen3.5's linear attention); the first two keep a per-sequence state beside
  // the KV caches (runtime/execution/bound_graph.h RecurrentState), addressed by the op's layer.
  CausalConv1d = 11,    // in: x, weight [c, 1, taps]  silu(causal depthwise conv) (ConvAttrs)
  GatedDeltaRule = 12,  // in: qkv, a, b, A_log, dt_bias   (DeltaRuleAttrs)
  GatedRmsNorm = 13,    // in: x, z, weight [group]  rmsnorm(x) * w * silu(z) per group (NormAttrs)
  SigmoidMul = 14,      // in: x, gate               x * sigmoid(gate)
  GeluTanh = 15,        // in: x                GELU, tanh approximation (gelu_pytorch_tanh)
  View = 16,            // in: x [r, c]         -> [r / f, c * f], the same floats (ViewAttrs)
  ConcatCols = 17,      // in: a, b, ...        -> [rows, cols(a) + cols(b) + ...]
};
// One past the last OpType: the op table (op_table.h) and the runtime's runners have an entry
// for each, checked at compile time.
inline constexpr uint32_t kOpTypeCount = uint32_t(OpType::ConcatCols) + 1;
// The op's name (its op table entry, defined in op_table.cpp), "unknown" for a value outside the
// enum.
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
  // Activations: the compiler found that its producer can write it, and every reader read it,
  // as bf16 tile blocks (kernels.h, matmul_bf16_blocks) instead of f32 rows, so the runtime
  // may hand it over in that form where the CPU has the bf16 block kernels (the slot is large
  // enough for either form). Set by compiler/graph_passes.cpp.
  bool bf16_blocks = false;
  size_t bytes() const;
};

// The attributes of each op type, by name. The binary stores any op's attributes as three
// ints and a float (Op::attr_i, Op::attr_f); the accessors of Op below are the one place that
// maps names to those slots.
struct NormAttrs {  // RmsNorm, LayerNorm
  float eps = 0.f;
  int32_t group = 0;  // columns per normalised group (Qwen3's per-head q/k norm); 0: the row
};
// SelfAttention's arithmetic, chosen by the compiler from the tower's weights
// (graph_passes.cpp): bf16 projections -> bf16 attention (K and V rounded, bf16 kernels); f16
// projections -> near-f32 (the split AMX kernel where there is one, else f32); otherwise f32.
enum class AttentionPrecision : int32_t { kF32 = 0, kNearF32 = 1, kBf16 = 2 };
struct AttentionAttrs {  // Attention, SelfAttention
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 0.f;                                        // applied to q.k before the softmax
  AttentionPrecision precision = AttentionPrecision::kF32;  // SelfAttention only
};
// What a MatMul applies to its product before writing its output, folded in by the compiler
// from the op that read it (graph_passes.cpp): a GELU (erf) or the add of a residual (the
// op's last input). `pre` is the product before the epilogue, a value of its own (planned in
// the arena), which the runtime writes when it runs the epilogue as a second step: on CPUs
// without a fused kernel for the weight's type, and when values are being dumped.
enum class Epilogue : int32_t { kNone = 0, kGeluErf = 1, kAddResidual = 2 };
const char* epilogue_name(Epilogue e);
struct MatMulAttrs {
  Epilogue epilogue = Epilogue::kNone;
  int32_t pre = -1;  // value id of the product (with an epilogue)
};
struct RopeAttrs {
  int32_t n_heads = 0, head_dim = 0;
  int32_t rot_dim = 0;  // rotates the first rot_dim of each head (partial rotary); 0: all
  // Interleaved multimodal RoPE (Qwen3-VL): rotary frequency i follows the row's height
  // position when i % 3 == 1 and i < 3 * mrope_h, its width position when i % 3 == 2 and
  // i < 3 * mrope_w, else its temporal one (the runtime's rope_thw; without them every axis is
  // the row's position, which is plain RoPE). 0, 0: plain RoPE (binaries from before).
  // Both negative: contiguous sections, the last -mrope_w frequencies follow w, the -mrope_h
  // before them h, the rest t (the Qwen-VL vision towers' 2D rotary: t empty).
  // Stored as two int16 halves of one attribute slot.
  int32_t mrope_h = 0, mrope_w = 0;
  int32_t rotated() const { return rot_dim > 0 ? rot_dim : head_dim; }
};
struct ConvAttrs {  // CausalConv1d
  int32_t taps = 0;
};
struct DeltaRuleAttrs {  // GatedDeltaRule: key heads, value heads, their dims
  int32_t hk = 0, hv = 0, dk = 0, dv = 0;
};
struct PixelShuffleAttrs {
  int32_t grid = 0;    // patches per side
  int32_t factor = 0;  // 1 / downsample ratio
};
struct PatchIm2colAttrs {
  int32_t patch = 0, image = 0;  // patch and image size in pixels
};
struct ViewAttrs {
  int32_t factor = 0;  // rows folded into one (Qwen-VL's 2x2 patch merge: 4)
};

struct Op {
  OpType type{};
  std::vector<int32_t> inputs;  // value ids
  int32_t output = -1;          // value id (for Rope: same as inputs[0], in place)
  int32_t layer = -1;           // transformer layer, for KV addressing and profiles

  NormAttrs norm() const { return {attr_f, attr_i[0]}; }
  AttentionAttrs attention() const {
    return {attr_i[0], attr_i[1], attr_i[2], attr_f, AttentionPrecision(attr_i[3])};
  }
  MatMulAttrs matmul() const { return {Epilogue(attr_i[0]), attr_i[1]}; }
  // A MatMul's optional operands, by position (-1 when absent): [x, w, bias?, residual?].
  int32_t bias() const;
  int32_t residual() const;
  RopeAttrs rope() const {
    return {attr_i[0], attr_i[1], attr_i[2], int16_t(attr_i[3] & 0xFFFF),
            int16_t(uint32_t(attr_i[3]) >> 16)};
  }
  ConvAttrs conv() const { return {attr_i[0]}; }
  DeltaRuleAttrs delta_rule() const { return {attr_i[0], attr_i[1], attr_i[2], attr_i[3]}; }
  PixelShuffleAttrs pixel_shuffle() const { return {attr_i[0], attr_i[1]}; }
  PatchIm2colAttrs patch_im2col() const { return {attr_i[0], attr_i[1]}; }
  ViewAttrs view() const { return {attr_i[0]}; }
  void set(const NormAttrs& a) { attr_i = {a.group, 0, 0, 0}, attr_f = a.eps; }
  void set(const AttentionAttrs& a) {
    attr_i = {a.n_heads, a.n_kv_heads, a.head_dim, int32_t(a.precision)}, attr_f = a.scale;
  }
  void set(const MatMulAttrs& a) { attr_i = {int32_t(a.epilogue), a.pre, 0, 0}, attr_f = 0.f; }
  void set(const RopeAttrs& a) {
    const uint32_t mrope = uint32_t(uint16_t(a.mrope_h)) | uint32_t(uint16_t(a.mrope_w)) << 16;
    attr_i = {a.n_heads, a.head_dim, a.rot_dim, int32_t(mrope)}, attr_f = 0.f;
  }
  void set(const ConvAttrs& a) { attr_i = {a.taps, 0, 0, 0}, attr_f = 0.f; }
  void set(const DeltaRuleAttrs& a) { attr_i = {a.hk, a.hv, a.dk, a.dv}, attr_f = 0.f; }
  void set(const PixelShuffleAttrs& a) { attr_i = {a.grid, a.factor, 0, 0}, attr_f = 0.f; }
  void set(const PatchIm2colAttrs& a) { attr_i = {a.patch, a.image, 0, 0}, attr_f = 0.f; }
  void set(const ViewAttrs& a) { attr_i = {a.factor, 0, 0, 0}, attr_f = 0.f; }

  // The stored form: only graph.cpp (serialisation) reads these directly.
  std::array<int32_t, 4> attr_i{};
  float attr_f = 0.f;
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

// How a value's rows follow the rows a run fills (of the graph's width; the rest is masked):
// per value, d >= 1 when it has rows / d live rows, 0 when it always runs whole. Values as tall
// as the width have d = 1; a View joining f rows into one has d * f of its input's d, and an op
// whose output is as tall as such an input keeps that input's d (the Qwen-VL patch and
// DeepStack mergers after their 2x2 joins: a small image's merger runs on its own tokens, not
// on the compiled width's). Weights, tables and InternVL's pixel-shuffled tile run whole.
std::vector<int32_t> row_divisors(const Graph& g);
// The live rows of value `id` when a run fills `rows` rows (div: row_divisors(g)).
inline int64_t live_rows(const Graph& g, const std::vector<int32_t>& div, int32_t id,
                         int64_t rows) {
  const int32_t d = div[size_t(id)];
  return d > 0 ? (rows + d - 1) / d : g.values[size_t(id)].shape[0];
}

}  // namespace edgevl
