#pragma once
// The import of InternVL's vision side (the InternViT tower, pixel shuffle and the mlp1
// projector; its table and graph are models/internvit.cpp). Weight transforms done here, once:
//   - the patch-embedding Conv2d(k = s = patch) becomes a matmul over flattened patches;
//   - class token, patch bias and position embeddings fold into one additive constant;
//   - the fused qkv projection is split into q, k, v;
//   - the layer scales ls1 / ls2 are folded into the rows of attn.proj / mlp.fc2.
#include <set>
#include <string>

#include "compiler/llm_weights.h"
#include "format/checkpoint.h"
#include "models/internvit.h"

namespace edgevl::compiler {

struct VisionWeights {
  std::vector<WeightSpec> specs;
  models::InternVitWeights tensors;  // what the vision graph reads
  std::set<std::string> consumed;    // checkpoint names read
};

VisionWeights plan_vision_weights(const Checkpoint& ckpt, const models::VlmInfo& info);

}  // namespace edgevl::compiler
