#pragma once
// Which checkpoint tensors an LLM needs, under which names, and how each becomes the tensor
// the graphs read (e.g. InternLM2's fused grouped wqkv is split into q, k, v here, at compile
// time, never at load).
#include <functional>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "format/model_config.h"

namespace edgevl::compiler {

enum class WeightRole {
  Embedding,  // token embeddings (also the lm_head when tied)
  LmHead,
  Norm,      // RMSNorm / LayerNorm weights: kept in float
  Bias,      // kept in float
  Linear,    // projection matrices [out, in]
  Constant,  // precomputed tables (RoPE)
};

struct WeightSpec {
  std::string name;            // name in the .evb tensor table
  std::vector<int64_t> shape;  // as the kernels read it; linear weights are [out, in]
  WeightRole role = WeightRole::Linear;
  std::function<void(float* out)> produce;  // fills shape.numel() floats
};

// Tensor-table names of one decoder layer (empty = absent).
struct LayerNames {
  std::string attn_norm, wq, wk, wv, bq, bk, bv, wo, bo, ffn_norm, w_gate, w_up, w_down;
};

struct LlmWeights {
  std::vector<WeightSpec> specs;
  std::string embedding, final_norm, lm_head;  // lm_head == embedding when tied
  std::string rope_cos, rope_sin;
  std::vector<LayerNames> layers;
};

// Where an LLM's tensors live in a checkpoint: `body` prefixes the decoder
// ("model." for a plain LLM, "language_model.model." in an InternVL checkpoint,
// "model.language_model." in a transformers-native one) and `head` the output projection
// ("", "language_model.", "").
struct LlmNaming {
  std::string body = "model.";
  std::string head;
};

// `rope_positions` sizes the RoPE tables (the compiled context). Throws one error listing
// every missing tensor.
LlmWeights plan_llm_weights(const Checkpoint& ckpt, const LlmConfig& cfg, const LlmNaming& naming,
                            int64_t rope_positions);

// RoPE tables exactly as transformers computes them in float32: inv_freq[i] =
// 1 / theta^(2i/d), angle = pos * inv_freq[i] (a float32 product); rows are positions.
void rope_tables(float theta, int head_dim, int64_t positions, float* cos_out, float* sin_out);

}  // namespace edgevl::compiler
