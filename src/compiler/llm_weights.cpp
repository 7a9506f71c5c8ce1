#include "compiler/llm_weights.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "format/safetensors.h"

namespace edgevl::compiler {

void rope_tables(float theta, int head_dim, int64_t positions, float* cos_out, float* sin_out) {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    const float expo = float(2 * i) / float(head_dim);
    inv_freq[i] = 1.0f / float(std::pow(double(theta), double(expo)));
  }
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = float(p) * inv_freq[i];
      cos_out[p * half + i] = float(std::cos(double(angle)));
      sin_out[p * half + i] = float(std::sin(double(angle)));
    }
  }
}

namespace {

struct Planner {
  const Checkpoint& ckpt;
  LlmWeights& out;
  std::vector<std::string> missing;

  // A checkpoint tensor used as is. Returns its table name, or "" when optional and absent.
  std::string direct(const std::string& name, std::vector<int64_t> shape, WeightRole role,
                     bool optional = false) {
    const TensorView* t = ckpt.find(name);
    if (!t) {
      if (!optional) missing.push_back(name);
      return "";
    }
    check(t->shape == shape, "{}: tensor '{}' has shape {} but the config implies {}",
          ckpt.dir().string(), name, fmt_shape(t->shape), fmt_shape(shape));
    out.specs.push_back({name, shape, role, [t](float* dst) { tensor_to_f32(*t, dst); }});
    return name;
  }

  static std::string fmt_shape(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  }
};

}  // namespace

