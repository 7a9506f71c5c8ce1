#include "models/llama.h"

#include <fmt/format.h>

namespace edgevl::models {

std::vector<TensorDef> llama_layout_tensors(const LlmConfig& c, const LlamaLayout& o) {
  const int64_t d = c.hidden, hd = c.head_dim, q = int64_t(c.n_heads) * hd,
                kv = int64_t(c.n_kv_heads) * hd, f = c.ffn, v = c.vocab_size;
  using R = WeightRole;
  std::vector<TensorDef> t;
  t.push_back({"model.embed_tokens.weight", {v, d}, R::Embedding, Slot::Embedding});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    auto add = [&](std::string name, std::vector<int64_t> shape, R role, Slot slot) {
      t.push_back({p + name, std::move(shape), role, slot, l});
    };
    add("input_layernorm.weight", {d}, R::Norm, Slot::AttnNorm);
    add("self_attn.q_proj.weight", {q, d}, R::Linear, Slot::Wq);
    if (o.qkv_bias) add("self_attn.q_proj.bias", {q}, R::Bias, Slot::Bq);
    add("self_attn.k_proj.weight", {kv, d}, R::Linear, Slot::Wk);
    if (o.qkv_bias) add("self_attn.k_proj.bias", {kv}, R::Bias, Slot::Bk);
    add("self_attn.v_proj.weight", {kv, d}, R::Linear, Slot::Wv);
    if (o.qkv_bias) add("self_attn.v_proj.bias", {kv}, R::Bias, Slot::Bv);
    if (o.qk_norm) {
      add("self_attn.q_norm.weight", {hd}, R::Norm, Slot::QNorm);
      add("self_attn.k_norm.weight", {hd}, R::Norm, Slot::KNorm);
    }
    add("self_attn.o_proj.weight", {d, q}, R::Linear, Slot::Wo);
    if (o.o_bias) add("self_attn.o_proj.bias", {d}, R::Bias, Slot::Bo);
    add("post_attention_layernorm.weight", {d}, R::Norm, Slot::FfnNorm);
    add("mlp.gate_proj.weight", {f, d}, R::Linear, Slot::WGate);
    if (o.mlp_bias) add("mlp.gate_proj.bias", {f}, R::Bias, Slot::BGate);
    add("mlp.up_proj.weight", {f, d}, R::Linear, Slot::WUp);
    if (o.mlp_bias) add("mlp.up_proj.bias", {f}, R::Bias, Slot::BUp);
    add("mlp.down_proj.weight", {d, f}, R::Linear, Slot::WDown);
    if (o.mlp_bias) add("mlp.down_proj.bias", {d}, R::Bias, Slot::BDown);
  }
  t.push_back({"model.norm.weight", {d}, R::Norm, Slot::FinalNorm});
  if (!c.tie_embeddings) t.push_back({"lm_head.weight", {v, d}, R::LmHead, Slot::LmHead});
  return t;
}

namespace {

// TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json and generation_config.json as published, key
// for key: a Llama-2-style shape with GQA (`synth --arch llama`).
const char* const kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5632,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0",
  "use_cache": true,
  "vocab_size": 32000
})";
const char* const kTinyLlamaGeneration = R"({
  "bos_token_id": 1,
  "eos_token_id": 2,
  "max_length": 2048,
  "pad_token_id": 0,
  "transformers_version": "4.35.0"
})";

class Llama final : public LlmFamily {
  // LlamaAttention: q/k/v/o all take bias=config.attention_bias; LlamaMLP: all three
  // projections take bias=config.mlp_bias.
  static constexpr BoolFlag kAttentionBias{"attention_bias"}, kMlpBias{"mlp_bias"};

 public:
  const char* name() const override { return "llama"; }
  std::vector<std::string> model_types() const override { return {"llama"}; }
  std::vector<std::string> architectures() const override { return {"LlamaForCausalLM"}; }
  FamilyDefaults defaults() const override { return {2048, 1, 2, true, 0}; }
  std::vector<BoolFlag> flags() const override { return {kAttentionBias, kMlpBias}; }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    return llama_layout_tensors(
        c, {.qkv_bias = kAttentionBias(c), .o_bias = kAttentionBias(c), .mlp_bias = kMlpBias(c)});
  }
  std::vector<std::string> unused_ok() const override {
    return {".self_attn.rotary_emb.inv_freq"};  // saved by transformers < 4.31
  }
  std::vector<SynthArch> synth_archs() const override {
    return {llm_synth_arch("llama", kTinyLlama, kTinyLlamaGeneration,
                           SynthTokenizer::SentencePieceLlama)};
  }
  text::ChatTemplate chat_template(const std::string& hf) const override {
    // Chat fine-tunes that switched to ChatML say so in their template; the rest use the
    // Llama-2 format (transformers' default for Llama tokenizers).
    if (hf.find("<|im_start|>") != std::string::npos)
      return text::chatml_template("chatml", "You are a helpful assistant.");
    return text::llama2_template();
  }
};

}  // namespace

const LlmFamily& llama_family() {
  static const Llama f;
  return f;
}

}  // namespace edgevl::models
