#pragma once
// InternVL's vision side: the InternViT tower, pixel shuffle and the mlp1 projector, as a
// static graph over one tile. Weight transforms done here, once:
//   - the patch-embedding Conv2d(k = s = patch) becomes a matmul over flattened patches;
//   - class token, patch bias and position embeddings fold into one additive constant;
//   - the fused qkv projection is split into q, k, v;
//   - the layer scales ls1 / ls2 are folded into the rows of attn.proj / mlp.fc2.
#include <map>
#include <set>
#include <string>

#include "compiler/llm_weights.h"
#include "format/checkpoint.h"
#include "graph/graph.h"
#include "models/internvl.h"

namespace edgevl::compiler {

struct VisionWeights {
  std::vector<WeightSpec> specs;
  std::string patch_w, patch_b, embed_add;
  struct Layer {
    std::string n1w, n1b, wq, bq, wk, bk, wv, bv, wo, bo, n2w, n2b, fc1w, fc1b, fc2w, fc2b;
  };
  std::vector<Layer> layers;
  std::string pn_w, pn_b, p1w, p1b, p2w, p2b;  // mlp1: LayerNorm, Linear, (GELU), Linear
  std::set<std::string> consumed;              // checkpoint names read
};

VisionWeights plan_vision_weights(const Checkpoint& ckpt, const models::VlmInfo& info);

// Input: [1 + grid^2, 3 * patch^2] rows (row 0 zero, then patches row-major, each flattened
// channel-major like the conv weight); output "vision_embeds": [tokens_per_tile, llm_hidden].
Graph build_vision_graph(const VisionConfig& v, const VisionWeights& w,
                         const std::map<std::string, int32_t>& tensor_index);

}  // namespace edgevl::compiler
