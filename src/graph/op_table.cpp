#include "graph/op_table.h"

#include <algorithm>

#include "core/error.h"
#include "core/kv_layout.h"

namespace edgevl {

int64_t OpView::numel(int32_t id) const {
  int64_t n = 1;
  for (int64_t d : shape(id)) n *= d;
  return n;
}

namespace {

using Shape = std::vector<int64_t>;

// The shape of the output when `ok`, else the empty shape that fails every comparison.
Shape if_ok(bool ok, Shape s) {
  return ok ? std::move(s) : Shape{};
}

// Bytes every op moves: its output written and each operand read once (weights as stored,
// activations as f32 rows of this execution). `skip` is an operand not counted (one the op
// updates in place, already counted as the output).
OpCost stream_cost(const OpView& v, const CostArgs& a, int32_t skip = -1) {
  OpCost c;
  const double m = double(a.rows);
  c.bytes = 4.0 * m * double(v.cols(v.op.output));
  for (int32_t id : v.op.inputs) {
    if (id == skip) continue;
    if (v.weight(id)) {
      c.weight_bytes += v.values[size_t(id)].stored_bytes;
    } else {
      c.bytes += 4.0 * m * double(v.cols(id));
    }
  }
  c.bytes += c.weight_bytes;
  return c;
}

OpCost no_flops(const OpView& v, const CostArgs& a) {
  return stream_cost(v, a);
}

std::vector<int32_t> never_in_place(const Op&) {
  return {};
}
// Elementwise: the kernel reads element i of every input before writing element i.
std::vector<int32_t> over_any_input(const Op& op) {
  return op.inputs;
}

// --- RmsNorm: in x [rows, cols], weight [group]; a grouped norm (Qwen3's per-head q/k norm)
// normalises each run of `group` columns.
Shape rms_norm_shape(const OpView& v) {
  const int64_t c = v.cols(v.in(0)), group = v.op.norm().group > 0 ? v.op.norm().group : c;
  return if_ok(v.op.norm().group >= 0 && c % group == 0 && v.numel(v.in(1)) == group,
               v.shape(v.in(0)));
}

// --- LayerNorm: in x [rows, cols], weight [cols], bias [cols].
Shape layer_norm_shape(const OpView& v) {
  const int64_t c = v.cols(v.in(0));
  return if_ok(v.op.norm().group == 0 && v.numel(v.in(1)) == c && v.numel(v.in(2)) == c,
               v.shape(v.in(0)));
}

// --- MatMul: in x [rows, K], weight [N, K][, bias [N]][, residual]; out [rows, N]. With an
// epilogue the product before it is a value of its own (`pre`), and kAddResidual takes the
// residual as the last operand: an activation of the output's width, or a weight covering
// every row (a folded constant). The operand counts and the product: matmul_structure.
Shape matmul_shape(const OpView& v) {
  const Op& op = v.op;
  const bool residual = op.matmul().epilogue == Epilogue::kAddResidual;
  if (!v.weight(v.in(1))) return {};
  const Shape& ws = v.shape(v.in(1));
  if (ws.size() != 2 || ws[1] != v.cols(v.in(0))) return {};
  if (op.bias() >= 0 && v.numel(op.bias()) != ws[0]) return {};
  const Shape out = {v.rows(v.in(0)), ws[0]};
  if (residual) {
    const int32_t r = op.residual();
    if (v.weight(r) ? v.numel(r) != out[0] * out[1] : v.cols(r) != out[1]) return {};
  }
  return out;
}
// The epilogue is known, the operand count fits it, and the product before the epilogue is an
// activation of the output's shape of its own (read by nobody else).
std::string matmul_structure(const Graph& g, const Op& op) {
  const MatMulAttrs a = op.matmul();
  const auto& in = op.inputs;
  const bool residual = a.epilogue == Epilogue::kAddResidual;
  if (int32_t(a.epilogue) < 0 || a.epilogue > Epilogue::kAddResidual ||
      in.size() > (residual ? 4u : 3u) || in.size() < (residual ? 3u : 2u))
    return fmt::format("has epilogue {} and {} inputs", int32_t(a.epilogue), in.size());
  const int32_t nv = int32_t(g.values.size());
  const bool pre_ok =
      a.epilogue == Epilogue::kNone
          ? a.pre == -1
          : a.pre >= 0 && a.pre < nv && a.pre != op.output &&
                g.values[size_t(a.pre)].kind == ValueKind::Activation &&
                g.values[size_t(a.pre)].shape == g.values[size_t(op.output)].shape &&
                a.pre != g.input && a.pre != g.output &&
                std::find(in.begin(), in.end(), a.pre) == in.end();
  return pre_ok ? "" : fmt::format("has a bad product value {}", a.pre);
}
OpCost matmul_cost(const OpView& v, const CostArgs& a) {
  OpCost c = stream_cost(v, a);
  c.flops = 2.0 * double(a.rows) * double(v.cols(v.in(0))) * double(v.cols(v.op.output));
  return c;
}
// Over the residual or, failing that, the product: never over x or the weights, which the
// fused kernels read while writing. With the residual the fused kernel reads each element
// before writing it; the product is written only when the epilogue runs as a second step.
std::vector<int32_t> matmul_in_place(const Op& op) {
  if (op.matmul().epilogue == Epilogue::kNone) return {};
  return {op.residual(), op.matmul().pre};
}

// --- Rope: in x [rows, n_heads * head_dim] (rotated in place), cos / sin [positions,
// rot / 2] indexed by each row's position, which the runtime supplies; rot = rot_dim (the
// rotated prefix of each head: Qwen3.5's partial rotary) or head_dim.
Shape rope_shape(const OpView& v) {
  const RopeAttrs a = v.op.rope();
  const Shape& cs = v.shape(v.in(1));
  const int32_t rot = a.rotated();
  // MRoPE sections: both >= 0 (interleaved) or both < 0 (contiguous, within the frequencies).
  const bool interleaved = a.mrope_h >= 0 && a.mrope_w >= 0;
  const bool contiguous =
      a.mrope_h < 0 && a.mrope_w < 0 && -int64_t(a.mrope_h) - a.mrope_w <= rot / 2;
  return if_ok(a.n_heads > 0 && a.head_dim > 0 && rot > 0 && rot <= a.head_dim && rot % 2 == 0 &&
                   a.rot_dim >= 0 && (interleaved || contiguous) &&
                   v.cols(v.in(0)) == int64_t(a.n_heads) * a.head_dim && cs.size() == 2 &&
                   cs[1] == rot / 2 && v.shape(v.in(2)) == cs && v.op.output == v.in(0),
               v.shape(v.in(0)));
}
OpCost rope_cost(const OpView& v, const CostArgs& a) {
  // x read and written; a cos and a sin row per row of x (not the whole tables).
  OpCost c;
  const double m = double(a.rows);
  c.bytes =
      8.0 * m * double(v.cols(v.op.output)) + 2.0 * m * 4.0 * double(v.op.rope().head_dim / 2);
  return c;
}

// q [rows, n_heads * head_dim], k and v [rows, n_kv_heads * head_dim], whole GQA groups.
bool heads_fit(const OpView& v, const AttentionAttrs& a) {
  return a.n_heads > 0 && a.n_kv_heads > 0 && a.n_heads % a.n_kv_heads == 0 && a.head_dim > 0 &&
         v.cols(v.in(0)) == int64_t(a.n_heads) * a.head_dim &&
         v.cols(v.in(1)) == int64_t(a.n_kv_heads) * a.head_dim &&
         v.cols(v.in(2)) == v.cols(v.in(1));
}

// --- Attention: in q, k, v (heads_fit); appends k and v to the layer's KV cache and attends
// causally over it.
Shape attention_shape(const OpView& v) {
  const AttentionAttrs a = v.op.attention();
  return if_ok(v.op.layer >= 0 && a.head_dim <= 512 && heads_fit(v, a), v.shape(v.in(0)));
}
OpCost attention_cost(const OpView& v, const CostArgs& a) {
  OpCost c = stream_cost(v, a);
  const AttentionAttrs at = v.op.attention();
  const double m = double(a.rows);
  c.flops = 4.0 * m * a.n_kv * double(at.n_heads) * at.head_dim;  // QK^T and PV
  const KvLayout lay{a.kv_type, at.n_kv_heads, at.head_dim, 1};
  c.kv_bytes = 2.0 * a.n_kv * (a.per_row_kv ? m : 1.0) * lay.token_bytes();
  c.bytes += c.kv_bytes;
  return c;
}

// --- SelfAttention: in q, k, v as Attention; full (non-causal) attention over the rows.
Shape self_attention_shape(const OpView& v) {
  const AttentionAttrs a = v.op.attention();
  return if_ok(
      int32_t(a.precision) >= 0 && a.precision <= AttentionPrecision::kBf16 && heads_fit(v, a),
      v.shape(v.in(0)));
}
OpCost self_attention_cost(const OpView& v, const CostArgs& a) {
  OpCost c = stream_cost(v, a);
  const AttentionAttrs at = v.op.attention();
  c.flops = 4.0 * double(a.rows) * double(a.rows) * double(at.n_heads) * at.head_dim;
  return c;
}

// --- SiluMul (silu(gate) * up) and Add: two operands of one shape. An Add operand may be a
// weight (a folded constant such as position embeddings) covering every row.
Shape binary_shape(const OpView& v) {
  const int32_t a = v.in(0), b = v.in(1);
  const Shape& act = v.weight(a) ? v.shape(b) : v.shape(a);
  if (act.size() != 2 || v.cols(a) != v.cols(b)) return {};
  for (int32_t id : {a, b})
    if (v.weight(id) && v.numel(id) != act[0] * act[1]) return {};
  return act;
}

// --- GeluErf: exact (erf) GELU, elementwise.
Shape unary_shape(const OpView& v) {
  return v.shape(v.in(0));
}

// --- PixelShuffle: in [1 + grid^2, c] (a class token, then the patch grid); drops the class
// token and folds factor x factor neighbours into one row (InternVL's pixel shuffle v2).
Shape pixel_shuffle_shape(const OpView& v) {
  const int64_t grid = v.op.pixel_shuffle().grid, sf = v.op.pixel_shuffle().factor;
  return if_ok(grid > 0 && sf > 0 && grid % sf == 0 && v.rows(v.in(0)) == 1 + grid * grid,
               {sf > 0 ? (grid / sf) * (grid / sf) : 0, v.cols(v.in(0)) * sf * sf});
}

// --- PatchIm2col: in pixels [3, image^2]; out the patches [1 + grid^2, 3 * patch^2], row 0
// zero (the class token's slot).
Shape patch_im2col_shape(const OpView& v) {
  const int64_t patch = v.op.patch_im2col().patch, size = v.op.patch_im2col().image;
  const int64_t grid = patch > 0 ? size / patch : 0;
  return if_ok(
      patch > 0 && size % patch == 0 && v.rows(v.in(0)) == 3 && v.cols(v.in(0)) == size * size,
      {1 + grid * grid, 3 * patch * patch});
}

// --- CausalConv1d: in x [rows, c], weight [c, 1, taps] (or [c, taps]); out silu(conv) [rows, c].
// Reads and updates the layer's conv state (the last taps - 1 raw rows of the sequence).
Shape causal_conv_shape(const OpView& v) {
  const int64_t c = v.cols(v.in(0)), taps = v.op.conv().taps;
  const Shape& ws = v.shape(v.in(1));
  return if_ok(v.op.layer >= 0 && taps >= 1 && taps <= 16 && ws.size() >= 2 && ws.front() == c &&
                   ws.back() == taps && v.numel(v.in(1)) == c * taps,
               v.shape(v.in(0)));
}
OpCost causal_conv_cost(const OpView& v, const CostArgs& a) {
  OpCost c = stream_cost(v, a);
  c.flops = 2.0 * double(a.rows) * double(v.numel(v.in(1)));
  return c;
}

// --- GatedDeltaRule: in qkv [rows, 2 hk dk + hv dv] (after the conv), a and b [rows, hv],
// A_log and dt_bias [hv]; out [rows, hv dv]. Reads and updates the layer's delta state
// [hv, dk, dv].
Shape delta_rule_shape(const OpView& v) {
  const DeltaRuleAttrs d = v.op.delta_rule();
  const bool dims = d.hk > 0 && d.hv > 0 && d.hv % d.hk == 0 && d.dk > 0 && d.dv > 0;
  const int64_t hv = d.hv, width = 2 * int64_t(d.hk) * d.dk + hv * d.dv;
  return if_ok(dims && v.op.layer >= 0 && v.cols(v.in(0)) == width && v.cols(v.in(1)) == hv &&
                   v.cols(v.in(2)) == hv && !v.weight(v.in(1)) && !v.weight(v.in(2)) &&
                   v.weight(v.in(3)) && v.weight(v.in(4)) && v.numel(v.in(3)) == hv &&
                   v.numel(v.in(4)) == hv,
               {v.rows(v.in(0)), hv * d.dv});
}
OpCost delta_rule_cost(const OpView& v, const CostArgs& a) {
  OpCost c = stream_cost(v, a);
  const DeltaRuleAttrs d = v.op.delta_rule();
  // The recurrent form: four passes over each head's dk x dv state per token; the chunked
  // form does about as many multiply-adds.
  c.flops = 8.0 * double(a.rows) * d.hv * d.dk * d.dv;
  return c;
}

// --- GatedRmsNorm: x and z [rows, cols], weight [group]; each run of `group` columns normed.
Shape gated_norm_shape(const OpView& v) {
  const int64_t c = v.cols(v.in(0)), group = v.op.norm().group;
  return if_ok(group > 0 && c % group == 0 && v.numel(v.in(2)) == group &&
                   v.shape(v.in(1)) == v.shape(v.in(0)),
               v.shape(v.in(0)));
}

// --- View: in x [rows, cols]; out [rows / factor, cols * factor], the same floats row-major
// (Qwen-VL's merger: 4 consecutive patches, one 2x2 block, become one row).
Shape view_shape(const OpView& v) {
  const int64_t f = v.op.view().factor, r = v.rows(v.in(0));
  return if_ok(f > 0 && r % f == 0, {f > 0 ? r / f : 0, v.cols(v.in(0)) * f});
}
std::vector<int32_t> view_in_place(const Op& op) {
  return {op.inputs[0]};  // the same bytes: nothing to move when the slot is shared
}

// --- ConcatCols: in activations of one row count; out their columns side by side.
Shape concat_cols_shape(const OpView& v) {
  int64_t cols = 0;
  for (int32_t id : v.op.inputs) {
    if (v.rows(id) != v.rows(v.in(0))) return {};
    cols += v.cols(id);
  }
  return {v.rows(v.in(0)), cols};
}

constexpr uint32_t kNone = 0, kAfterFirst = ~1u, kAny = ~0u;

// Indexed by OpType. Operand rules: which inputs may be weights (parameters) and which may be
// stored packed; the rest must be f32 activations.
constexpr OpDef kOps[] = {
    {.type = OpType::RmsNorm,
     .name = "rms_norm",
     .min_inputs = 2,
     .max_inputs = 2,
     .may_be_weight = kAfterFirst,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = rms_norm_shape,
     .cost = no_flops,
     .in_place = never_in_place},
    {.type = OpType::MatMul,
     .name = "matmul",
     .min_inputs = 2,
     .max_inputs = 4,
     .may_be_weight = kAfterFirst,
     .may_be_packed = 1u << 1,
     .rows_follow_output = true,
     .structure = matmul_structure,
     .output_shape = matmul_shape,
     .cost = matmul_cost,
     .in_place = matmul_in_place},
    {.type = OpType::Rope,
     .name = "rope",
     .min_inputs = 3,
     .max_inputs = 3,
     .may_be_weight = kAfterFirst,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = rope_shape,
     .cost = rope_cost,
     .in_place = never_in_place},
    {.type = OpType::Attention,
     .name = "attention",
     .min_inputs = 3,
     .max_inputs = 3,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = attention_shape,
     .cost = attention_cost,
     .in_place = never_in_place},
    {.type = OpType::SiluMul,
     .name = "silu_mul",
     .min_inputs = 2,
     .max_inputs = 2,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = binary_shape,
     .cost = no_flops,
     .in_place = over_any_input},
    {.type = OpType::Add,
     .name = "add",
     .min_inputs = 2,
     .max_inputs = 2,
     .may_be_weight = kAny,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = binary_shape,
     .cost = no_flops,
     .in_place = over_any_input},
    {.type = OpType::LayerNorm,
     .name = "layer_norm",
     .min_inputs = 3,
     .max_inputs = 3,
     .may_be_weight = kAfterFirst,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = layer_norm_shape,
     .cost = no_flops,
     .in_place = never_in_place},
    {.type = OpType::GeluErf,
     .name = "gelu",
     .min_inputs = 1,
     .max_inputs = 1,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = unary_shape,
     .cost = no_flops,
     .in_place = over_any_input},
    {.type = OpType::SelfAttention,
     .name = "self_attention",
     .min_inputs = 3,
     .max_inputs = 3,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = self_attention_shape,
     .cost = self_attention_cost,
     .in_place = never_in_place},
    {.type = OpType::PixelShuffle,
     .name = "pixel_shuffle",
     .min_inputs = 1,
     .max_inputs = 1,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = false,
     .structure = nullptr,
     .output_shape = pixel_shuffle_shape,
     .cost = no_flops,
     .in_place = never_in_place},
    {.type = OpType::PatchIm2col,
     .name = "patch_im2col",
     .min_inputs = 1,
     .max_inputs = 1,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = false,
     .structure = nullptr,
     .output_shape = patch_im2col_shape,
     .cost = no_flops,
     .in_place = never_in_place},
    {.type = OpType::CausalConv1d,
     .name = "causal_conv1d",
     .min_inputs = 2,
     .max_inputs = 2,
     .may_be_weight = 1u << 1,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = causal_conv_shape,
     .cost = causal_conv_cost,
     .in_place = never_in_place},
    {.type = OpType::GatedDeltaRule,
     .name = "gated_delta_rule",
     .min_inputs = 5,
     .max_inputs = 5,
     .may_be_weight = 0b11000u,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = delta_rule_shape,
     .cost = delta_rule_cost,
     .in_place = never_in_place},
    {.type = OpType::GatedRmsNorm,
     .name = "gated_rms_norm",
     .min_inputs = 3,
     .max_inputs = 3,
     .may_be_weight = 1u << 2,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = gated_norm_shape,
     .cost = no_flops,
     .in_place = never_in_place},
    {.type = OpType::SigmoidMul,
     .name = "sigmoid_mul",
     .min_inputs = 2,
     .max_inputs = 2,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = binary_shape,
     .cost = no_flops,
     .in_place = over_any_input},
    {.type = OpType::GeluTanh,
     .name = "gelu_tanh",
     .min_inputs = 1,
     .max_inputs = 1,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = unary_shape,
     .cost = no_flops,
     .in_place = over_any_input},
    {.type = OpType::View,
     .name = "view",
     .min_inputs = 1,
     .max_inputs = 1,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = false,
     .structure = nullptr,
     .output_shape = view_shape,
     .cost = no_flops,
     .in_place = view_in_place},
    {.type = OpType::ConcatCols,
     .name = "concat_cols",
     .min_inputs = 2,
     .max_inputs = 8,
     .may_be_weight = kNone,
     .may_be_packed = kNone,
     .rows_follow_output = true,
     .structure = nullptr,
     .output_shape = concat_cols_shape,
     .cost = no_flops,
     .in_place = never_in_place},
};
constexpr size_t kOpCount = sizeof(kOps) / sizeof(kOps[0]);

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kOpCount; ++i)
    if (uint32_t(kOps[i].type) != i) return false;
  return true;
}
static_assert(kOpCount == kOpTypeCount && table_in_enum_order(),
              "kOps must list every OpType in enum order");

}  // namespace

