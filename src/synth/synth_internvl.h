#pragma once
// InternVL pieces of `edgevl synth` (internal to synth.cpp): the published configs of the
// InternVL2 / 2.5 small models, their transformers-native ("-hf") form, and the special tokens
// InternVL adds to the LLM's tokenizer.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace edgevl::synth::detail {

enum class VlmLlm { Qwen2, Qwen25, InternLM2, Qwen3 };

struct VlmArch {
  nlohmann::ordered_json config;      // config.json in the original naming, as published
  nlohmann::ordered_json generation;  // generation_config.json
  VlmLlm llm;
};

std::vector<std::string> internvl_arch_names();
bool is_internvl_arch(const std::string& name);
VlmArch internvl_arch(const std::string& name);

// A token the InternVL tokenizer holds beyond the plain LLM vocabulary.
struct AddedToken {
  int32_t id;
  std::string content;
  bool special;
};
// In id order: for Qwen2.5, its own extra added tokens (151646..151664) first, for Qwen3
// those and <tool_response>, </tool_response>, <think>, </think> (151646..151668); then <img>,
// </img>, <IMG_CONTEXT>, <quad>, </quad>, <ref>, </ref>, <box>, </box>.
std::vector<AddedToken> internvl_added_tokens(VlmLlm llm);
// Size of the LLM tokenizer the synth tokenizer writers produce (before the added tokens).
int32_t base_tokenizer_size(VlmLlm llm);
int32_t img_context_id(VlmLlm llm);

// Merges the added tokens into DIR/tokenizer_config.json (added_tokens_decoder and
// additional_special_tokens), where the importer picks them up.
void add_tokens_to_tokenizer_config(const std::filesystem::path& dir,
                                    const std::vector<AddedToken>& toks);

// config.json of the transformers-native layout ("model_type": "internvl") for the original
// config `orig` (overrides already applied).
nlohmann::ordered_json to_hf_config(const nlohmann::ordered_json& orig, VlmLlm llm);

}  // namespace edgevl::synth::detail
