#include "synth/qwen3_configs.h"

#include "core/error.h"

namespace edgevl::synth {

using ojson = nlohmann::ordered_json;

ojson qwen3_config(const std::string& arch) {
  // Qwen/Qwen3-0.6B's config.json; Qwen3-1.7B differs in hidden_size 2048 and
  // intermediate_size 6144.
  check(arch == "qwen3-0.6b" || arch == "qwen3-1.7b", "internal: no Qwen3 config for '{}'", arch);
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
  if (arch == "qwen3-1.7b") {
    c["hidden_size"] = 2048;
    c["intermediate_size"] = 6144;
  }
  return c;
}

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

}  // namespace edgevl::synth
