#include "models/blocks.h"

#include <cmath>

#include "models/mrope.h"

namespace edgevl::models {

int32_t rms_norm(GraphBuilder& b, int32_t x, const std::string& w, const NormAttrs& attrs,
                 const std::string& out, int64_t cols, int32_t layer) {
  const int32_t y = b.op(OpType::RmsNorm, {x, b.weight(w)}, out, cols, layer);
  b.last().set(attrs);
  return y;
}

int32_t layer_norm(GraphBuilder& b, int32_t x, const std::string& w, const std::string& bias,
                   float eps, const std::string& out, int64_t cols, int32_t layer, int64_t rows) {
  const int32_t y =
      b.op(OpType::LayerNorm, {x, b.weight(w), b.weight(bias)}, out, cols, layer, rows);
  b.last().set(NormAttrs{.eps = eps});
  return y;
}

AttentionShape AttentionShape::of(const LlmConfig& c) {
  return {c.hidden,
          c.n_heads,
          c.n_kv_heads,
          c.head_dim,
          c.norm_eps,
          c.flags.get_int(kMropeH, 0),
          c.flags.get_int(kMropeW, 0)};
}

int32_t causal_attention(GraphBuilder& b, int32_t h, const LayerTensors& t, const AttentionShape& s,
                         RopeTables rope, const std::string& p, int32_t l) {
  const int64_t q_out = int64_t(s.n_heads) * s.head_dim,
                kv_out = int64_t(s.n_kv_heads) * s.head_dim;
  int32_t q = b.matmul(h, t[Slot::Wq], t[Slot::Bq], p + "q", q_out, l);
  int32_t k = b.matmul(h, t[Slot::Wk], t[Slot::Bk], p + "k", kv_out, l);
  const int32_t v = b.matmul(h, t[Slot::Wv], t[Slot::Bv], p + "v", kv_out, l);
  // Qwen3: each head of q and of k normed on its own, between the projection and RoPE.
  const NormAttrs head_norm{.eps = s.qk_norm_eps, .group = s.head_dim};
  if (!t[Slot::QNorm].empty())
    q = rms_norm(b, q, t[Slot::QNorm], head_norm, p + "q_norm", q_out, l);
  if (!t[Slot::KNorm].empty())
    k = rms_norm(b, k, t[Slot::KNorm], head_norm, p + "k_norm", kv_out, l);
  b.rope(q, rope.cos, rope.sin, s.n_heads, s.head_dim, l, 0, s.mrope_h, s.mrope_w);
  b.rope(k, rope.cos, rope.sin, s.n_kv_heads, s.head_dim, l, 0, s.mrope_h, s.mrope_w);
  const int32_t a = b.op(OpType::Attention, {q, k, v}, p + "attn", q_out, l);
  b.last().set(AttentionAttrs{.n_heads = s.n_heads,
                              .n_kv_heads = s.n_kv_heads,
                              .head_dim = s.head_dim,
                              .scale = 1.0f / std::sqrt(float(s.head_dim))});
  return b.matmul(a, t[Slot::Wo], t[Slot::Bo], p + "attn_out", s.hidden, l);
}

int32_t gated_attention(GraphBuilder& b, int32_t h, const LayerTensors& t, const AttentionShape& s,
                        RopeTables rope, int32_t rot_dim, const std::string& p, int32_t l) {
  const int64_t q_out = int64_t(s.n_heads) * s.head_dim,
                kv_out = int64_t(s.n_kv_heads) * s.head_dim;
  int32_t q = b.matmul(h, t[Slot::Wq], t[Slot::Bq], p + "q", q_out, l);
  const int32_t gate = b.matmul(h, t[Slot::WqGate], t[Slot::BqGate], p + "q_gate", q_out, l);
  int32_t k = b.matmul(h, t[Slot::Wk], t[Slot::Bk], p + "k", kv_out, l);
  const int32_t v = b.matmul(h, t[Slot::Wv], t[Slot::Bv], p + "v", kv_out, l);
  const NormAttrs head_norm{.eps = s.qk_norm_eps, .group = s.head_dim};
  q = rms_norm(b, q, t[Slot::QNorm], head_norm, p + "q_norm", q_out, l);
  k = rms_norm(b, k, t[Slot::KNorm], head_norm, p + "k_norm", kv_out, l);
  // MRoPE over the rot_dim / 2 rotated frequencies (Qwen3.5's interleaved sections).
  b.rope(q, rope.cos, rope.sin, s.n_heads, s.head_dim, l, rot_dim, s.mrope_h, s.mrope_w);
  b.rope(k, rope.cos, rope.sin, s.n_kv_heads, s.head_dim, l, rot_dim, s.mrope_h, s.mrope_w);
  const int32_t a = b.op(OpType::Attention, {q, k, v}, p + "attn", q_out, l);
  b.last().set(AttentionAttrs{.n_heads = s.n_heads,
                              .n_kv_heads = s.n_kv_heads,
                              .head_dim = s.head_dim,
                              .scale = 1.0f / std::sqrt(float(s.head_dim))});
  const int32_t g = b.op(OpType::SigmoidMul, {a, gate}, p + "attn_gated", q_out, l);
  return b.matmul(g, t[Slot::Wo], t[Slot::Bo], p + "attn_out", s.hidden, l);
}

int32_t gated_delta_net(GraphBuilder& b, int32_t h, const LayerTensors& t, const DeltaNetShape& s,
                        const std::string& p, int32_t l) {
  const int64_t hv = s.hv, kd = int64_t(s.hk) * s.dk, vd = hv * s.dv, width = 2 * kd + vd;
  const int32_t qkv = b.matmul(h, t[Slot::LinQkv], "", p + "lin_qkv", width, l);
  const int32_t z = b.matmul(h, t[Slot::LinZ], "", p + "lin_z", vd, l);
  const int32_t beta = b.matmul(h, t[Slot::LinB], "", p + "lin_b", hv, l);
  const int32_t a = b.matmul(h, t[Slot::LinA], "", p + "lin_a", hv, l);
  const int32_t u =
      b.op(OpType::CausalConv1d, {qkv, b.weight(t[Slot::LinConv])}, p + "lin_conv", width, l);
  b.last().set(ConvAttrs{.taps = s.taps});
  const int32_t o = b.op(OpType::GatedDeltaRule,
                         {u, a, beta, b.weight(t[Slot::LinALog]), b.weight(t[Slot::LinDtBias])},
                         p + "lin_delta", vd, l);
  b.last().set(DeltaRuleAttrs{.hk = s.hk, .hv = s.hv, .dk = s.dk, .dv = s.dv});
  const int32_t n =
      b.op(OpType::GatedRmsNorm, {o, z, b.weight(t[Slot::LinNorm])}, p + "lin_norm", vd, l);
  b.last().set(NormAttrs{.eps = s.norm_eps, .group = s.dv});
  return b.matmul(n, t[Slot::LinOut], "", p + "lin_out", s.hidden, l);
}

int32_t swiglu_mlp(GraphBuilder& b, int32_t h, const LayerTensors& t, int64_t ffn, int64_t hidden,
                   const std::string& p, int32_t l) {
  const int32_t gate = b.matmul(h, t[Slot::WGate], t[Slot::BGate], p + "ffn_gate", ffn, l);
  const int32_t up = b.matmul(h, t[Slot::WUp], t[Slot::BUp], p + "ffn_up", ffn, l);
  const int32_t act = b.op(OpType::SiluMul, {gate, up}, p + "ffn_act", ffn, l);
  return b.matmul(act, t[Slot::WDown], t[Slot::BDown], p + "ffn_out", hidden, l);
}

int32_t llama_decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t, const LlmConfig& c,
                            RopeTables rope, int32_t l) {
  return llama_decoder_layer(b, x, t, c, AttentionShape::of(c), rope, l);
}