LlmWeights plan_llm_weights(const Checkpoint& ckpt, const LlmConfig& c, const LlmNaming& naming,
                            int64_t rope_positions) {
  LlmWeights w;
  Planner p{ckpt, w, {}};
  const int64_t d = c.hidden, hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads;
  const int64_t q_out = nh * hd, kv_out = nkv * hd;
  const bool internlm = c.arch == Arch::InternLM2;
  const std::string& m = naming.body;

  w.embedding = p.direct(m + (internlm ? "tok_embeddings.weight" : "embed_tokens.weight"),
                         {c.vocab_size, d}, WeightRole::Embedding);
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerNames& n = w.layers[l];
    const std::string b = m + "layers." + std::to_string(l) + ".";
    if (!internlm) {
      n.attn_norm = p.direct(b + "input_layernorm.weight", {d}, WeightRole::Norm);
      n.wq = p.direct(b + "self_attn.q_proj.weight", {q_out, d}, WeightRole::Linear);
      n.wk = p.direct(b + "self_attn.k_proj.weight", {kv_out, d}, WeightRole::Linear);
      n.wv = p.direct(b + "self_attn.v_proj.weight", {kv_out, d}, WeightRole::Linear);
      if (c.qkv_bias) {
        n.bq = p.direct(b + "self_attn.q_proj.bias", {q_out}, WeightRole::Bias);
        n.bk = p.direct(b + "self_attn.k_proj.bias", {kv_out}, WeightRole::Bias);
        n.bv = p.direct(b + "self_attn.v_proj.bias", {kv_out}, WeightRole::Bias);
      }
      n.wo = p.direct(b + "self_attn.o_proj.weight", {d, q_out}, WeightRole::Linear);
      if (c.o_bias) n.bo = p.direct(b + "self_attn.o_proj.bias", {d}, WeightRole::Bias);
      n.ffn_norm = p.direct(b + "post_attention_layernorm.weight", {d}, WeightRole::Norm);
      n.w_gate = p.direct(b + "mlp.gate_proj.weight", {c.ffn, d}, WeightRole::Linear);
      n.w_up = p.direct(b + "mlp.up_proj.weight", {c.ffn, d}, WeightRole::Linear);
      n.w_down = p.direct(b + "mlp.down_proj.weight", {d, c.ffn}, WeightRole::Linear);
      continue;
    }
    // InternLM2: wqkv rows are grouped per KV head as [q heads of the group][k][v], each
    // head_dim rows; de-interleave into separate q, k, v projections.
    n.attn_norm = p.direct(b + "attention_norm.weight", {d}, WeightRole::Norm);
    const std::string fused = b + "attention.wqkv.weight";
    const TensorView* t = ckpt.find(fused);
    const int64_t group = nh / nkv;
    if (!t) {
      p.missing.push_back(fused);
    } else {
      check(t->shape == std::vector<int64_t>{(nh + 2 * nkv) * hd, d},
            "{}: tensor '{}' has shape {} but the config implies [{}, {}]", ckpt.dir().string(),
            fused, Planner::fmt_shape(t->shape), (nh + 2 * nkv) * hd, d);
      // part 0..group-1 = q heads, group = k, group+1 = v (within each kv head's block)
      auto split = [&](const std::string& name, int64_t rows, int64_t first, int64_t count) {
        w.specs.push_back(
            {name, {rows, d}, WeightRole::Linear, [t, d, hd, group, nkv, first, count](float* dst) {
               std::vector<float> all(size_t(t->numel()));
               tensor_to_f32(*t, all.data());
               float* o = dst;
               for (int64_t kv = 0; kv < nkv; ++kv)
                 for (int64_t j = first; j < first + count; ++j) {
                   const float* src = all.data() + (kv * (group + 2) + j) * hd * d;
                   std::copy(src, src + hd * d, o);
                   o += hd * d;
                 }
             }});
        return name;
      };
      n.wq = split(b + "attention.wq.weight", q_out, 0, group);
      n.wk = split(b + "attention.wk.weight", kv_out, group, 1);
      n.wv = split(b + "attention.wv.weight", kv_out, group + 1, 1);
    }
    check(!c.qkv_bias, "{}: InternLM2 with a wqkv bias is not supported yet", ckpt.dir().string());
    n.wo = p.direct(b + "attention.wo.weight", {d, q_out}, WeightRole::Linear);
    if (c.o_bias) n.bo = p.direct(b + "attention.wo.bias", {d}, WeightRole::Bias);
    n.ffn_norm = p.direct(b + "ffn_norm.weight", {d}, WeightRole::Norm);
    n.w_gate = p.direct(b + "feed_forward.w1.weight", {c.ffn, d}, WeightRole::Linear);
    n.w_up = p.direct(b + "feed_forward.w3.weight", {c.ffn, d}, WeightRole::Linear);
    n.w_down = p.direct(b + "feed_forward.w2.weight", {d, c.ffn}, WeightRole::Linear);
  }
  w.final_norm = p.direct(m + "norm.weight", {d}, WeightRole::Norm);
  if (c.tie_embeddings) {
    w.lm_head = w.embedding;
  } else {
    w.lm_head = p.direct(naming.head + (internlm ? "output.weight" : "lm_head.weight"),
                         {c.vocab_size, d}, WeightRole::LmHead);
  }
  if (!p.missing.empty()) {
    std::string list;
    for (size_t i = 0; i < p.missing.size(); ++i) {
      if (i == 12) {
        list += fmt::format(", ... ({} more)", p.missing.size() - i);
        break;
      }
      list += (i ? ", " : "") + p.missing[i];
    }
    fail("{}: {} tensor(s) the {} architecture needs are missing: {}", ckpt.dir().string(),
         p.missing.size(), arch_name(c.arch), list);
  }

  w.rope_cos = "rope.cos";
  w.rope_sin = "rope.sin";
  const float theta = c.rope_theta;
  const int head_dim = c.head_dim;
  auto make = [=](bool want_sin) {
    return [=](float* dst) {
      std::vector<float> cs(size_t(rope_positions * head_dim / 2)), sn(cs.size());
      rope_tables(theta, head_dim, rope_positions, cs.data(), sn.data());
      const auto& src = want_sin ? sn : cs;
      std::copy(src.begin(), src.end(), dst);
    };
  };
  w.specs.push_back({w.rope_cos, {rope_positions, hd / 2}, WeightRole::Constant, make(false)});
  w.specs.push_back({w.rope_sin, {rope_positions, hd / 2}, WeightRole::Constant, make(true)});
  return w;
}

}  // namespace edgevl::compiler
