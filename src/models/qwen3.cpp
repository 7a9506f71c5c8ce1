// Qwen3 (dense): the Llama layout with an RMSNorm over each head of q and of k between the
// projection and RoPE (q_norm / k_norm, weights [head_dim], eps = rms_norm_eps), an explicit
// head_dim (128 in every published size, and Qwen3Config's default), biases on q/k/v/o only
// when attention_bias is set, and no MLP bias.
#include "core/error.h"
#include "models/llama.h"

namespace edgevl::models {

namespace {

using ojson = nlohmann::ordered_json;

// Qwen/Qwen3-0.6B's config.json as published, key for key; Qwen3-1.7B differs in hidden_size
// 2048 and intermediate_size 6144. InternVL3.5-1B / 2B carry them as their llm_config.
ojson qwen3_config(bool size_1_7b) {
  ojson c = ojson::parse(R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})");
  if (size_1_7b) {
    c["hidden_size"] = 2048;
    c["intermediate_size"] = 6144;
  }
  return c;
}

// generation_config.json: Qwen3's published sampling defaults (thinking mode).
ojson qwen3_generation_config() {
  return ojson::parse(R"({
  "bos_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "pad_token_id": 151643,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.51.0"
})");
}

class Qwen3 final : public LlmFamily {
  static constexpr BoolFlag kAttentionBias{"attention_bias"};  // on q/k/v/o

 public:
  const char* name() const override { return "qwen3"; }
  std::vector<std::string> model_types() const override { return {"qwen3"}; }
  std::vector<std::string> architectures() const override { return {"Qwen3ForCausalLM"}; }
  FamilyDefaults defaults() const override { return {32768, -1, -1, true, 128}; }
  std::vector<BoolFlag> flags() const override { return {kAttentionBias}; }
  void read_config(const JsonFields& f, LlmConfig&) const override {
    check(!f.opt_bool("use_sliding_window", false),
          "{}: use_sliding_window is true; edgevl supports only full attention", f.what());
    if (const nlohmann::json* lt = f.opt("layer_types"); lt && lt->is_array())
      for (const auto& t : *lt)
        check(t.is_string() && t.get<std::string>() == "full_attention",
              "{}: layer_types holds {}; edgevl supports only full_attention layers", f.what(),
              t.dump());
  }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    return llama_layout_tensors(
        c, {.qkv_bias = kAttentionBias(c), .o_bias = kAttentionBias(c), .qk_norm = true});
  }
  std::vector<SynthArch> synth_archs() const override {
    return {llm_synth_arch(
                "qwen3-0.6b", [] { return qwen3_config(false); }, qwen3_generation_config,
                SynthTokenizer::ByteLevelBpe),
            llm_synth_arch(
                "qwen3-1.7b", [] { return qwen3_config(true); }, qwen3_generation_config,
                SynthTokenizer::ByteLevelBpe)};
  }
  text::ChatTemplate chat_template(const std::string&) const override {
    // ChatML without a default system message. With thinking on (the template's default),
    // the generation prompt is just "<|im_start|>assistant\n".
    return text::chatml_template("qwen3", "");
  }
};

}  // namespace

const LlmFamily& qwen3_family() {
  static const Qwen3 f;
  return f;
}

}  // namespace edgevl::models
