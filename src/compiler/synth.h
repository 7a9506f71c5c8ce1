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

namespace edgevl::synth {

struct SynthOptions {
  std::string arch;   // one of synth_arch_names()
  int layers = -1;    // -1: the real layer count
  uint64_t seed = 1;  // same seed, same bytes
  std::filesystem::path out;
  std::string dtype = "bf16";  // bf16 (as on the hub), f16 or f32
};

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

}  // namespace edgevl::synth
