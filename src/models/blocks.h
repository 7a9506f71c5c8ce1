#pragma once
// The blocks model graphs are composed of, over GraphBuilder: norms, the decoder's causal
// attention (GQA over the KV cache with RoPE; q/k/v/o biases and per-head q/k RMSNorm where the
// family's table has them), the SwiGLU MLP, the Llama pre-norm decoder layer, the LM head, and
// the ViT encoder block (LayerNorm, full self-attention, GELU MLP). A family's graph composes
// them (LlmFamily's defaults, internvit.cpp); a family with a layer of a new kind adds its
// block here. Each block appends its ops under the name prefix it is given ("layer.3.") and
// returns the value it computes; value names are what `run --dump` and the profiler show.
#include <cstdint>
#include <string>

#include "format/model_config.h"
#include "graph/graph_builder.h"
#include "models/tensor_slots.h"

namespace edgevl::models {

// RMSNorm of x's rows (NormAttrs::group 0) or of each `group` columns, times the weight `w`.
int32_t rms_norm(GraphBuilder& b, int32_t x, const std::string& w, const NormAttrs& attrs,
                 const std::string& out, int64_t cols, int32_t layer);
// LayerNorm of x's rows with weight and bias; `rows` -1: the graph width.
int32_t layer_norm(GraphBuilder& b, int32_t x, const std::string& w, const std::string& bias,
                   float eps, const std::string& out, int64_t cols, int32_t layer,
                   int64_t rows = -1);

struct AttentionShape {
  int64_t hidden = 0;  // rows' width in and out
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float qk_norm_eps = 1e-6f;         // the per-head q/k RMSNorm's (when the table has one)
  int32_t mrope_h = 0, mrope_w = 0;  // interleaved MRoPE sections (RopeAttrs); 0: plain RoPE
  static AttentionShape of(const LlmConfig& c);
};

// Causal attention of the normed rows h over the layer's KV cache: the q/k/v projections (with
// biases where t has Bq/Bk/Bv), a per-head RMSNorm of q and of k where t has QNorm/KNorm, RoPE on
// q and k, attention, the output projection (Bo). Returns the projection (before the residual).
int32_t causal_attention(GraphBuilder& b, int32_t h, const LayerTensors& t, const AttentionShape& s,
                         RopeTables rope, const std::string& prefix, int32_t layer);
// down(silu(gate(h)) * up(h)) with biases where t has BGate/BUp/BDown; `hidden` = output cols.
int32_t swiglu_mlp(GraphBuilder& b, int32_t h, const LayerTensors& t, int64_t ffn, int64_t hidden,
                   const std::string& prefix, int32_t layer);
// The Llama layer: x + attention(RMSNorm(x)), then that + SwiGLU(RMSNorm(that)).
int32_t llama_decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t, const LlmConfig& c,
                            RopeTables rope, int32_t layer);
// Qwen3.5's gated full attention: causal_attention whose q_proj also yields a per-head output
// gate (t[WqGate]), RoPE on the first `rot_dim` dims of each head only, and the attention
// output times sigmoid(gate) before o_proj. Returns the projection (before the residual).
int32_t gated_attention(GraphBuilder& b, int32_t h, const LayerTensors& t, const AttentionShape& s,
                        RopeTables rope, int32_t rot_dim, const std::string& prefix, int32_t layer);
struct DeltaNetShape {
  int64_t hidden = 0;
  int32_t hk = 0, hv = 0, dk = 0, dv = 0, taps = 0;
  float norm_eps = 1e-6f;  // the gated output norm's
};
// Qwen3.5's Gated DeltaNet mixer over the normed rows h: in_proj_qkv, the causal conv + SiLU
// (state: the layer's conv state), the gated delta rule (state: S), the gated RMSNorm by
// silu(in_proj_z), out_proj. Returns the projection (before the residual).
int32_t gated_delta_net(GraphBuilder& b, int32_t h, const LayerTensors& t, const DeltaNetShape& s,
                        const std::string& prefix, int32_t layer);

// The same with the attention's shape given (AttentionShape::of(c) plus, e.g., MRoPE sections).
int32_t llama_decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t, const LlmConfig& c,
                            const AttentionShape& shape, RopeTables rope, int32_t layer);
// Final-norm rows -> logits: one matmul with the LM head (the embedding when tied).
Graph lm_head_graph(const std::string& name, int32_t width, const LlmConfig& c,
                    const DecoderTensors& t, const TensorIndex& index);

// The tensor-table names of one pre-norm ViT layer (biases may be "": absent).
struct VitLayerTensors {
  std::string n1w, n1b, wq, bq, wk, bk, wv, bv, wo, bo, n2w, n2b, fc1w, fc1b, fc2w, fc2b;
};
struct VitShape {
  int64_t hidden = 0, ffn = 0;
  int32_t n_heads = 0;
  float norm_eps = 1e-6f;
};
// h + attn(LayerNorm(h)) with full (non-causal) self-attention over the rows, then that +
// fc2(GELU(fc1(LayerNorm(that)))).
int32_t vit_block(GraphBuilder& b, int32_t h, const VitLayerTensors& t, const VitShape& s,
                  const std::string& prefix, int32_t layer);

}  // namespace edgevl::models
