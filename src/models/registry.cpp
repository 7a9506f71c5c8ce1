#include "models/registry.h"

#include "core/error.h"

namespace edgevl::models {

// Each family's file defines its accessor; this is the one list of them.
const LlmFamily& llama_family();
const LlmFamily& qwen2_family();
const LlmFamily& qwen3_family();
const LlmFamily& internlm2_family();

const std::vector<const LlmFamily*>& llm_families() {
  static const std::vector<const LlmFamily*> all = {
      &llama_family(),
      &qwen2_family(),
      &qwen3_family(),
      &internlm2_family(),
  };
  return all;
}

const LlmFamily* find_family(const std::string& model_type, const std::string& architecture) {
  for (const LlmFamily* f : llm_families()) {
    const auto& names = model_type.empty() ? f->architectures() : f->model_types();
    const std::string& want = model_type.empty() ? architecture : model_type;
    for (const std::string& n : names)
      if (n == want) return f;
  }
  return nullptr;
}

const LlmFamily& family_named(const std::string& name) {
  for (const LlmFamily* f : llm_families())
    if (name == f->name()) return *f;
  fail("model family '{}' is not known to this edgevl (known: {})", name, supported_model_types());
}

std::string supported_model_types() {
  std::string s;
  for (const LlmFamily* f : llm_families())
    for (const std::string& t : f->model_types()) s += (s.empty() ? "" : ", ") + t;
  return s;
}

}  // namespace edgevl::models