int32_t llama_decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t, const LlmConfig& c,
                            const AttentionShape& shape, RopeTables rope, int32_t l) {
  const int64_t d = c.hidden;
  const NormAttrs row_norm{.eps = c.norm_eps};
  const std::string p = "layer." + std::to_string(l) + ".";
  const int32_t h = rms_norm(b, x, t[Slot::AttnNorm], row_norm, p + "attn_norm", d, l);
  const int32_t o = causal_attention(b, h, t, shape, rope, p, l);
  const int32_t x1 = b.op(OpType::Add, {x, o}, p + "attn_res", d, l);
  const int32_t h2 = rms_norm(b, x1, t[Slot::FfnNorm], row_norm, p + "ffn_norm", d, l);
  const int32_t f = swiglu_mlp(b, h2, t, c.ffn, d, p, l);
  return b.op(OpType::Add, {x1, f}, p + "out", d, l);
}

Graph lm_head_graph(const std::string& name, int32_t width, const LlmConfig& c,
                    const DecoderTensors& t, const TensorIndex& index) {
  GraphBuilder b(name, width, index);
  const int32_t x = b.activation("final_norm", c.hidden);
  b.graph().input = x;
  b.graph().output = b.matmul(x, t.lm_head, "", "logits", c.vocab_size, -1);
  return std::move(b.graph());
}

int32_t vit_block(GraphBuilder& b, int32_t h, const VitLayerTensors& t, const VitShape& s,
                  const std::string& p, int32_t l) {
  const int64_t D = s.hidden;
  const int hd = int(D / s.n_heads);
  const int32_t a = layer_norm(b, h, t.n1w, t.n1b, s.norm_eps, p + "norm1", D, l);
  const int32_t q = b.matmul(a, t.wq, t.bq, p + "q", D, l);
  const int32_t k = b.matmul(a, t.wk, t.bk, p + "k", D, l);
  const int32_t v = b.matmul(a, t.wv, t.bv, p + "v", D, l);
  const int32_t att = b.op(OpType::SelfAttention, {q, k, v}, p + "attn", D, l);
  b.last().set(AttentionAttrs{.n_heads = s.n_heads,
                              .n_kv_heads = s.n_heads,
                              .head_dim = hd,
                              .scale = 1.0f / std::sqrt(float(hd))});
  const int32_t o = b.matmul(att, t.wo, t.bo, p + "attn_out", D, l);
  const int32_t h1 = b.op(OpType::Add, {h, o}, p + "attn_res", D, l);
  const int32_t n2 = layer_norm(b, h1, t.n2w, t.n2b, s.norm_eps, p + "norm2", D, l);
  const int32_t f1 = b.matmul(n2, t.fc1w, t.fc1b, p + "fc1", s.ffn, l);
  const int32_t g = b.op(OpType::GeluErf, {f1}, p + "gelu", s.ffn, l);
  const int32_t f2 = b.matmul(g, t.fc2w, t.fc2b, p + "mlp_out", D, l);
  return b.op(OpType::Add, {h1, f2}, p + "out", D, l);
}

}  // namespace edgevl::models
