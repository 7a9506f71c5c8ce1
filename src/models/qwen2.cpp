// Qwen2 / Qwen2.5: the Llama layout with a bias on q, k and v (never on o or the MLP).
#include "core/error.h"
#include "models/llama.h"

namespace edgevl::models {

namespace {

// Qwen/Qwen2-0.5B's config.json and generation_config.json as published, key for key.
const char* const kQwen2_0_5B = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 131072,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";
const char* const kQwen2_0_5BGeneration = R"({
  "bos_token_id": 151643,
  "do_sample": false,
  "eos_token_id": 151643,
  "max_new_tokens": 2048,
  "transformers_version": "4.37.0"
})";
// Qwen/Qwen2.5-1.5B-Instruct's (the LLM of InternVL3-2B).
const char* const kQwen25_1_5B = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 1536,
  "initializer_range": 0.02,
  "intermediate_size": 8960,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 12,
  "num_hidden_layers": 28,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";
const char* const kQwen25_1_5BGeneration = R"({
  "bos_token_id": 151643,
  "pad_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "repetition_penalty": 1.1,
  "temperature": 0.7,
  "top_p": 0.8,
  "top_k": 20,
  "transformers_version": "4.37.0"
})";

class Qwen2 final : public LlmFamily {
 public:
  const char* name() const override { return "qwen2"; }
  std::vector<std::string> model_types() const override { return {"qwen2"}; }
  std::vector<std::string> architectures() const override { return {"Qwen2ForCausalLM"}; }
  FamilyDefaults defaults() const override { return {32768, -1, -1, true, 0}; }
  void read_config(const JsonFields& f, LlmConfig&) const override {
    check(!f.opt_bool("use_sliding_window", false),
          "{}: use_sliding_window is true; edgevl supports only full attention", f.what());
  }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    // Qwen2Attention hard-codes bias=True on q/k/v, False on o: no flag says otherwise.
    return llama_layout_tensors(c, {.qkv_bias = true});
  }
  std::vector<SynthArch> synth_archs() const override {
    return {llm_synth_arch("qwen2-0.5b", kQwen2_0_5B, kQwen2_0_5BGeneration,
                           SynthTokenizer::ByteLevelBpe),
            llm_synth_arch("qwen2.5-1.5b", kQwen25_1_5B, kQwen25_1_5BGeneration,
                           SynthTokenizer::ByteLevelBpe)};
  }
  text::ChatTemplate chat_template(const std::string& hf) const override {
    if (hf.find("You are Qwen, created by Alibaba Cloud.") != std::string::npos)
      return text::chatml_template(
          "qwen2.5", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    return text::chatml_template("chatml", "You are a helpful assistant.");
  }
};

}  // namespace

const LlmFamily& qwen2_family() {
  static const Qwen2 f;
  return f;
}

}  // namespace edgevl::models
