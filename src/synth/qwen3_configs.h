#pragma once
// The published configs of Qwen3-0.6B and Qwen3-1.7B: `synth --arch qwen3-*` writes them as
// they are, and InternVL3.5-1B / 2B carry them as their llm_config.
#include <nlohmann/json.hpp>
#include <string>

namespace edgevl::synth {

// "qwen3-0.6b" or "qwen3-1.7b": config.json as published (key for key).
nlohmann::ordered_json qwen3_config(const std::string& arch);
// generation_config.json: Qwen3's published sampling defaults (thinking mode).
nlohmann::ordered_json qwen3_generation_config();

}  // namespace edgevl::synth
