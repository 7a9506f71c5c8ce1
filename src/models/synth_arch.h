#pragma once
// A published checkpoint shape that `edgevl synth` (src/synth, a tool of tests and benchmarks)
// writes with random weights. Each is declared in its family's file (LlmFamily::synth_archs,
// internvl_synth.cpp) and found through the registry (registry.h synth_archs), so synth itself
// knows no architecture: it writes the files an arch gives it, then reads them back like a
// downloaded checkpoint to learn which tensors to write.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace edgevl::models {

// The tokenizer files synth generates (synth/synth_tokenizer.h).
enum class SynthTokenizer { ByteLevelBpe, SentencePieceLlama, SentencePieceInternLM2 };

// What synth may change in a published config.
struct SynthOverrides {
  int layers = -1;  // LLM layers; -1: as published
  int vision_layers =
      -1;  // a VLM's vision layers (InternViT's, Qwen3.5's tower's); -1: as published
  std::string torch_dtype;  // "bfloat16", "float16", "float32"; "": as published
  bool hf_names = false;    // a VLM's transformers-native ("-hf") layout
};

struct SynthFiles {
  nlohmann::ordered_json config;      // config.json, key for key as published
  nlohmann::ordered_json generation;  // generation_config.json
  SynthTokenizer tokenizer = SynthTokenizer::ByteLevelBpe;
  int32_t tokenizer_size = 0;  // regular tokens to generate; 0: the LLM's vocab_size
  // preprocessor_config.json (Qwen3.5's image processor); null: none written.
  nlohmann::ordered_json preprocessor;
  // Edits the generated tokenizer_config.json (a VLM's added tokens); null: left as generated.
  std::function<void(nlohmann::ordered_json&)> edit_tokenizer_config;
};

struct SynthArch {
  std::string name;     // `synth --arch`: "qwen2-0.5b"
  bool vision = false;  // a VLM: vision_layers and hf_names apply
  std::function<SynthFiles(const SynthOverrides&)> files;
};

// A plain LLM's arch from its published config.json and generation_config.json (kept key for
// key); the overrides set num_hidden_layers and torch_dtype.
SynthArch llm_synth_arch(std::string name, std::function<nlohmann::ordered_json()> config,
                         std::function<nlohmann::ordered_json()> generation,
                         SynthTokenizer tokenizer);
// The same from their JSON text.
SynthArch llm_synth_arch(std::string name, const char* config, const char* generation,
                         SynthTokenizer tokenizer);

}  // namespace edgevl::models
