#pragma once
// The Llama tensor layout, shared by the families that kept it (Qwen2, Qwen3): embed_tokens,
// per layer input_layernorm / self_attn.{q,k,v,o}_proj / post_attention_layernorm /
// mlp.{gate,up,down}_proj, then norm and lm_head. Which optional tensors exist (biases,
// Qwen3's q_norm / k_norm) is the family's to say, from its flags.
#include "models/family.h"

namespace edgevl::models {

struct LlamaLayout {
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  bool qk_norm = false;  // self_attn.q_norm / k_norm, [head_dim] each
};
std::vector<TensorDef> llama_layout_tensors(const LlmConfig& c, const LlamaLayout& layout);
const LlmFamily& llama_family();

}  // namespace edgevl::models
