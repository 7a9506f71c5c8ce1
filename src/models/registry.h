#pragma once
// The families edgevl knows, and how a config.json finds its family.
#include <string>
#include <vector>

#include "models/family.h"

namespace edgevl::models {

const std::vector<const LlmFamily*>& llm_families();
// Every `edgevl synth` arch: the LLM families' in registry order, then the VLM wrappers'.
std::vector<SynthArch> synth_archs();

// By model_type, or (when `model_type` is empty) by architecture class name; null if none.
const LlmFamily* find_family(const std::string& model_type, const std::string& architecture = "");
// By LlmFamily::name(); throws naming the known ones.
const LlmFamily& family_named(const std::string& name);
// "llama, qwen2, ..." for error messages.
std::string supported_model_types();

}  // namespace edgevl::models
