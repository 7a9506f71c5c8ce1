#pragma once
// InternViT (the vision tower of InternVL: InternViT-300M-448px and its V2.5) and the mlp1
// projector: the table of their checkpoint tensors, with shapes, in both namings, and the
// vision graph over one tile. The importer (compiler/vision_weights.cpp) and `synth` read the
// one table; the compiler asks for the graph.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/graph_builder.h"
#include "models/blocks.h"
#include "models/internvl.h"

namespace edgevl::models {

struct InternVitShape {
  int64_t hidden = 1024, layers = 24, ffn = 4096, image = 448, patch = 14;
  int64_t shuffle = 2;  // 1 / downsample_ratio
  bool qkv_bias = true;
};

struct VisionTensor {
  std::string name;  // "" when this naming has no such tensor
  std::vector<int64_t> shape;
  bool present() const { return !name.empty(); }
};

struct InternVitTable {
  VisionTensor cls, patch_w, patch_b, pos;
  struct Layer {
    // The original naming fuses q, k, v into qkv; the transformers-native one does not.
    VisionTensor n1w, n1b, qkv_w, qkv_b, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, ls1;
    VisionTensor n2w, n2b, fc1w, fc1b, fc2w, fc2b, ls2;
  };
  std::vector<Layer> layers;
  VisionTensor pn_w, pn_b, p1w, p1b, p2w, p2b;  // mlp1: LayerNorm, Linear, (GELU), Linear

  // Every present tensor in model order (the order synth writes them).
  std::vector<VisionTensor> all() const;
};

InternVitTable internvit_table(VlmNaming naming, const InternVitShape& v, int64_t llm_hidden);
// The name prefix of vision layer `l`'s tensors ("vision_model.encoder.layers.3.").
std::string internvit_layer_prefix(VlmNaming naming, int64_t l);

// The tensor-table names the vision graph reads, after the importer's transforms (patch
// embedding as a matmul, class token + position embeddings as one constant, qkv split, layer
// scales folded into the projections: compiler/vision_weights.h).
struct InternVitWeights {
  std::string patch_w, patch_b, embed_add;
  std::vector<VitLayerTensors> layers;
  std::string pn_w, pn_b, p1w, p1b, p2w, p2b;  // mlp1: LayerNorm, Linear, (GELU), Linear
};

// Input: the tile's pixels [3, image^2]; im2col makes [1 + grid^2, 3 * patch^2] rows (row 0
// zero, then patches row-major, each flattened channel-major like the conv weight). Output
// "vision_embeds": [tokens_per_tile, llm_hidden].
Graph internvit_graph(const VisionConfig& v, const InternVitWeights& w, const TensorIndex& index);

}  // namespace edgevl::models
