#pragma once
// Import of an LLM's checkpoint tensors, driven by its family's tensor table
// (src/models/<family>.cpp): every listed tensor must be present with the listed shape, and
// becomes the tensor the graph reads in its slot (fused tensors are split here, at compile
// time, never at load).
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "format/evb.h"
#include "format/model_config.h"
#include "models/family.h"
#include "models/internvl.h"

namespace edgevl::compiler {

using models::WeightRole;

struct WeightSpec {
  std::string name;            // name in the .evb tensor table
  std::vector<int64_t> shape;  // as the kernels read it; linear weights are [out, in]
  WeightRole role = WeightRole::Linear;
  std::function<void(float* out)> produce;   // fills shape.numel() floats (File source only)
  TensorSource source = TensorSource::File;  // else computed at load, no bytes in the file
};

struct LlmWeights {
  std::vector<WeightSpec> specs;
  models::DecoderTensors tensors;  // what the family's graphs read, by slot
  std::set<std::string> consumed;  // checkpoint names read
};

// `rope_positions` sizes the RoPE tables (the compiled context). Throws one error listing
// every missing tensor.
LlmWeights plan_llm_weights(const Checkpoint& ckpt, const LlmConfig& cfg,
                            const models::LlmFamily& family, const models::LlmNaming& naming,
                            int64_t rope_positions);

// Fails listing the checkpoint tensors no rule consumed, except names ending in one of
// `allowed` (tensors a family knows to be unneeded).
void check_all_consumed(const Checkpoint& ckpt, const std::set<std::string>& consumed,
                        const std::vector<std::string>& allowed);

}  // namespace edgevl::compiler
