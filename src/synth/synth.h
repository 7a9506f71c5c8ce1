#pragma once
// Random-weight checkpoints of real architectures, laid out exactly like the hub repo
// (config.json, generation_config.json, model.safetensors, tokenizer files) so every import
// path is exercised on the real tensor names and shapes. Weight values do not change speed,
// so these are also fair inputs for benchmarks.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "format/model_config.h"
#include "models/internvit.h"

namespace edgevl::synth {

struct SynthOptions {
  std::string arch;   // one of synth_arch_names()
  int layers = -1;    // LLM layers; -1: the real layer count
  uint64_t seed = 1;  // same seed, same bytes
  std::filesystem::path out;
  std::string dtype = "bf16";  // bf16 (as on the hub), f16 or f32
  // InternVL archs only (CLI --vision-layers, --hf-names):
  int vision_layers = -1;  // InternViT layers; -1: the real count (24)
  bool hf_names = false;   // transformers-native "-hf" layout instead of the original one
};

// The archs the families declare (models/registry.h synth_archs): LLM archs first, then the
// InternVL ones.
std::vector<std::string> synth_arch_names();

void synth_checkpoint(const SynthOptions& o,
                      const std::function<void(const std::string&)>& progress = {});

// The hub tensor names and shapes ([out, in] for linear weights) of an LLM of this config,
// in model order: what synth writes and what an importer of that architecture must find.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<HfTensor> hf_llm_tensors(const LlmConfig& c);

// The same for an InternVL checkpoint: vision tower, projector, then the LLM, in the original
// (vision_model.*, mlp1.*, language_model.*) or transformers-native naming. The LLM is untied
// (InternVLChatConfig forces tie_word_embeddings false); an InternLM2 LLM in the native
// naming is written llama-style (separate q/k/v), as the hub's -hf conversions do.
using VisionShape = models::InternVitShape;
std::vector<HfTensor> hf_internvl_tensors(const VisionShape& v, const LlmConfig& llm,
                                          bool hf_names);

}  // namespace edgevl::synth
