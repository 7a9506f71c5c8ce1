#pragma once
// Reading the hub's config.json / generation_config.json into LlmConfig. The keys every
// family shares are read here; the family (found by model_type, or architectures[0] when a
// nested config omits it) reads its own and supplies the defaults for absent keys, so a
// config that transformers loads means the same thing here. Absent required keys are errors
// naming key and file.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/model_config.h"

namespace edgevl::models {

// `j` is a config object (top-level config.json, or the nested LLM config of a VLM wrapper);
// `what` names it in errors (e.g. "/m/config.json" or "/m/config.json llm_config").
// Notes about accepted-but-noteworthy settings (e.g. dynamic NTK rope scaling) are appended
// to `notes` when given.
LlmConfig parse_llm_config(const nlohmann::json& j, const std::string& what,
                           std::vector<std::string>* notes = nullptr);

// Reads DIR/config.json and, if present, DIR/generation_config.json (its eos ids are added
// to extra_eos_ids). A VLM wrapper (InternVL, either naming) is unwrapped to its LLM config.
LlmConfig load_llm_config(const std::filesystem::path& dir,
                          std::vector<std::string>* notes = nullptr);

}  // namespace edgevl::models
