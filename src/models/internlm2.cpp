// InternLM2 (remote code, modeling_internlm2.py): its own tensor names, q/k/v fused into one
// `wqkv` whose rows are grouped per KV head as [the group's q heads][k][v] (each head_dim
// rows), bias on wqkv and wo when config.bias (default true), none on the feed-forward.
#include <fmt/format.h>

#include "core/error.h"
#include "models/family.h"

namespace edgevl::models {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// internlm/internlm2-chat-1_8b's config.json and generation_config.json as published, key for
// key (the LLM of InternVL2-2B).
const char* const kInternLM2_1_8B = R"({
  "architectures": ["InternLM2ForCausalLM"],
  "attn_implementation": "eager",
  "auto_map": {
    "AutoConfig": "configuration_internlm2.InternLM2Config",
    "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM",
    "AutoModel": "modeling_internlm2.InternLM2ForCausalLM"
  },
  "bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 32768,
  "model_type": "internlm2",
  "num_attention_heads": 16,
  "num_hidden_layers": 24,
  "num_key_value_heads": 8,
  "pad_token_id": 2,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "type": "dynamic",
    "factor": 2.0
  },
  "rope_theta": 1000000,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.41.0",
  "use_cache": true,
  "vocab_size": 92544
})";
const char* const kInternLM2_1_8BGeneration = R"({
  "bos_token_id": 1,
  "eos_token_id": [2, 92542],
  "pad_token_id": 2,
  "transformers_version": "4.41.0"
})";

class InternLM2 final : public LlmFamily {
  // InternLM2Config's `bias` (default true) puts a bias on wqkv and wo.
  static constexpr BoolFlag kBias{"bias", true};

 public:
  const char* name() const override { return "internlm2"; }
  std::vector<std::string> model_types() const override { return {"internlm2"}; }
  std::vector<std::string> architectures() const override { return {"InternLM2ForCausalLM"}; }
  // modeling_internlm2 derives head_dim from hidden_size whatever the config says.
  FamilyDefaults defaults() const override { return {2048, 1, 2, false, 0}; }
  std::vector<BoolFlag> flags() const override { return {kBias}; }

  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    const int64_t d = c.hidden, hd = c.head_dim, q = int64_t(c.n_heads) * hd,
                  kv = int64_t(c.n_kv_heads) * hd, f = c.ffn, v = c.vocab_size;
    using R = WeightRole;
    std::vector<TensorDef> t;
    t.push_back({"model.tok_embeddings.weight", {v, d}, R::Embedding, Slot::Embedding});
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const std::string p = fmt::format("model.layers.{}.", l);
      auto add = [&](std::string name, std::vector<int64_t> shape, R role, Slot slot) {
        t.push_back({p + name, std::move(shape), role, slot, l});
      };
      add("attention.wqkv.weight", {q + 2 * kv, d}, R::Linear, Slot::Fused);
      if (kBias(c)) add("attention.wqkv.bias", {q + 2 * kv}, R::Bias, Slot::Fused);
      add("attention.wo.weight", {d, q}, R::Linear, Slot::Wo);
      if (kBias(c)) add("attention.wo.bias", {d}, R::Bias, Slot::Bo);
      add("feed_forward.w1.weight", {f, d}, R::Linear, Slot::WGate);
      add("feed_forward.w3.weight", {f, d}, R::Linear, Slot::WUp);
      add("feed_forward.w2.weight", {d, f}, R::Linear, Slot::WDown);
      add("attention_norm.weight", {d}, R::Norm, Slot::AttnNorm);
      add("ffn_norm.weight", {d}, R::Norm, Slot::FfnNorm);
    }
    t.push_back({"model.norm.weight", {d}, R::Norm, Slot::FinalNorm});
    if (!c.tie_embeddings) t.push_back({"output.weight", {v, d}, R::LmHead, Slot::LmHead});
    return t;
  }

  std::vector<SplitPart> split(const TensorDef& t, const LlmConfig& c) const override {
    // Within each KV head's block of (group + 2) * head_dim rows: q heads, then k, then v.
    const bool bias = ends_with(t.name, ".bias");
    const int64_t hd = c.head_dim, group = c.n_heads / c.n_kv_heads, block = (group + 2) * hd;
    const int64_t cols = bias ? 1 : c.hidden;
    const std::string stem = t.name.substr(0, t.name.size() - (bias ? 9 : 11));  // ...wqkv
    const std::string base = stem.substr(0, stem.size() - 4);                    // ...attention.
    const std::string kind = bias ? ".bias" : ".weight";
    return {
        {bias ? Slot::Bq : Slot::Wq, base + "wq" + kind, c.n_heads * hd, cols, 0, group * hd, block,
         c.n_kv_heads},
        {bias ? Slot::Bk : Slot::Wk, base + "wk" + kind, c.n_kv_heads * hd, cols, group * hd, hd,
         block, c.n_kv_heads},
        {bias ? Slot::Bv : Slot::Wv, base + "wv" + kind, c.n_kv_heads * hd, cols, (group + 1) * hd,
         hd, block, c.n_kv_heads},
    };
  }

  std::vector<SynthArch> synth_archs() const override {
    return {llm_synth_arch("internlm2-1.8b", kInternLM2_1_8B, kInternLM2_1_8BGeneration,
                           SynthTokenizer::SentencePieceInternLM2)};
  }

  text::ChatTemplate chat_template(const std::string& hf) const override {
    // InternLM2-chat: "{{ bos_token }}" then ChatML turns, no default system message.
    if (hf.empty() || hf.find("<|im_start|>") != std::string::npos) {
      text::ChatTemplate t = text::chatml_template("internlm2-chat", "");
      t.prefix = "<s>";
      return t;
    }
    return text::llama2_template();
  }
};

}  // namespace

const LlmFamily& internlm2_family() {
  static const InternLM2 f;
  return f;
}

}  // namespace edgevl::models
