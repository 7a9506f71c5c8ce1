#include "compiler/llm_graph.h"

#include <cmath>

#include "graph/graph_builder.h"
#include "core/error.h"

namespace edgevl::compiler {

// The decoder every family shares (pre-norm, RoPE, GQA attention, SwiGLU MLP); what differs
// by family is which optional tensors exist, and those are read from `w`: q/k/v/o and MLP
// biases, Qwen3's per-head q/k norms.
Graph build_llm_graph(const std::string& name, int32_t width, const LlmConfig& c,
                      const LlmWeights& w, const std::map<std::string, int32_t>& index) {
  GraphBuilder b(name, width, index);
  const int64_t d = c.hidden, q_out = int64_t(c.n_heads) * c.head_dim,
                kv_out = int64_t(c.n_kv_heads) * c.head_dim;
  const NormAttrs row_norm{.eps = c.norm_eps};
  const NormAttrs head_norm{.eps = c.norm_eps, .group = c.head_dim};
  int32_t x = b.activation("input", d);
  b.graph().input = x;
  const int32_t cos = b.weight(w.rope_cos), sin = b.weight(w.rope_sin);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerNames& n = w.layers[size_t(l)];
    const std::string p = "layer." + std::to_string(l) + ".";
    int32_t h = b.op(OpType::RmsNorm, {x, b.weight(n.attn_norm)}, p + "attn_norm", d, l);
    b.last().set(row_norm);
    int32_t q = b.matmul(h, n.wq, n.bq, p + "q", q_out, l);
    int32_t k = b.matmul(h, n.wk, n.bk, p + "k", kv_out, l);
    int32_t v = b.matmul(h, n.wv, n.bv, p + "v", kv_out, l);
    if (!n.q_norm.empty()) {
      q = b.op(OpType::RmsNorm, {q, b.weight(n.q_norm)}, p + "q_norm", q_out, l);
      b.last().set(head_norm);
    }
    if (!n.k_norm.empty()) {
      k = b.op(OpType::RmsNorm, {k, b.weight(n.k_norm)}, p + "k_norm", kv_out, l);
      b.last().set(head_norm);
    }
    b.rope(q, cos, sin, c.n_heads, c.head_dim, l);
    b.rope(k, cos, sin, c.n_kv_heads, c.head_dim, l);
    int32_t a = b.op(OpType::Attention, {q, k, v}, p + "attn", q_out, l);
    b.last().set(AttentionAttrs{.n_heads = c.n_heads,
                                .n_kv_heads = c.n_kv_heads,
                                .head_dim = c.head_dim,
                                .scale = 1.0f / std::sqrt(float(c.head_dim))});
    int32_t o = b.matmul(a, n.wo, n.bo, p + "attn_out", d, l);
    int32_t x1 = b.op(OpType::Add, {x, o}, p + "attn_res", d, l);
    int32_t h2 = b.op(OpType::RmsNorm, {x1, b.weight(n.ffn_norm)}, p + "ffn_norm", d, l);
    b.last().set(row_norm);
    int32_t gate = b.matmul(h2, n.w_gate, n.b_gate, p + "ffn_gate", c.ffn, l);
    int32_t up = b.matmul(h2, n.w_up, n.b_up, p + "ffn_up", c.ffn, l);
    int32_t act = b.op(OpType::SiluMul, {gate, up}, p + "ffn_act", c.ffn, l);
    int32_t f = b.matmul(act, n.w_down, n.b_down, p + "ffn_out", d, l);
    x = b.op(OpType::Add, {x1, f}, p + "out", d, l);
  }
  int32_t out = b.op(OpType::RmsNorm, {x, b.weight(w.final_norm)}, "final_norm", d, -1);
  b.last().set(row_norm);
  b.graph().output = out;
  return std::move(b.graph());
}

Graph build_head_graph(const LlmConfig& c, const LlmWeights& w,
                       const std::map<std::string, int32_t>& index) {
  return build_head_graph("head", 1, c, w, index);
}

Graph build_head_graph(const std::string& name, int32_t width, const LlmConfig& c,
                       const LlmWeights& w, const std::map<std::string, int32_t>& index) {
  GraphBuilder b(name, width, index);
  int32_t x = b.activation("final_norm", c.hidden);
  b.graph().input = x;
  b.graph().output = b.matmul(x, w.lm_head, "", "logits", c.vocab_size, -1);
  return std::move(b.graph());
}

}  // namespace edgevl::compiler
