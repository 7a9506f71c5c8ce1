#pragma once
// Reading the hub's config.json / generation_config.json into LlmConfig.
//
// Supported model_type values: "qwen2", "llama", "internlm2". Defaults for absent optional
// keys follow the transformers config class of each family (so a config that transformers
// loads means the same thing here); absent required keys are errors naming key and file.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/model_config.h"

namespace edgevl {

// Reads and parses a JSON file; errors name the file and the byte offset of a syntax error.
nlohmann::json read_json_file(const std::filesystem::path& p);

// `j` is a config object (top-level config.json, or the nested `llm_config` of an InternVL
// wrapper); `what` names it in errors (e.g. "/m/config.json" or "/m/config.json llm_config").
// Notes about accepted-but-noteworthy settings (e.g. InternLM2 dynamic NTK rope scaling) are
// appended to `notes` when given.
LlmConfig parse_llm_config(const nlohmann::json& j, const std::string& what,
                           std::vector<std::string>* notes = nullptr);

// Reads DIR/config.json and, if present, DIR/generation_config.json (its eos ids are added
// to extra_eos_ids). An InternVL wrapper (model_type "internvl_chat") is unwrapped to its
// `llm_config`.
LlmConfig load_llm_config(const std::filesystem::path& dir,
                          std::vector<std::string>* notes = nullptr);

}  // namespace edgevl