bool op_type_known(uint32_t t) {
  return t < kOpCount;
}

const OpDef& op_def(OpType t) {
  check(op_type_known(uint32_t(t)), "internal: unknown op type {}", uint32_t(t));
  return kOps[size_t(t)];
}

const char* op_name(OpType t) {
  return op_type_known(uint32_t(t)) ? kOps[size_t(t)].name : "unknown";
}

std::string op_structure_problem(const Graph& g, const Op& op) {
  const OpDef& d = op_def(op.type);
  if (int(op.inputs.size()) < d.min_inputs || int(op.inputs.size()) > d.max_inputs)
    return fmt::format("has {} inputs", op.inputs.size());
  return d.structure ? d.structure(g, op) : "";
}

std::string op_problem(const Graph& g, const Op& op, const std::vector<ValueInfo>& values) {
  const OpDef& d = op_def(op.type);
  const auto& in = op.inputs;
  if (std::string why = op_structure_problem(g, op); !why.empty()) return why;
  const Value& out = g.values[size_t(op.output)];
  if (out.shape.size() != 2) return "has a non-2-d output";
  for (size_t i = 0; i < in.size(); ++i) {
    const Value& x = g.values[size_t(in[i])];
    if (x.kind == ValueKind::Weight && !(d.may_be_weight >> i & 1))
      return fmt::format("reads weight '{}' where rows of data belong", x.name);
    if (x.kind == ValueKind::Activation && (x.shape.size() != 2 || x.shape[0] > g.width ||
                                            (d.rows_follow_output && x.shape[0] != out.shape[0])))
      return fmt::format("reads '{}' with a row count that does not fit", x.name);
  }
  if (d.output_shape(OpView{g, op, values}) != out.shape) return "has inconsistent shapes";
  return {};
}

OpCost op_cost(const Graph& g, const Op& op, const std::vector<ValueInfo>& values,
               const CostArgs& args) {
  return op_def(op.type).cost(OpView{g, op, values}, args);
}

}  // namespace edgevl
