#include "runtime/execution/op_runners.h"
#include "runtime/execution/rope_positions.h"

#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_ops.h"
#include "core/align.h"
#include "core/error.h"
#include "runtime/execution/causal_attention.h"
#include "runtime/execution/linear.h"
#include "runtime/execution/self_attention.h"

namespace edgevl {

bool GraphRun::in_blocks(int32_t id) const {
  const Graph& g = graph();
  if (!g.values[size_t(id)].bf16_blocks || dump ||
      !cpu::bf16_blocks_supported(rows_of(id), bound.blocks_panels[size_t(id)]))
    return false;
  const Op& p = g.ops[size_t(bound.producer[size_t(id)])];
  return p.type != OpType::SelfAttention || cpu::has_self_attention_bf16(p.attention().head_dim);
}

uint16_t* GraphRun::blocks(int32_t id) const {
  return reinterpret_cast<uint16_t*>(align64(f(id)));
}

OpCost GraphRun::cost(const Op& op) const {
  const KvCaches* k = per_row() ? row_kv[0] : kv;
  return op_cost(graph(), op, bound.values,
                 CostArgs{.rows = rows_of(op.output),
                          .n_kv = n_kv,
                          .kv_type = k ? k->type : DType::F16,
                          .per_row_kv = per_row()});
}

void GraphRun::first_step_done(size_t op_index, const Op& op, int32_t value) const {
  const Graph& g = graph();
  const int64_t m = rows_of(op.output);
  if (profiler) {
    const auto t1 = Profiler::Clock::now();
    const OpCost c = cost(op);
    profiler->record(g.name, bound.kinds[op_index], g.values[size_t(value)].name, op.layer, t0, t1,
                     c.flops, c.bytes);
    t0 = t1;
  }
  if (dump) dump(g.name, g.values[size_t(value)].name, f(value), m, cols(op.output));
}

namespace {

OpRan run_rms_norm(const GraphRun& r, size_t, const Op& op) {
  // A grouped norm (per head) is the same kernel over rows of `group` columns.
  const auto& in = op.inputs;
  const NormAttrs na = op.norm();
  const int64_t c = na.group > 0 ? na.group : r.cols(in[0]);
  const int64_t n_rows = r.rows_of(op.output) * (r.cols(in[0]) / c);
  float* y = r.f(op.output);
  r.split_rows(n_rows, c, [&](int64_t r0, int64_t r1) {
    cpu::rmsnorm(r.f(in[0]) + r0 * c, r.f(in[1]), na.eps, r1 - r0, c, y + r0 * c);
  });
  return {};
}

OpRan run_layer_norm(const GraphRun& r, size_t, const Op& op) {
  const auto& in = op.inputs;
  const int64_t c = r.cols(in[0]), m = r.rows_of(op.output);
  if (r.in_blocks(op.output)) {
    cpu::layernorm_to_bf16_blocks(r.pool, r.f(in[0]), r.f(in[1]), r.f(in[2]), op.norm().eps, m, c,
                                  r.blocks(op.output));
    return {.fused = " to bf16"};
  }
  float* y = r.f(op.output);
  r.split_rows(m, c, [&](int64_t r0, int64_t r1) {
    cpu::layernorm(r.f(in[0]) + r0 * c, r.f(in[1]), r.f(in[2]), op.norm().eps, r1 - r0, c,
                   y + r0 * c);
  });
  return {};
}

const char* fused_suffix(Epilogue e) {
  return e == Epilogue::kGeluErf ? "+gelu" : "+add";
}

OpRan run_matmul(const GraphRun& r, size_t op_index, const Op& op) {
  const auto& in = op.inputs;
  const TensorEntry& w = r.weight(in[1]);
  const MatMulAttrs mm = op.matmul();
  const int64_t m = r.rows_of(op.output), n = m * r.cols(op.output);
  float* y = r.f(op.output);
  const float* bias = op.bias() >= 0 ? r.f(op.bias()) : nullptr;
  const bool bf16_w = w.dtype == DType::BF16 || w.dtype == DType::BF16P;
  // The epilogue runs inside the bf16 block kernel where there is one for this CPU and shape (a
  // GELU only into blocks, a residual only into f32 rows); else as a step of its own over the
  // product.
  const bool from_blocks = r.in_blocks(in[0]);
  const bool gelu_to_blocks = mm.epilogue == Epilogue::kGeluErf && r.in_blocks(op.output);
  const bool residual_in_kernel = mm.epilogue == Epilogue::kAddResidual && bf16_w && !r.dump &&
                                  cpu::bf16_blocks_supported(m, w.dtype == DType::BF16P);
  const bool fused = gelu_to_blocks || residual_in_kernel;
  float* product = mm.epilogue == Epilogue::kNone || fused ? y : r.f(mm.pre);
  if (from_blocks || fused) {
    cpu::matmul_bf16_blocks(r.pool, from_blocks ? nullptr : r.f(in[0]),
                            from_blocks ? r.blocks(in[0]) : nullptr, m, w.shape[1],
                            static_cast<const uint16_t*>(r.data(in[1])), w.dtype == DType::BF16P,
                            w.shape[0], bias, gelu_to_blocks ? nullptr : product,
                            gelu_to_blocks ? r.blocks(op.output) : nullptr,
                            residual_in_kernel ? r.f(op.residual()) : nullptr);
  } else {
    run_linear(r.pool, r.f(in[0]), m, w, r.data(in[1]), bias, product, /*portable=*/false,
               /*row_invariant=*/r.per_row());
  }
  if (mm.epilogue == Epilogue::kNone) return {};
  if (fused) return {.fused = fused_suffix(mm.epilogue)};
  // The epilogue as an elementwise step over the product.
  r.first_step_done(op_index, op, mm.pre);
  const int64_t c = r.cols(op.output);
  if (mm.epilogue == Epilogue::kGeluErf) {
    r.elementwise(m, c, [&](int64_t a, int64_t b) { cpu::gelu_erf(product + a, y + a, b - a); });
    return {.last_step = epilogue_name(mm.epilogue), .last_step_bytes = 8.0 * double(n)};
  }
  const float* res = r.f(op.residual());
  r.elementwise(m, c, [&](int64_t a, int64_t b) { cpu::add(product + a, res + a, y + a, b - a); });
  return {.last_step = epilogue_name(mm.epilogue), .last_step_bytes = 12.0 * double(n)};
}

OpRan run_rope(const GraphRun& r, size_t, const Op& op) {
  const int64_t c = r.cols(op.output);
  float* y = r.f(op.output);
  const RopeAttrs a = op.rope();
  if (r.rope_thw && (a.mrope_h != 0 || a.mrope_w != 0)) {
    // MRoPE: each row's cos / sin gathered frequency by frequency from the table
    // row of that frequency's axis position (angle = position * inv_freq either way), then the
    // plain rotation over those rows. With partial rotary (Qwen3.5) the sections split the
    // rot / 2 rotated frequencies, the table's width, as transformers' recomposition does.
    const int64_t m = r.rows_of(op.output), half = a.rotated() / 2;
    thread_local std::vector<float> cs, sn;  // per call: m rows of half
    thread_local std::vector<int32_t> iota;
    cs.resize(size_t(m * half));
    sn.resize(size_t(m * half));
    iota.resize(size_t(m));
    for (int64_t i = 0; i < m; ++i) iota[size_t(i)] = int32_t(i);
    rope_rows(a, r.f(op.inputs[1]), r.f(op.inputs[2]), r.weight(op.inputs[1]).shape[0], r.positions,
              r.rope_thw, m, cs.data(), sn.data());
    // The gathered rows by pointer: the workers of split_rows have thread_local vectors of
    // their own (empty), so the lambdas must not name cs / sn / iota.
    const float *csp = cs.data(), *snp = sn.data();
    const int32_t* rows = iota.data();
    if (a.rotated() < a.head_dim) {
      // Each head's first rot dims as a head of their own (the rest pass), as below.
      r.split_rows(m, c, [&](int64_t r0, int64_t r1) {
        for (int64_t t = r0; t < r1; ++t)
          for (int h = 0; h < a.n_heads; ++h)
            cpu::rope_rotate_half(y + t * c + int64_t(h) * a.head_dim, 1, 1, a.rotated(), rows + t,
                                  csp, snp);
      });
      return {};
    }
    r.split_rows(m, c, [&](int64_t r0, int64_t r1) {
      cpu::rope_rotate_half(y + r0 * c, r1 - r0, a.n_heads, a.head_dim, rows + r0, csp, snp);
    });
    return {};
  }
  if (a.rotated() < a.head_dim) {
    // Partial rotary: each head's first rot dims as a head of their own (the rest pass), one
    // token and head per kernel call.
    const int64_t m = r.rows_of(op.output);
    for (int64_t t = 0; t < m; ++t)
      for (int h = 0; h < a.n_heads; ++h)
        cpu::rope_rotate_half(y + t * c + int64_t(h) * a.head_dim, 1, 1, a.rotated(),
                              r.positions + t, r.f(op.inputs[1]), r.f(op.inputs[2]));
    return {};
  }
  r.split_rows(r.rows_of(op.output), c, [&](int64_t r0, int64_t r1) {
    cpu::rope_rotate_half(y + r0 * c, r1 - r0, op.rope().n_heads, op.rope().head_dim,
                          r.positions + r0, r.f(op.inputs[1]), r.f(op.inputs[2]));
  });
  return {};
}

OpRan run_attention(const GraphRun& r, size_t, const Op& op) {
  const auto& in = op.inputs;
  const AttentionAttrs at = op.attention();
  const int64_t m = r.rows_of(op.output);
  float* y = r.f(op.output);
  if (r.per_row()) {
    // Each row is one decode step of its own sequence (or the next position of the same one, in
    // a verification): the M = 1 store, then every row's M = 1 attention in one dispatch. A row
    // sees keys up to its own position, so storing all rows first never shows a row a later
    // one's key.
    const int64_t qc = r.cols(in[0]), kc_cols = r.cols(in[1]);
    thread_local std::vector<cpu::AttentionRow> att;  // per layer and step: reused
    att.resize(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      const KvCaches* rk = r.row_kv[i];
      check(rk != nullptr && (*rk->k)[size_t(op.layer)] != nullptr,
            "internal: graph '{}' row {} has no KV cache", r.graph().name, i);
      uint8_t* kc = (*rk->k)[size_t(op.layer)];
      uint8_t* vc = (*rk->v)[size_t(op.layer)];
      const int64_t pos = r.positions[i];
      cpu::kv_store(r.f(in[1]) + i * kc_cols, r.f(in[2]) + i * kc_cols, 1, at.n_kv_heads,
                    at.head_dim, pos, kc, vc, rk->type, rk->capacity);
      att[size_t(i)] = {r.f(in[0]) + i * qc,      kc, vc, rk->type, rk->capacity, pos + 1,
                        y + i * r.cols(op.output)};
    }
    cpu::attention_rows(r.pool, att, at.n_heads, at.head_dim, at.n_kv_heads, at.scale);
    return {};
  }
  const KvCaches* kv = r.kv;
  check(kv != nullptr && (*kv->k)[size_t(op.layer)] != nullptr,
        "internal: graph '{}' needs a KV cache", r.graph().name);
  const int64_t pos0 = r.positions[0];
  uint8_t* kc = (*kv->k)[size_t(op.layer)];
  uint8_t* vc = (*kv->v)[size_t(op.layer)];
  cpu::kv_store(r.f(in[1]), r.f(in[2]), m, at.n_kv_heads, at.head_dim, pos0, kc, vc, kv->type,
                kv->capacity);
  if (m == 1) {
    cpu::attention(r.pool, r.f(in[0]), m, at.n_heads, at.head_dim, kc, vc, kv->type, at.n_kv_heads,
                   kv->capacity, pos0 + m, r.positions, at.scale, y);
  } else {
    causal_attention(r.pool, op, r.f(in[0]), m, kc, vc, *kv, pos0 + m, r.positions, y);
  }
  return {};
}

OpRan run_self_attention_op(const GraphRun& r, size_t, const Op& op) {
  // On AMX the fused kernel may write the output as bf16 blocks for o_proj directly.
  const auto& in = op.inputs;
  const bool to_blocks = r.in_blocks(op.output);
  run_self_attention(r.pool, op,
                     SelfAttentionIo{r.f(in[0]), r.f(in[1]), r.f(in[2]), r.cols(in[0]),
                                     r.cols(in[1]), r.rows_of(op.output), r.f(op.output),
                                     to_blocks ? r.blocks(op.output) : nullptr});
  return {.fused = to_blocks ? " to bf16" : nullptr};
}

// SiluMul (silu(gate) * up) and Add: elementwise over two operands of the output's shape.
template <void (*kKernel)(const float*, const float*, float*, int64_t)>
OpRan run_binary(const GraphRun& r, size_t, const Op& op) {
  const float *a = r.f(op.inputs[0]), *b = r.f(op.inputs[1]);
  float* y = r.f(op.output);
  r.elementwise(r.rows_of(op.output), r.cols(op.output),
                [&](int64_t i0, int64_t i1) { kKernel(a + i0, b + i0, y + i0, i1 - i0); });
  return {};
}

OpRan run_gelu(const GraphRun& r, size_t, const Op& op) {
  const float* x = r.f(op.inputs[0]);
  float* y = r.f(op.output);
  r.elementwise(r.rows_of(op.output), r.cols(op.output),
                [&](int64_t a, int64_t b) { cpu::gelu_erf(x + a, y + a, b - a); });
  return {};
}

OpRan run_pixel_shuffle(const GraphRun& r, size_t, const Op& op) {
  cpu::pixel_shuffle(r.f(op.inputs[0]), op.pixel_shuffle().grid, op.pixel_shuffle().factor,
                     r.cols(op.inputs[0]), r.f(op.output));
  return {};
}

OpRan run_patch_im2col(const GraphRun& r, size_t, const Op& op) {
  cpu::patch_im2col(r.f(op.inputs[0]), op.patch_im2col().image, op.patch_im2col().patch,
                    r.f(op.output));
  return {};
}

// The layer's recurrent state of a kind (KvCaches::conv or ::delta) for row i (run_rows) or
// for all rows.
float* layer_state(const GraphRun& r, const Op& op, int64_t i,
                   const std::vector<float*>* KvCaches::*kind) {
  const KvCaches* kv = r.per_row() ? r.row_kv[i] : r.kv;
  check(kv != nullptr && kv->*kind != nullptr && size_t(op.layer) < (kv->*kind)->size() &&
            (*(kv->*kind))[size_t(op.layer)] != nullptr,
        "internal: graph '{}' layer {} needs a recurrent state the sequence does not have",
        r.graph().name, op.layer);
  return (*(kv->*kind))[size_t(op.layer)];
}

// Each row of a decode batch is a sequence of its own (or the next token of the same one, in
// order): its own state, one token per call. Otherwise the rows are consecutive tokens.
OpRan run_causal_conv1d(const GraphRun& r, size_t, const Op& op) {
  const int64_t m = r.rows_of(op.output), c = r.cols(op.output);
  const float *x = r.f(op.inputs[0]), *w = r.f(op.inputs[1]);
  float* y = r.f(op.output);
  const int taps = op.conv().taps;
  if (!r.per_row())
    return cpu::causal_conv1d_silu(x, m, c, w, taps, layer_state(r, op, 0, &KvCaches::conv), y),
           OpRan{};
  for (int64_t i = 0; i < m; ++i)
    cpu::causal_conv1d_silu(x + i * c, 1, c, w, taps, layer_state(r, op, i, &KvCaches::conv),
                            y + i * c);
  return {};
}

OpRan run_gated_delta_rule(const GraphRun& r, size_t, const Op& op) {
  const auto& in = op.inputs;
  const DeltaRuleAttrs d = op.delta_rule();
  const int64_t m = r.rows_of(op.output);
  auto args = [&](int64_t row0, int64_t rows, float* state) {
    return cpu::DeltaRuleArgs{r.f(in[0]) + row0 * r.cols(in[0]),
                              r.cols(in[0]),
                              r.f(in[1]) + row0 * d.hv,
                              r.f(in[2]) + row0 * d.hv,
                              d.hv,
                              r.f(in[3]),
                              r.f(in[4]),
                              rows,
                              d.hk,
                              d.hv,
                              d.dk,
                              d.dv,
                              state,
                              r.f(op.output) + row0 * r.cols(op.output),
                              r.cols(op.output)};
  };
  if (!r.per_row())
    return cpu::gated_delta_rule(r.pool, args(0, m, layer_state(r, op, 0, &KvCaches::delta))),
           OpRan{};
  for (int64_t i = 0; i < m; ++i)
    cpu::gated_delta_rule(r.pool, args(i, 1, layer_state(r, op, i, &KvCaches::delta)));
  return {};
}

OpRan run_gated_rms_norm(const GraphRun& r, size_t, const Op& op) {
  const auto& in = op.inputs;
  const NormAttrs na = op.norm();
  const int64_t g = na.group, n_rows = r.rows_of(op.output) * (r.cols(in[0]) / g);
  float* y = r.f(op.output);
  r.split_rows(n_rows, g, [&](int64_t r0, int64_t r1) {
    cpu::gated_rmsnorm(r.f(in[0]) + r0 * g, r.f(in[1]) + r0 * g, r.f(in[2]), na.eps, r1 - r0, g,
                       y + r0 * g);
  });
  return {};
}

OpRan run_gelu_tanh(const GraphRun& r, size_t, const Op& op) {
  const float* x = r.f(op.inputs[0]);
  float* y = r.f(op.output);
  r.elementwise(r.rows_of(op.output), r.cols(op.output),
                [&](int64_t a, int64_t b) { cpu::gelu_tanh(x + a, y + a, b - a); });
  return {};
}
// The input's valid rows, unchanged, as fewer wider rows; nothing to do when the planner gave
// the output the input's slot.
OpRan run_view(const GraphRun& r, size_t, const Op& op) {
  const float* x = r.f(op.inputs[0]);
  float* y = r.f(op.output);
  if (x != y) std::copy_n(x, r.rows_of(op.inputs[0]) * r.cols(op.inputs[0]), y);
  return {};
}
OpRan run_concat_cols(const GraphRun& r, size_t, const Op& op) {
  const int64_t m = r.rows_of(op.output), c = r.cols(op.output);
  float* y = r.f(op.output);
  int64_t at = 0;
  for (int32_t in : op.inputs) {
    const int64_t ci = r.cols(in);
    const float* x = r.f(in);
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + i * ci, ci, y + i * c + at);
    at += ci;
  }
  return {};
}

// Indexed by OpType, like the op table.
constexpr OpRunner kRunners[] = {
    {run_rms_norm},                  // RmsNorm
    {run_matmul},                    // MatMul
    {run_rope},                      // Rope
    {run_attention},                 // Attention
    {run_binary<cpu::silu_mul>},     // SiluMul
    {run_binary<cpu::add>},          // Add
    {run_layer_norm},                // LayerNorm
    {run_gelu},                      // GeluErf
    {run_self_attention_op},         // SelfAttention
    {run_pixel_shuffle},             // PixelShuffle
    {run_patch_im2col},              // PatchIm2col
    {run_causal_conv1d},             // CausalConv1d
    {run_gated_delta_rule},          // GatedDeltaRule
    {run_gated_rms_norm},            // GatedRmsNorm
    {run_binary<cpu::sigmoid_mul>},  // SigmoidMul
    {run_gelu_tanh},                 // GeluTanh
    {run_view},                      // View
    {run_concat_cols},               // ConcatCols
};
static_assert(sizeof(kRunners) / sizeof(kRunners[0]) == kOpTypeCount,
              "every OpType needs a runner, in enum order");

}  // namespace

const OpRunner& op_runner(OpType t) {
  check(uint32_t(t) < kOpTypeCount, "internal: unknown op type {}", uint32_t(t));
  return kRunners[size_t(t)];
}

}  // namespace edgevl
